"""The TAO helpers' details (``cli/tao/core.py``): the whole ``docker run`` line, every program-fault signature, every
report line, and the small path and override rules."""

from __future__ import annotations

import base64
import json

import pytest

from airflow_provider_brev.core.protocol.remote_scripts import load_script, script_body
from airflow_provider_brev.core.staging.manifest import validate_outputs
from airflow_provider_brev.core.tao.checkpoints import (
    CHECKPOINT_LOG_REGEX,
    checkpoint_order,
    checkpoints_after,
    checkpoints_uri,
    newest_checkpoint,
    resume_overrides,
)
from airflow_provider_brev.core.tao.command import (
    STARTED_MARKER,
    build_tao_command,
    format_override,
    image_registry,
    remote_path,
    spec_references_hugging_face,
    validate_image,
)
from airflow_provider_brev.core.tao.report import (
    MAX_REPORT_FILE_BYTES,
    PROGRAM_FAULTS,
    TaoReport,
    build_report_command,
    classify_fault,
    parse_report,
    verify_tao_run,
)

IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_the_docker_run_line_is_exact():
    command = build_tao_command(
        image=IMAGE,
        task="visual_changenet",
        action="train",
        spec_file="train.yaml",
        results_dir="runs/r1/",
        overrides={"train.num_epochs": 3},
        mounts={"data": "/data"},
        env={"PLAIN": "a b"},
        secret_env_names=["NGC_KEY"],
        num_gpus=2,
        ipc="host",
        container_name="tao-1",
        extra_docker_args=["--ulimit", "memlock=-1"],
    )
    assert command == (
        'mkdir -p "$HOME"/runs/r1/train && touch "$HOME"/runs/r1/train/.brev-tao-started && '
        "docker run --rm --gpus 2 --name tao-1 --shm-size 8g --ipc host "
        '-v "$HOME"/runs/r1/:/results -v "$HOME"/runs/r1/specs:/specs:ro -v "$HOME"/data:/data '
        "-e 'PLAIN=a b' -e NGC_KEY --ulimit memlock=-1 "
        f"{IMAGE} visual_changenet train -e /specs/train.yaml results_dir=/results train.num_epochs=3 train.num_gpus=2"
    )
    assert STARTED_MARKER == ".brev-tao-started"


def test_gap_analysis_writes_into_its_action_directory_and_gets_no_gpu_override():
    command = build_tao_command(
        image=IMAGE,
        task="gap_analysis",
        action="analyze",
        spec_file="g.yaml",
        results_dir="/abs",
        num_gpus=1,
        shm_size=None,
    )
    assert command.endswith("gap_analysis analyze -e /specs/g.yaml results_dir=/results/analyze")
    assert "--shm-size" not in command and "num_gpus" not in command
    assert " --gpus 1 " in command
    assert "--gpus all" in build_tao_command(image=IMAGE, task="t", action="a", spec_file="s", results_dir="r")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"task": "Bad-Task"}, "Invalid TAO task"),
        ({"action": ""}, "Invalid TAO action"),
        ({"task": None}, "Invalid TAO task"),  # an unset templated value: refused, not a TypeError
        ({"action": None}, "Invalid TAO action"),
        ({"spec_file": "a b.yaml"}, "Invalid spec file name"),
        ({"mounts": {"data": "relative"}}, "must be absolute"),
        ({"env": {"1BAD": "x"}}, "Invalid environment variable name"),
        ({"secret_env_names": ["BAD-NAME"]}, "Invalid environment variable name"),
        ({"image": "tao-toolkit:latest"}, "Invalid TAO image"),
        ({"results_dir": "a\nb"}, "Invalid remote path"),
    ],
)
def test_bad_tao_arguments_are_refused(kwargs, match):
    base = {"image": IMAGE, "task": "t", "action": "a", "spec_file": "s.yaml", "results_dir": "r"}
    with pytest.raises(ValueError, match=match):
        build_tao_command(**{**base, **kwargs})


def test_images_paths_and_overrides():
    assert validate_image(f"  {IMAGE} ") == IMAGE
    with pytest.raises(ValueError, match="Invalid TAO image"):
        validate_image(None)  # type: ignore[arg-type]
    assert image_registry(IMAGE) == "nvcr.io"
    assert remote_path("/abs/x") == "/abs/x"
    assert remote_path("~/x y") == "\"$HOME\"/'x y'"
    assert remote_path("rel") == '"$HOME"/rel'
    for bad in ("", "a\nb", "a\x00b"):
        with pytest.raises(ValueError, match="Invalid remote path"):
            remote_path(bad)
    assert [format_override("k", v) for v in (True, False, None, [1, "a"], {"x": 1}, 2.5)] == [
        "k=true",
        "k=false",
        "k=null",
        'k=[1,"a"]',
        'k={"x":1}',
        "k=2.5",
    ]
    with pytest.raises(ValueError, match="Invalid override key"):
        format_override("bad key", 1)


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


#: (case, a spec or a value in it, references Hugging Face)
HF_SPECS = [
    ("a model deep in a mapping", {"a": [{"b": "hf_model://x/y"}]}, True),
    ("upper case, in a tuple", ("HF://x",), True),
    ("a dataset", "hf_dataset://d", True),
    ("the hub's web address", "https://huggingface.co/x", True),
    ("S3, a number, a null", {"a": ["s3://b/k", 1, None]}, False),
    ("a number alone", 3, False),
    ("a mapping of local paths", {"a": "/results/x.pth"}, False),
    ("hf:// not at the start", "s3://b/hf://x", False),
    ("nothing", {}, False),
]


@pytest.mark.parametrize(("case", "spec", "hf"), HF_SPECS, ids=[r[0] for r in HF_SPECS])
def test_hugging_face_references_anywhere_in_a_spec(case, spec, hf):
    assert spec_references_hugging_face(spec) is hf, case


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
