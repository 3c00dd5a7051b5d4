"""Pure TAO command building, report parsing and fault classification."""

from __future__ import annotations

import base64
import json
import subprocess

import pytest

from airflow_provider_brev.core.staging.manifest import validate_outputs
from airflow_provider_brev.core.tao.checkpoints import (
    checkpoints_after,
    checkpoints_uri,
    newest_checkpoint,
    resume_overrides,
)
from airflow_provider_brev.core.tao.command import (
    build_tao_command,
    format_override,
    spec_references_hugging_face,
    validate_image,
)
from airflow_provider_brev.core.tao.report import (
    COMMAND_FAILED,
    NOT_VERIFIED,
    PROGRAM_FAULT,
    UNREACHABLE_KPI,
    VERIFIED,
    TaoReport,
    build_report_command,
    classify_fault,
    parse_report,
    verify_tao_run,
)

IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"


@pytest.mark.parametrize("image", [IMAGE, "nvcr.io/nvidia/tao/tao-toolkit@sha256:" + "a" * 64, "registry:5000/x/y:1"])
def test_valid_images(image):
    assert validate_image(image) == image


@pytest.mark.parametrize("image", ["tao-toolkit", "nvcr.io/nvidia/tao/tao-toolkit", "nvcr.io/x:latest; rm -rf /", ""])
def test_images_without_registry_or_explicit_tag_are_refused(image):
    with pytest.raises(ValueError, match="explicit tag or digest"):
        validate_image(image)


def test_docker_command_passes_secrets_by_name_only():
    command = build_tao_command(
        image=IMAGE,
        task="visual_changenet",
        action="train",
        spec_file="visual_changenet_train.yaml",
        results_dir="runs/r1",
        overrides={"train.num_epochs": 5, "train.pretrained_model_path": "/results/prev.pth"},
        mounts={"data/vcn": "/data"},
        env={"PLAIN": "1"},
        secret_env_names=["HF_TOKEN"],
        num_gpus=2,
    )
    assert "-e HF_TOKEN " in command and "HF_TOKEN=" not in command
    assert "--gpus 2" in command and "--shm-size 8g" in command
    assert '"$HOME"/data/vcn:/data' in command
    assert "visual_changenet train -e /specs/visual_changenet_train.yaml results_dir=/results" in command
    assert "train.num_epochs=5" in command and "train.num_gpus=2" in command


def test_overrides_are_formatted_for_hydra():
    assert format_override("a.b", True) == "a.b=true"
    assert format_override("a", [1, 2]) == "a=[1,2]"
    with pytest.raises(ValueError, match="Invalid override key"):
        format_override("a;b", 1)


def test_report_command_round_trip_in_bash(tmp_path):
    action = tmp_path / "runs" / "train"
    action.mkdir(parents=True)
    (action / ".brev-tao-started").touch()
    (action / "status.json").write_text(
        json.dumps({"status": "STARTED"}) + "\n" + json.dumps({"status": "SUCCESS", "kpi": {"val_loss": 0.1}}) + "\n"
    )
    (action / "model_epoch_004_step_40.pth").write_bytes(b"x")
    (action / "metrics.json").write_text(json.dumps({"f1": 0.9, "nested": {"x": 1}}))
    (action / "threshold.txt").write_text("0.42\n")
    log = tmp_path / "job.log"
    log.write_text("fine\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    script = build_report_command(results_dir=str(tmp_path / "runs"), action="train", job_log=str(log))
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    report = parse_report(done.stdout.splitlines())
    assert report.last_status == {"status": "SUCCESS", "kpi": {"val_loss": 0.1}}
    assert report.new_checkpoints == ["model_epoch_004_step_40.pth"]
    assert report.kpis() == {"val_loss": 0.1, "f1": 0.9, "threshold": 0.42}
    assert classify_fault(report.fault_lines)[0] == "out of memory"
    assert report.unreachable_kpi is None


def test_report_cut_short_is_an_error():
    with pytest.raises(ValueError, match="cut short"):
        parse_report(["BREV_TAO_STATUS " + base64.b64encode(b"{}").decode()])


def test_hugging_face_detection():
    assert spec_references_hugging_face({"model": {"backbone": "hf_model://nvidia/C-RADIOv2-B"}})
    assert spec_references_hugging_face(["https://huggingface.co/x"])
    assert not spec_references_hugging_face({"a": "/results/x.pth", "b": 3})


def report(status=None, *, started=100.0, checkpoints=(), unreachable=None, faults=()):
    """A :class:`TaoReport` as :func:`parse_report` builds it."""
    return TaoReport(
        last_status=None if status is None else {"status": status},
        started_at=started,
        checkpoints=list(checkpoints),
        files={} if unreachable is None else {"unreachable_kpi.txt": unreachable},
        fault_lines=list(faults),
    )


NEW_CKPT = [(150.0, 10, "model_epoch_001.pth")]
OLD_CKPT = [(50.0, 10, "model_epoch_001.pth")]
OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory."


@pytest.mark.parametrize(
    ("exit_code", "tao_report", "require_ckpt", "kind", "in_message"),
    [
        (0, report("SUCCESS", checkpoints=NEW_CKPT), True, VERIFIED, "succeeded"),
        (0, report("SUCCESS"), False, VERIFIED, "succeeded"),
        (0, report("SUCCESS", checkpoints=OLD_CKPT), True, NOT_VERIFIED, "no new checkpoint"),
        (0, report("SUCCESS"), True, NOT_VERIFIED, "no new checkpoint"),
        (0, report("RUNNING", checkpoints=NEW_CKPT), True, NOT_VERIFIED, "last status.json record is RUNNING"),
        (0, report(None, checkpoints=NEW_CKPT), True, NOT_VERIFIED, "record is missing (in runs/train/status.json)"),
        (1, report("FAILURE", faults=[OOM]), True, PROGRAM_FAULT, "out of memory"),
        (1, report(None, faults=["omegaconf.errors.ConfigKeyError: Key 'x' not in"]), False, PROGRAM_FAULT, "spec"),
        (137, report("STARTED"), True, COMMAND_FAILED, "exit code 137"),
        (0, report("SUCCESS", unreachable="recall 0.99 unreachable"), False, UNREACHABLE_KPI, "unreachable"),
        (2, report(None, unreachable="x", faults=[OOM]), False, UNREACHABLE_KPI, "no retry"),
    ],
)
def test_verify_tao_run(exit_code, tao_report, require_ckpt, kind, in_message):
    verdict = judge(tao_report, exit_code, require_ckpt)
    assert verdict.kind == kind
    assert verdict.ok == (kind == VERIFIED)
    assert in_message in verdict.message
    assert verdict.message.startswith("TAO visual_changenet train")


def judge(tao_report, exit_code=0, require_ckpt=True, resumed_from=None):
    return verify_tao_run(
        tao_report,
        exit_code=exit_code,
        task="visual_changenet",
        action="train",
        results_dir="runs/",
        require_new_checkpoint=require_ckpt,
        resumed_from=resumed_from,
    )


RESTORED = "model_epoch_005_step_00036.pth"


@pytest.mark.parametrize(
    ("checkpoints", "kind", "in_message"),
    [
        # the restored file was written just before the launch: it looks new, but it is not training
        ([(150.0, 10, RESTORED)], NOT_VERIFIED, f"no checkpoint beyond {RESTORED}"),
        ([], NOT_VERIFIED, "resume trained nothing"),
        ([(150.0, 10, RESTORED), (160.0, 10, "model_epoch_006_step_00042.pth")], VERIFIED, "succeeded"),
        ([(160.0, 10, "model_epoch_009_step_00060.pth")], VERIFIED, "succeeded"),
        ([(150.0, 10, "model_epoch_004_step_00030.pth")], NOT_VERIFIED, "resume trained nothing"),
    ],
)
def test_a_resume_must_write_a_checkpoint_beyond_the_restored_one(checkpoints, kind, in_message):
    verdict = judge(report("SUCCESS", checkpoints=checkpoints), resumed_from=RESTORED)
    assert (verdict.kind, in_message in verdict.message) == (kind, True)


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
