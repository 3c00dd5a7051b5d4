"""Unit tests of ``airflow_provider_brev/core/tao/checkpoints.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.staging.manifest import validate_outputs
from airflow_provider_brev.core.tao.checkpoints import (
    CHECKPOINT_LOG_REGEX,
    checkpoint_order,
    checkpoints_after,
    checkpoints_uri,
    newest_checkpoint,
    resume_overrides,
)


def test_checkpoints_and_resume():
    assert checkpoint_order("a/b/model_epoch_010_step_200.pth") == (10, 200)
    assert checkpoint_order("model_epoch_1_step_2.pth.tmp") is None
    names = ["x/model_epoch_002_step_9.pth", "model_epoch_010_step_1.pth", "model_epoch_010_step_3.pth", "notes.txt"]
    assert newest_checkpoint(names) == "model_epoch_010_step_3.pth"
    assert newest_checkpoint(["notes.txt"]) is None
    assert checkpoints_after(names, "model_epoch_010_step_1.pth") == ["model_epoch_010_step_3.pth"]
    assert checkpoints_after(names, "custom.pth") == names[:3]  # not a training checkpoint: every one is later
    assert resume_overrides("s3/k/model_epoch_003_step_1.pth", action="train") == {
        "train.resume_training_checkpoint_path": "/results/train/model_epoch_003_step_1.pth"
    }
    outputs = validate_outputs({"runs/r1": "s3://bucket/out/", "/abs/other": "s3://bucket/abs/"})
    assert checkpoints_uri(outputs, results_dir="~/runs/r1/", action="train") == "s3://bucket/out/train/"
    assert checkpoints_uri(
        validate_outputs({"runs/r1/train": "s3://bucket/t/"}), results_dir="runs/r1", action="train"
    ) == ("s3://bucket/t/")
    assert checkpoints_uri(outputs, results_dir="elsewhere", action="train") is None


@pytest.mark.parametrize(
    ("line", "seen"),
    [
        ("Saved checkpoint to /results/train/model_epoch_003_step_120.pth", True),
        ("saving checkpoint model_epoch_1_step_2.pth", True),
        ("loaded checkpoint model_epoch_1_step_2.pth", False),
    ],
)
def test_the_checkpoint_log_line(line, seen):
    import re

    assert (re.search(CHECKPOINT_LOG_REGEX, line) is not None) is seen


@pytest.mark.parametrize(
    ("names", "newest"),
    [
        ([], None),
        (["status.json", "changenet_model_classify_latest.pth"], None),
        (
            ["model_epoch_009_step_00060.pth", "model_epoch_010_step_00066.pth", "model_epoch_002_step_9.pth"],
            "model_epoch_010_step_00066.pth",
        ),
        (["model_epoch_003_step_00010.pth", "model_epoch_003_step_00020.pth"], "model_epoch_003_step_00020.pth"),
        (["model_epoch_1.pth", "x/model_epoch_001_step_00001.pth"], "x/model_epoch_001_step_00001.pth"),
    ],
)
def test_newest_checkpoint(names, newest):
    assert newest_checkpoint(names) == newest


def test_checkpoints_after():
    paths = ["model_epoch_004_step_1.pth", "model_epoch_005_step_2.pth", "model_epoch_006_step_3.pth", "x.onnx"]
    assert checkpoints_after(paths, "model_epoch_005_step_2.pth") == ["model_epoch_006_step_3.pth"]


@pytest.mark.parametrize(
    ("outputs", "results_dir", "uri"),
    [
        ({"vcn/results/train": "s3://bkt/runs/r1/train"}, "vcn/results", "s3://bkt/runs/r1/train/"),
        ({"vcn/results": "s3://bkt/runs/r1/"}, "vcn/results", "s3://bkt/runs/r1/train/"),
        ({"~/vcn/results/": "s3://bkt/runs/r1/"}, "vcn/results", "s3://bkt/runs/r1/train/"),
        ({"vcn": "s3://bkt/r/"}, "~/vcn/results", "s3://bkt/r/results/train/"),
        ({"/abs/results": "s3://bkt/r/"}, "/abs/results", "s3://bkt/r/train/"),
        ({"vcn/results/evaluate": "s3://bkt/r/"}, "vcn/results", None),
        ({"vcn/res": "s3://bkt/r/"}, "vcn/results", None),  # a name prefix is not a parent directory
        ({}, "vcn/results", None),
    ],
)
def test_checkpoints_uri(outputs, results_dir, uri):
    assert checkpoints_uri(validate_outputs(outputs), results_dir=results_dir, action="train") == uri


def test_resume_overrides_point_at_the_container_path():
    assert resume_overrides("model_epoch_005_step_00036.pth", action="train") == {
        "train.resume_training_checkpoint_path": "/results/train/model_epoch_005_step_00036.pth"
    }
