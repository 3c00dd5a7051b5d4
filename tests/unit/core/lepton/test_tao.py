"""Unit tests of ``airflow_provider_brev/core/lepton/tao.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.lepton import tao


# -- tao: one TAO action as the job's command --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "command"),
    [
        (
            {"task": "visual_changenet", "action": "train", "num_gpus": 2, "overrides": {"train.epochs": 3}},
            "mkdir -p /workspace/results/train && touch /workspace/results/train/.brev-tao-started && "
            "visual_changenet train -e /workspace/results/specs/s.yaml results_dir=/workspace/results "
            "train.epochs=3 train.num_gpus=2",
        ),
        (
            {"task": "visual_changenet", "action": "train"},  # all GPUs: no override
            "mkdir -p /workspace/results/train && touch /workspace/results/train/.brev-tao-started && "
            "visual_changenet train -e /workspace/results/specs/s.yaml results_dir=/workspace/results",
        ),
        (
            {"task": "visual_changenet", "action": "train", "num_gpus": "all"},
            "mkdir -p /workspace/results/train && touch /workspace/results/train/.brev-tao-started && "
            "visual_changenet train -e /workspace/results/specs/s.yaml results_dir=/workspace/results",
        ),
        (
            {"task": "visual_changenet", "action": "train", "num_gpus": 2, "overrides": {"train.num_gpus": 1}},
            "mkdir -p /workspace/results/train && touch /workspace/results/train/.brev-tao-started && "
            "visual_changenet train -e /workspace/results/specs/s.yaml results_dir=/workspace/results "
            "train.num_gpus=1",  # the user's own override stands
        ),
        (
            {"task": "gap_analysis", "action": "vcn_aoi", "num_gpus": 2},  # its results below the action, no GPUs
            "mkdir -p /workspace/results/vcn_aoi && touch /workspace/results/vcn_aoi/.brev-tao-started && "
            "gap_analysis vcn_aoi -e /workspace/results/specs/s.yaml results_dir=/workspace/results/vcn_aoi",
        ),
        (
            {"task": "gap_analysiss", "action": "vcn_aoi", "num_gpus": 2},  # near miss of gap_analysis
            "mkdir -p /workspace/results/vcn_aoi && touch /workspace/results/vcn_aoi/.brev-tao-started && "
            "gap_analysiss vcn_aoi -e /workspace/results/specs/s.yaml results_dir=/workspace/results "
            "vcn_aoi.num_gpus=2",
        ),
    ],
)
def test_tao_job_commands(kwargs, command):
    assert tao.tao_job_command(spec_file="s.yaml", results_dir="results", **kwargs) == command


@pytest.mark.parametrize(
    ("task", "action", "words"),
    [
        ("Train", "train", "Invalid TAO task 'Train'"),
        ("1task", "train", "Invalid TAO task '1task'"),
        ("", "train", "Invalid TAO task ''"),
        (None, "train", "Invalid TAO task None"),
        ("visual_changenet", "train; rm", "Invalid TAO action 'train; rm'"),
        ("visual_changenet", "", "Invalid TAO action ''"),
    ],
)
def test_tao_tasks_and_actions_are_words(task, action, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        tao.tao_job_command(task=task, action=action, spec_file="s.yaml", results_dir="results")
