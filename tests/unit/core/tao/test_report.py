"""The TAO helpers' details (``cli/tao/core.py``): the whole ``docker run`` line, every program-fault signature, every
report line, and the small path and override rules."""

from __future__ import annotations

import base64
import json
import subprocess

import pytest

from airflow_provider_brev.core.protocol.remote_scripts import load_script, script_body
from airflow_provider_brev.core.tao.report import (
    COMMAND_FAILED,
    MAX_REPORT_FILE_BYTES,
    NOT_VERIFIED,
    PROGRAM_FAULT,
    PROGRAM_FAULTS,
    UNREACHABLE_KPI,
    VERIFIED,
    TaoReport,
    build_report_command,
    classify_fault,
    parse_report,
    verify_tao_run,
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("RuntimeError: CUDA out of memory. Tried to allocate", "out of memory"),
        ("torch.OutOfMemoryError: boom", "out of memory"),
        ("CUBLAS_STATUS_ALLOC_FAILED when calling", "out of memory"),
        ("device-side assert triggered", "CUDA device-side assert"),
        ("CUDA error: an illegal memory access", "CUDA device-side assert"),
        ("omegaconf.errors.ConfigKeyError: Key 'x' not in", "invalid spec"),
        ("pydantic ValidationError: 1 error", "invalid spec"),
        ("train requires -e/--experiment_spec_file", "invalid spec"),
        ("Could not override 'train.x'", "invalid spec"),
        ("ERROR: Unexpected bus error encountered in worker", "shared memory exhausted"),
        ("insufficient shm_size for the dataloader", "shared memory exhausted"),
        ("FileNotFoundError: [Errno 2] /data/x", "missing input file"),
        ("cat: /data/x: No such file or directory", "missing input file"),
    ],
)
def test_every_program_fault_signature(line, kind):
    found = classify_fault(["epoch 1 ok", line])
    assert found is not None
    assert found[0] == kind
    assert found[1] == {k: hint for k, _, hint in PROGRAM_FAULTS}[kind]
    assert found[2] == line.strip()


def test_fault_hints_name_what_to_do():
    hints = {kind: hint for kind, _, hint in PROGRAM_FAULTS}
    assert hints == {
        "out of memory": "reduce the batch size (halve dataset.batch_size) or use a GPU with more memory",
        "CUDA device-side assert": "check labels/class counts in the dataset and spec",
        "invalid spec": "fix the experiment spec or overrides",
        "shared memory exhausted": "run the container with a larger --shm-size (shm_size='8g') or ipc='host'",
        "missing input file": "stage the inputs onto the instance (S3ToBrevOperator) and check the spec paths",
    }
    assert classify_fault(["all fine", ""]) is None


def test_the_report_command_reads_every_result_file_and_the_log():
    command = build_report_command(results_dir="runs/r1/", action="train", job_log="jobs/j/log")
    assert command.startswith('__T_DIR="$HOME"/runs/r1/train\n')
    names = ("metrics.json", "threshold.txt", "results.json", "weak_samples_breakdown.txt", "unreachable_kpi.txt")
    assert f"__T_FILES='{' '.join(names)}'\n" in command
    assert f"__T_MAX={MAX_REPORT_FILE_BYTES}\n" in command
    assert MAX_REPORT_FILE_BYTES == 256 * 1024
    assert '__T_LOG="$HOME"/jobs/j/log\n' in command
    assert command.endswith(script_body("tao_report"))
    assert load_script("tao_report").endswith("__brev_mark BREV_TAO_END\nexit 0\n")
    assert "__T_LOG=''\n" in build_report_command(results_dir="r", action="a")


def test_a_report_is_parsed_line_by_line():
    status = json.dumps({"status": "SUCCESS", "kpi": {"accuracy": 0.9}})
    lines = [
        "noise",
        f"BREV_TAO_STATUS {b64(status)}",
        "BREV_TAO_STARTED 1000.5",
        "BREV_TAO_CKPT 1002.0 2048 model_epoch_001_step_10.pth",
        "BREV_TAO_CKPT 999.0 1024 model_epoch_000_step_5.pth",
        f"BREV_TAO_FILE metrics.json {b64(json.dumps({'mAP': 0.5, 'nested': {'x': 1}, 'name': 'm', 'ok': True}))}",
        f"BREV_TAO_FILE threshold.txt {b64('0.42 extra')}",
        f"BREV_TAO_FILE results.json {b64(json.dumps({'recall': 1}))}",
        "BREV_TAO_FILE empty.txt",
        f"BREV_TAO_FAULT {b64('CUDA out of memory')}",
        "BREV_TAO_END",
    ]
    report = parse_report(lines)
    assert report.last_status == {"status": "SUCCESS", "kpi": {"accuracy": 0.9}}
    assert report.started_at == 1000.5
    assert report.checkpoints == [
        (999.0, 1024, "model_epoch_000_step_5.pth"),
        (1002.0, 2048, "model_epoch_001_step_10.pth"),
    ]
    assert report.new_checkpoints == ["model_epoch_001_step_10.pth"]  # 999.0 is before the start (1 s of slack)
    assert report.files["empty.txt"] == ""
    assert report.fault_lines == ["CUDA out of memory"]
    assert report.kpis() == {"accuracy": 0.9, "mAP": 0.5, "name": "m", "ok": True, "recall": 1, "threshold": 0.42}
    assert report.unreachable_kpi is None


def test_report_edge_cases():
    assert parse_report(["BREV_TAO_STATUS -", "BREV_TAO_END"]).last_status is None
    assert parse_report([f"BREV_TAO_STATUS {b64('not json')}", "BREV_TAO_END"]).last_status == {"status": "UNPARSEABLE"}
    with pytest.raises(ValueError, match="cut short"):
        parse_report(["BREV_TAO_STATUS -"])
    slack = TaoReport(started_at=100.0, checkpoints=[(99.0, 1, "a.pth"), (98.9, 1, "b.pth")])
    assert slack.new_checkpoints == ["a.pth"]
    assert TaoReport(checkpoints=[(1.0, 1, "a.pth")]).new_checkpoints == ["a.pth"]  # no start marker: all are new
    text = TaoReport(files={"threshold.txt": "high\n", "metrics.json": "[1]", "results.json": "{bad"})
    assert text.kpis() == {"threshold": "high"}
    assert TaoReport(files={"threshold.txt": ""}).kpis() == {"threshold": ""}
    assert TaoReport(last_status={"kpi": "not a dict"}).kpis() == {}
    assert parse_report([f"BREV_TAO_FILE unreachable_kpi.txt {b64('x')}", "BREV_TAO_END"]).unreachable_kpi == "x"
    assert parse_report(["BREV_TAO_FAULT !!!", "BREV_TAO_END"]).fault_lines == [""]


def _verdict(report: TaoReport, **kwargs):
    base = {"exit_code": 0, "task": "t", "action": "train", "results_dir": "r/", "require_new_checkpoint": True}
    return verify_tao_run(report, **{**base, **kwargs})


def test_verdict_messages():
    ok = TaoReport(last_status={"status": "SUCCESS"}, checkpoints=[(5.0, 1, "model_epoch_002_step_1.pth")])
    assert _verdict(ok).ok
    assert _verdict(ok).message == "TAO t train succeeded."
    assert "last status.json record is missing (in r/train/status.json)" in _verdict(TaoReport()).message
    assert "FAILURE" in _verdict(TaoReport(last_status={"status": "FAILURE"})).message
    assert _verdict(TaoReport(last_status={"status": "SUCCESS"}), require_new_checkpoint=False).ok
    assert _verdict(ok, resumed_from="model_epoch_001_step_1.pth").ok
    assert not _verdict(ok, resumed_from="model_epoch_002_step_1.pth").ok
    assert _verdict(ok, resumed_from="model_epoch_009_step_1.pth", require_new_checkpoint=False).ok
    failed = _verdict(TaoReport(fault_lines=["x" * 400 + " CUDA out of memory"]), exit_code=1)
    assert failed.kind == "program_fault" and len(failed.message) < 600
    unreachable = _verdict(TaoReport(files={"unreachable_kpi.txt": " " + "k" * 400}), exit_code=1)
    assert unreachable.kind == "unreachable_kpi" and "k" * 300 + ")" in unreachable.message


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
