"""The simulator's fake ``docker`` and fake TAO entrypoints, driven through the fake ``brev exec``.

Every command runs the way the provider runs it: a ``bash -c`` string in an instance sandbox, reached
through the installed ``brev`` wrapper. The ``documented`` profile is used so that remote exit codes
pass through ``brev exec`` unchanged (the released CLI turns them into 1 and re-runs the command).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from airflow_provider_brev.testing.fake_tao.spec import (
    apply_overrides,
    parse_spec,
    read_fake_parquet,
    resolve_interpolations,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from airflow_provider_brev.testing import BrevSimulator

PYT = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"
DS = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-data-services"
NGC_KEY = "nvapi-SIMULATED-ngc-key-0123456789"
RUN = "docker run --rm --gpus all --shm-size=8g -v $HOME/data:/data -v $HOME/results:/results"

SPEC = """\
# Visual ChangeNet classify (written the way a provider would)
results_dir: /results/exp
encryption_key: tlt_encode
task: classify
model:
  backbone:
    type: c_radio_v2_vit_base_patch16
dataset:
  classify:
    batch_size: 4
    workers: 2
    image_ext: .jpg
    input_map: {LowAngleLight: 0, SolderLight: 1}
    train_dataset:
      csv_path: /data/dataset.csv
      images_dir: /data/images
    validation_dataset:
      csv_path: /data/dataset.csv
      images_dir: /data/images
    test_dataset:
      csv_path: /data/dataset.csv
      images_dir: /data/images
train:
  num_epochs: 4
  checkpoint_interval: 2
  results_dir: ${results_dir}/train
evaluate:
  checkpoint: /results/exp/train/model_epoch_003_step_00012.pth
"""


@pytest.fixture
def brev_sim_profile() -> str:
    return "documented"


def sh(sim: BrevSimulator, command: str, name: str = "gpu", timeout: float = 60) -> subprocess.CompletedProcess:
    """``brev exec <name> <command>`` without brev's own additions (the instance name brev prints after a
    success, the ``exit status N`` line after a failure)."""
    raw = subprocess.run(
        [str(sim.brev_path), "exec", name, command],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    out, err = raw.stdout.decode(), raw.stderr.decode()  # no universal newlines: keep the \r of progress bars
    if raw.returncode == 0 and out.endswith(f"{name}\n"):
        out = out[: -len(name) - 1]
    if raw.returncode and err.endswith(f"exit status {raw.returncode}\n"):  # brev's own last line
        err = err[: -len(f"exit status {raw.returncode}\n")]
    return subprocess.CompletedProcess(raw.args, raw.returncode, out, err)


def wait_for(predicate: Callable[[], object], timeout: float = 10.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def status_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stage_dataset(home: Path) -> None:
    """What the provider's staging step leaves on the instance: CSV, extracted images, specs, and the champion
    model's inference results (for gap analysis)."""
    data = home / "data"
    (data / "images").mkdir(parents=True)
    (data / "inference").mkdir()
    lines = ["input_path,golden_path,label,object_name"]
    inference = ["input_path,object_name,label,siamese_score"]
    for i in range(12):
        label = "NO_PASS" if i % 3 == 0 else "PASS"
        lines.append(f"s{i},golden/g{i}.jpg,{label},obj{i}")
        inference.append(f"s{i},obj{i},{label},{(0.55 if label == 'PASS' else 0.6) + i / 100:.2f}")
        (data / "images" / f"s{i}_LowAngleLight.jpg").write_bytes(b"jpg")
        (data / "images" / "golden").mkdir(exist_ok=True)
        (data / "images" / "golden" / f"g{i}.jpg").write_bytes(b"jpg")
    (data / "dataset.csv").write_text("\n".join(lines) + "\n")
    (data / "inference" / "inference.csv").write_text("\n".join(inference) + "\n")
    (data / "spec.yaml").write_text(SPEC)
    (data / "gap.yaml").write_text("min_recall: 1.0\ntop_k_per_label: 3\n")
    (home / "results").mkdir()


@pytest.fixture
def gpu(brev_sim: BrevSimulator) -> BrevSimulator:
    """A ready single-L40S instance with the dataset staged and nvcr.io pullable without login."""
    brev_sim.login()
    brev_sim.create_instance_directly("gpu", ssh_config_home=brev_sim.home)
    brev_sim.set_docker(nvcr_anonymous_pull=True)
    stage_dataset(brev_sim.sandbox("gpu"))
    return brev_sim


# ------------------------------------------------------------------------------------ docker basics
def test_docker_info_probe_and_daemon_down(gpu: BrevSimulator) -> None:
    res = sh(gpu, "docker info")
    assert res.returncode == 0, res.stderr
    assert " Server Version: 27.3.1\n" in res.stdout
    assert " Runtimes: io.containerd.runc.v2 nvidia runc\n" in res.stdout
    gpu.set_docker(daemon_down=True)
    res = sh(gpu, "docker info >/dev/null && echo ok:docker")
    assert res.returncode == 1
    assert "Cannot connect to the Docker daemon at unix:///var/run/docker.sock" in res.stderr
    assert "ok:docker" not in res.stdout
    res = sh(gpu, f"docker pull {PYT}")
    assert res.returncode == 1
    with pytest.raises(TypeError, match="unknown docker knobs"):
        gpu.set_docker(bogus=True)


def test_ngc_login_on_stdin_gates_pulls(gpu: BrevSimulator) -> None:
    gpu.set_docker(nvcr_anonymous_pull=False, revoked_ngc_keys=["nvapi-revoked"])
    res = sh(gpu, f"docker pull {PYT}")
    assert res.returncode == 1
    assert res.stderr.strip() == (
        'Error response from daemon: Head "https://nvcr.io/v2/nvidia/tao/tao-toolkit/manifests/6.26.3-pyt": '
        "unauthorized: authentication required"
    )
    unauthorized = 'Error response from daemon: Get "https://nvcr.io/v2/": unauthorized: authentication required'
    # the classic quoting bug: "$oauthtoken" expands to an empty user on the remote shell
    res = sh(gpu, f'printf %s {NGC_KEY} | docker login nvcr.io -u "$oauthtoken" --password-stdin')
    assert (res.returncode, res.stderr.strip()) == (1, "Must provide --username with --password-stdin")
    res = sh(gpu, f"printf %s {NGC_KEY} | docker login nvcr.io -u bob --password-stdin")
    assert (res.returncode, res.stderr.strip()) == (1, unauthorized)
    res = sh(gpu, "printf %s nvapi-revoked | docker login nvcr.io -u '$oauthtoken' --password-stdin")
    assert (res.returncode, res.stderr.strip()) == (1, unauthorized)
    res = sh(gpu, "docker login nvcr.io -u '$oauthtoken' --password-stdin < /dev/null")
    assert "Cannot perform an interactive login from a non TTY device" in res.stderr
    res = sh(gpu, f"printf '%s\\n' {NGC_KEY} > key && docker login nvcr.io -u '$oauthtoken' --password-stdin < key")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "Login Succeeded\n"
    config = (gpu.sandbox("gpu") / ".docker" / "config.json").read_text()
    assert "nvcr.io" in config
    assert NGC_KEY not in config
    res = sh(gpu, f"docker pull {PYT} && docker pull {PYT}")
    assert res.returncode == 0, res.stderr
    assert f"Status: Downloaded newer image for {PYT}\n" in res.stdout
    assert f"Status: Image is up to date for {PYT}\n" in res.stdout
    image = gpu.docker_images("gpu")[PYT]
    assert (image["pull_count"], image["downloads"]) == (2, 1)
    gpu.set_docker(missing_images=["nvcr.io/nvidia/tao/tao-toolkit:9.9.9-pyt"])
    res = sh(gpu, "docker pull nvcr.io/nvidia/tao/tao-toolkit:9.9.9-pyt")
    assert res.returncode == 1
    assert "manifest unknown" in res.stderr
    # a key on argv works (with docker's warning) but is recorded, never stored
    res = sh(gpu, f"docker login nvcr.io -u '$oauthtoken' -p {NGC_KEY}")
    assert res.returncode == 0
    assert "WARNING! Using --password via the CLI is insecure. Use --password-stdin." in res.stderr
    logins = gpu.docker_calls("gpu", subcommand="login")
    assert [c["password_on_argv"] for c in logins] == [False] * 5 + [True]
    assert [c["exit_code"] for c in logins] == [1, 1, 1, 1, 0, 0]
    assert NGC_KEY not in gpu.docker_calls_path.read_text()
    assert sh(gpu, f"docker run --rm {PYT} true").returncode == 0  # already pulled: no auth needed


def test_pull_failure_knob_and_implicit_pull(gpu: BrevSimulator) -> None:
    gpu.set_docker(fail_pull=1)
    res = sh(gpu, f"docker pull {PYT}")
    assert res.returncode == 1
    assert "Client.Timeout exceeded while awaiting headers" in res.stderr
    assert gpu.config()["docker"]["fail_pull"] == 0  # consumed
    res = sh(gpu, f"docker run --rm --gpus all {PYT} nvidia-smi -L")
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith(f"Unable to find image '{PYT}' locally\n")
    assert res.stdout.startswith("GPU 0: NVIDIA L40S (UUID: ")
    run = gpu.docker_calls("gpu", subcommand="run")[-1]
    assert (run["implicit_pull"], run["pulled"], run["exit_code"]) == (True, [PYT], 0)


@pytest.mark.parametrize(
    ("command", "code", "message"),
    [
        (f"docker run --bogus {PYT}", 125, "unknown flag: --bogus\nSee 'docker run --help'.\n"),
        (f"docker run -x {PYT}", 125, "unknown shorthand flag: 'x' in -x\nSee 'docker run --help'.\n"),
        ("docker run --rm", 125, "docker: 'docker run' requires at least 1 argument."),
        ("docker run --name", 125, "flag needs an argument: --name"),
        (f"docker run --shm-size 8q {PYT} true", 125, 'invalid argument "8q" for "--shm-size" flag'),
        (
            f"docker run -w work {PYT} true",
            125,
            "the working directory 'work' is invalid, it needs to be an absolute path",
        ),
        (f"docker run --rm -v data:data {PYT} true", 125, "invalid volume specification: 'data:data'"),
        (f"docker run --rm {PYT} no_such_tool", 127, 'exec: "no_such_tool": executable file not found in $PATH'),
        (f"docker run --rm {PYT} gap_analysis vcn_aoi", 127, 'exec: "gap_analysis": executable file not found'),
        (f"docker run --rm {DS} visual_changenet train", 127, 'exec: "visual_changenet": executable file not found'),
        (f"docker run --rm --gpus 2 {PYT} true", 125, "nvidia-container-cli: device error: 1: unknown device"),
        ("docker run --rm Bad/Image true", 125, "invalid reference format"),
    ],
)
def test_docker_run_validates_like_docker(gpu: BrevSimulator, command: str, code: int, message: str) -> None:
    res = sh(gpu, command)
    assert res.returncode == code, res.stderr
    assert message in res.stderr
    assert gpu.sandbox_pids("gpu") == []


def test_gpus_flag_on_cpu_instance_and_tao_only_inside_docker(gpu: BrevSimulator) -> None:
    gpu.create_instance_directly("cpu", instance_type="n2-standard-8", ssh_config_home=gpu.home)
    res = sh(gpu, f"docker run --rm --gpus all {PYT} true", name="cpu")
    assert res.returncode == 125
    assert 'could not select device driver "" with capabilities: [[gpu]]' in res.stderr
    # the TAO entrypoints only exist inside the fake containers
    res = sh(gpu, "visual_changenet train -e data/spec.yaml")
    assert res.returncode == 127
    assert "visual_changenet: command not found" in res.stderr


def test_mounts_env_and_no_inline_secret_on_the_command_line(gpu: BrevSimulator) -> None:
    script = "echo $NGC_API_KEY $MODE; cat /data/dataset.csv | head -1; ls /results; echo done > /results/x"
    res = sh(
        gpu,
        f"export NGC_API_KEY={NGC_KEY}; docker run --rm -e NGC_API_KEY -e MODE=/data/sub -v $HOME/data:/data "
        f"-v $HOME/results:/results:ro -w /data {PYT} bash -c '{script}'",
    )
    assert res.returncode == 0, res.stderr
    home = gpu.sandbox("gpu")
    lines = res.stdout.splitlines()
    assert lines[0] == f"{NGC_KEY} {home}/data/sub"  # -e values under a mount are rewritten too
    assert lines[1] == "input_path,golden_path,label,object_name"
    assert (home / "results" / "x").read_text() == "done\n"  # plain processes are not confined by :ro
    run = gpu.docker_calls("gpu", subcommand="run")[-1]
    assert run["env_keys"] == ["NGC_API_KEY", "MODE"]
    assert run["inline_env_values"] is True  # MODE=... was inline
    assert "-e" in run["argv"] and "MODE=<redacted>" in run["argv"]
    assert run["mounts"] == [[f"{home}/data", "/data", "rw"], [f"{home}/results", "/results", "ro"]]
    text = gpu.docker_calls_path.read_text()
    assert NGC_KEY not in text
    assert "/data/sub" not in text
    res = sh(gpu, f"docker run --rm -e NGC_API_KEY={NGC_KEY} {PYT} true")
    assert res.returncode == 0
    leaked = gpu.docker_calls("gpu", subcommand="run")[-1]
    assert leaked["inline_env_values"] is True
    assert NGC_KEY not in gpu.docker_calls_path.read_text()


# --------------------------------------------------------------------------------------------- TAO
def test_train_writes_status_json_checkpoints_and_log_markers(gpu: BrevSimulator) -> None:
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml")
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "Epoch 1/4 - train_loss: " in out and "Epoch 4/4 - train_loss: " in out
    assert "\rEpoch 3: 100%|##########| 3/3 " in out
    assert "] lightning: Saved checkpoint: /results/exp/train/model_epoch_001_step_00006.pth\n" in out
    assert out.rstrip().endswith("[TAO Toolkit] [INFO] root: Execution status: PASS")
    train = gpu.sandbox("gpu") / "results" / "exp" / "train"
    assert sorted(p.name for p in train.iterdir()) == [
        "changenet_model_classify_latest.pth",
        "model_epoch_001_step_00006.pth",
        "model_epoch_003_step_00012.pth",
        "status.json",
    ]
    assert os.readlink(train / "changenet_model_classify_latest.pth") == "model_epoch_003_step_00012.pth"
    recs = status_records(train / "status.json")
    assert [r["status"] for r in recs] == ["STARTED", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "SUCCESS"]
    assert {"date", "time", "status", "verbosity"} <= set(recs[0])
    assert [(r["epoch"], r["max_epoch"]) for r in recs[1:5]] == [(0, 4), (1, 4), (2, 4), (3, 4)]
    assert set(recs[1]["kpi"]) == {"val_loss", "val_acc"}
    assert recs[-1]["message"] == "Train finished successfully."
    assert recs[-1]["kpi"]["val_loss"] == recs[4]["kpi"]["val_loss"]
    run = gpu.tao_runs("gpu")[-1]
    assert (run["network"], run["action"], run["spec"], run["exit_code"]) == (
        "visual_changenet",
        "train",
        "/data/spec.yaml",
        0,
    )
    assert run["checkpoints_written"] == ["model_epoch_001_step_00006.pth", "model_epoch_003_step_00012.pth"]
    assert run["action_dir"] == "/results/exp/train"


def test_resume_at_max_epochs_and_silent_pass_knob_train_nothing(gpu: BrevSimulator) -> None:
    assert sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml").returncode == 0
    train = gpu.sandbox("gpu") / "results" / "exp" / "train"
    before = {p.name: p.stat().st_mtime_ns for p in train.glob("model_epoch_*.pth")}
    resume = "train.resume_training_checkpoint_path=/results/exp/train/model_epoch_003_step_00012.pth"
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml {resume}")
    assert res.returncode == 0
    assert "`Trainer.fit` stopped: `max_epochs=4` reached." in res.stdout
    assert "Execution status: PASS" in res.stdout
    assert {p.name: p.stat().st_mtime_ns for p in train.glob("model_epoch_*.pth")} == before
    recs = status_records(train / "status.json")
    assert [r["status"] for r in recs[-2:]] == ["STARTED", "SUCCESS"]  # appended, like TAO
    assert gpu.tao_runs("gpu")[-1]["outcome"] == "silent_pass"
    # resuming an unfinished run continues from the next epoch
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml train.num_epochs=6 {resume}")
    assert res.returncode == 0
    assert "Epoch 5/6" in res.stdout and "Epoch 4/6" not in res.stdout
    assert gpu.tao_runs("gpu")[-1]["checkpoints_written"] == ["model_epoch_005_step_00018.pth"]
    recs = status_records(train / "status.json")
    assert [(r["status"], r.get("epoch")) for r in recs[-4:]] == [
        ("STARTED", None),
        ("RUNNING", 4),
        ("RUNNING", 5),
        ("SUCCESS", None),
    ]
    # pretrained_model_path starts a new run at epoch 0 from those weights (the file must exist)
    pretrained = "train.pretrained_model_path=/results/exp/train/model_epoch_005_step_00018.pth"
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml results_dir=/results/next {pretrained}")
    assert res.returncode == 0 and "Epoch 1/4" in res.stdout
    assert gpu.tao_runs("gpu")[-1]["checkpoints_written"][0] == "model_epoch_001_step_00006.pth"
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml {pretrained.replace('005', '009')}")
    assert res.returncode == 1 and "FileNotFoundError: [Errno 2] No such file" in res.stdout
    (gpu.sandbox("gpu") / "results" / "junk.pth").write_bytes(b"not a checkpoint")
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml {resume.split('=')[0]}=/results/junk.pth")
    assert res.returncode == 1 and "UnpicklingError" in res.stdout
    gpu.set_tao(silent_pass=True)
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml results_dir=/results/fresh")
    assert res.returncode == 0
    fresh = gpu.sandbox("gpu") / "results" / "fresh" / "train"
    assert list(fresh.glob("*.pth")) == []
    assert status_records(fresh / "status.json")[-1]["status"] == "SUCCESS"


def test_program_faults_fail_with_failure_record(gpu: BrevSimulator) -> None:
    gpu.set_tao(oom="train", fail_at_epoch=1)
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml")
    assert res.returncode == 1
    assert "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB." in res.stdout
    assert res.stdout.rstrip().endswith("[TAO Toolkit] [WARNING] root: Execution status: FAIL")
    recs = status_records(gpu.sandbox("gpu") / "results" / "exp" / "train" / "status.json")
    assert [r["status"] for r in recs] == ["STARTED", "RUNNING", "FAILURE"]
    assert recs[-1]["message"].startswith("CUDA out of memory.")
    gpu.set_tao(oom=False, cuda_assert=1)
    res = sh(
        gpu,
        f"{RUN} {PYT} visual_changenet evaluate -e /data/spec.yaml evaluate.checkpoint=/results/exp/train/status.json",
    )
    assert res.returncode == 1
    assert "RuntimeError: CUDA error: device-side assert triggered" in res.stdout
    assert gpu.config()["tao"]["cuda_assert"] == 0
    gpu.set_tao(infra_error="train")
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml results_dir=/results/ecc")
    assert res.returncode == 1
    assert "uncorrectable ECC error encountered" in res.stdout and "Xid" in res.stdout
    gpu.set_tao(infra_error=False, killed=True, fail_at_epoch=2)
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml results_dir=/results/killed")
    assert res.returncode == 137
    assert "Execution status" not in res.stdout
    recs = status_records(gpu.sandbox("gpu") / "results" / "killed" / "train" / "status.json")
    assert [r["status"] for r in recs] == ["STARTED", "RUNNING", "RUNNING"]  # no terminal record
    assert gpu.tao_runs("gpu")[-1]["exit_code"] is None


def test_missing_inputs_and_bad_invocations(gpu: BrevSimulator) -> None:
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train")
    assert (res.returncode, res.stdout) == (
        1,
        "ERROR: The subtask `train` requires the following argument: -e/--experiment_spec_file\n",
    )
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/nope.yaml")
    assert (res.returncode, res.stdout) == (
        1,
        "ERROR: The indicated experiment spec file `/data/nope.yaml` doesn't exist!\n",
    )
    res = sh(gpu, f"{RUN} {DS} gap_analysis vcn_aoi results_dir=/results/g")
    assert res.returncode == 1
    assert "ValueError: The subtask vcn_aoi requires the following argument: -e/--experiment_spec_file" in res.stdout
    # data staging forgotten: the CSV or the extracted images are missing on the instance
    res = sh(
        gpu,
        f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml dataset.classify.train_dataset.csv_path=/data/train.csv",
    )
    assert res.returncode == 1
    assert "FileNotFoundError: [Errno 2] No such file or directory: '/data/train.csv'" in res.stdout
    recs = status_records(gpu.sandbox("gpu") / "results" / "exp" / "train" / "status.json")
    assert [r["status"] for r in recs] == ["STARTED", "FAILURE"]
    image = "data/images/s4_LowAngleLight.jpg"
    res = sh(gpu, f"mv {image} s4.jpg && {RUN} {PYT} visual_changenet train -e /data/spec.yaml; mv s4.jpg {image}")
    assert "No such file or directory: '/data/images/s4'" in res.stdout
    assert "Execution status: FAIL" in res.stdout
    base = (
        f"docker run --rm -v $HOME/data:/data -v $HOME/results:/results {PYT} visual_changenet train -e /data/spec.yaml"
    )
    res = sh(gpu, base.replace("--rm", "--rm --shm-size=8g"))  # no --gpus
    assert res.returncode == 1
    assert "RuntimeError: Found no NVIDIA driver on your system." in res.stdout
    res = sh(gpu, base.replace("--rm", "--rm --gpus all"))  # no --shm-size / --ipc=host
    assert res.returncode == 1
    assert "Unexpected bus error encountered in worker" in res.stdout
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml train.num_epochs=1")
    assert res.returncode == 1
    assert "train.checkpoint_interval (2) must be between 1 and train.num_epochs (1)" in res.stdout
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml oops")
    assert res.returncode == 1
    assert "Error parsing override 'oops'" in res.stdout
    # results_dir outside every mount: the run passes, the outputs die with the container
    res = sh(
        gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml results_dir=/workspace/out train.num_epochs=2"
    )
    assert res.returncode == 0
    assert not (gpu.sandbox("gpu") / "workspace").exists()
    assert not os.path.exists(gpu.tao_runs("gpu")[-1]["action_dir_host"])


GAP = (
    f"docker run --rm --gpus all --ipc=host -v $HOME:$HOME -w $HOME {DS} gap_analysis vcn_aoi -e $HOME/data/gap.yaml "
    "inference_results_dir=$HOME/data/inference train_config=$HOME/data/spec.yaml "
    "kpi_media_path=$HOME/data/images results_dir=$HOME/results/exp/rca"
)


def test_evaluate_and_gap_analysis(gpu: BrevSimulator) -> None:
    assert sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml").returncode == 0
    gpu.set_tao(kpis={"test_acc": 0.5})
    res = sh(gpu, f"{RUN} {PYT} visual_changenet evaluate -e /data/spec.yaml")
    assert res.returncode == 0, res.stdout
    final = status_records(gpu.sandbox("gpu") / "results" / "exp" / "evaluate" / "status.json")[-1]
    assert final["status"] == "SUCCESS"
    assert set(final["kpi"]) == {"test_acc", "test_fpr", "test_fnr", "defect_acc"}
    assert final["kpi"]["test_acc"] == 0.5
    gap = GAP
    res = sh(gpu, gap)
    assert res.returncode == 0, res.stdout
    assert "Chosen threshold: " in res.stdout
    rca = gpu.sandbox("gpu") / "results" / "exp" / "rca"
    assert {p.name for p in rca.iterdir()} == {
        "kpi_gaps.parquet",
        "threshold.txt",
        "metrics.json",
        "weak_samples_breakdown.txt",
        "status.json",
    }
    metrics = json.loads((rca / "metrics.json").read_text())
    assert {"precision", "recall", "f1", "tp", "fp", "tn", "fn", "per_label"} <= set(metrics)
    assert metrics["recall"] == 1.0
    assert float((rca / "threshold.txt").read_text()) == metrics["threshold"]
    gaps = read_fake_parquet(str(rca / "kpi_gaps.parquet"))
    assert len(gaps) == 2 * 3 * 2  # 2 labels x top 3 x 2 lightings
    assert set(gaps[0]) == {"filepath", "label", "siamese_score", "weakness"}
    gpu.set_tao(unreachable_kpi=True)
    res = sh(gpu, gap.replace("/rca", "/rca2"))
    assert res.returncode == 1
    rca2 = gpu.sandbox("gpu") / "results" / "exp" / "rca2"
    assert "Recommendation: retrain or relabel." in (rca2 / "unreachable_kpi.txt").read_text()
    assert not (rca2 / "threshold.txt").exists()
    assert status_records(rca2 / "status.json")[-1]["status"] == "FAILURE"
    assert gpu.tao_runs("gpu")[-1]["outcome"] == "unreachable_kpi"
    res = sh(gpu, gap.replace("--ipc=host", "--ipc=host --user 1000:1000"))
    assert res.returncode == 1
    assert "KeyError: 'getpwuid(): uid not found: 1000'" in res.stdout


def test_inference_scores_every_sample_and_export_writes_the_onnx_file(gpu: BrevSimulator) -> None:
    """Inference writes the ``inference.csv`` gap analysis reads; export the ONNX file; both need the checkpoint."""
    assert sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml").returncode == 0
    checkpoint = "inference.checkpoint=/results/exp/train/model_epoch_003_step_00012.pth"
    infer = "dataset.classify.infer_dataset.csv_path=/data/dataset.csv dataset.classify.infer_dataset.images_dir=/data/images"
    res = sh(gpu, f"{RUN} {PYT} visual_changenet inference -e /data/spec.yaml {checkpoint} {infer}")
    assert res.returncode == 0, res.stdout
    out = gpu.sandbox("gpu") / "results" / "exp" / "inference"
    assert status_records(out / "status.json")[-1]["status"] == "SUCCESS"
    rows = (out / "inference.csv").read_text().splitlines()
    assert rows[0] == "input_path,object_name,label,siamese_score" and len(rows) == 1 + 12
    export = "export.checkpoint=/results/exp/train/model_epoch_003_step_00012.pth"
    res = sh(gpu, f"{RUN} {PYT} visual_changenet export -e /data/spec.yaml {export}")
    assert res.returncode == 0, res.stdout
    assert (gpu.sandbox("gpu") / "results" / "exp" / "export" / "changenet.onnx").stat().st_size > 0
    missing = export.replace("model_epoch_003", "model_epoch_009")
    res = sh(gpu, f"{RUN} {PYT} visual_changenet export -e /data/spec.yaml {missing}")
    assert res.returncode == 1 and "No such file or directory" in res.stdout


def test_gap_analysis_takes_gap_analysis_seconds(gpu: BrevSimulator) -> None:
    gpu.set_tao(gap_analysis_seconds=2.0)  # instead of half an epoch (0.01 s here)
    assert sh(gpu, GAP).returncode == 0
    [run] = gpu.docker_calls("gpu", "run")
    assert run["exit_code"] == 0
    assert run["duration"] >= 2.0


def test_sigterm_to_a_job_group_reaches_the_container(gpu: BrevSimulator) -> None:
    gpu.set_tao(epoch_seconds=0.2)
    long_run = "visual_changenet train -e /data/spec.yaml train.num_epochs=50"
    # a foreground `docker run` launched detached by a job script: SIGTERM to its group reaches the container
    res = sh(
        gpu,
        f"setsid nohup {RUN} --name tao-job-2 {PYT} {long_run} results_dir=/results/fg "
        "> job.log 2>&1 < /dev/null & echo $! > job.pid",
    )
    assert res.returncode == 0
    fg = gpu.sandbox("gpu") / "results" / "fg" / "train" / "status.json"
    wait_for(lambda: any(r["status"] == "RUNNING" for r in status_records(fg)))
    assert sh(gpu, "kill -TERM -- -$(cat job.pid)").returncode == 0
    call = wait_for(
        lambda: next(
            (
                c
                for c in gpu.docker_calls("gpu", "run")
                if c.get("container_name") == "tao-job-2" and c["exit_code"] is not None
            ),
            None,
        )
    )
    assert call["exit_code"] == 143  # type: ignore[index]
    wait_for(lambda: gpu.sandbox_pids("gpu") == [])


# ------------------------------------------------------------------------------------ spec parsing
def test_spec_parser_overrides_and_interpolation() -> None:
    text = """\
# comment
results_dir: /results   # trailing comment
name: "quoted: value # not a comment"
other: 'it''s'
model:
  backbone:
    type: radio
    freeze: true
  layers: [1, 2, [3, 4]]
  opts: {a: 1, b: null, c: "x, y"}
dataset:
  input_map:
    - LowAngleLight
    - SolderLight
  splits:
  - name: train
    weight: 0.5
  - name: val
    weight: 1.0e-3
note: |
  line one
  line two
train:
  results_dir: ${results_dir}/train
  lr: .5
  empty:
"""
    cfg = parse_spec(text)
    assert cfg["results_dir"] == "/results"
    assert cfg["name"] == "quoted: value # not a comment"
    assert cfg["other"] == "it's"
    assert cfg["model"] == {
        "backbone": {"type": "radio", "freeze": True},
        "layers": [1, 2, [3, 4]],
        "opts": {"a": 1, "b": None, "c": "x, y"},
    }
    assert cfg["dataset"]["input_map"] == ["LowAngleLight", "SolderLight"]
    assert cfg["dataset"]["splits"] == [{"name": "train", "weight": 0.5}, {"name": "val", "weight": 1e-3}]
    assert cfg["note"] == "line one\nline two\n"
    assert cfg["train"]["empty"] is None
    apply_overrides(
        cfg,
        ["train.num_epochs=5", "results_dir=/other", "+train.new=[a, b]", "~model.opts", "model.backbone.type='x y'"],
    )
    cfg = resolve_interpolations(cfg)
    assert cfg["train"] == {"results_dir": "/other/train", "lr": 0.5, "empty": None, "num_epochs": 5, "new": ["a", "b"]}
    assert "opts" not in cfg["model"]
    assert cfg["model"]["backbone"]["type"] == "x y"
    assert parse_spec('{"results_dir": "/r", "train": {"num_epochs": 2}}') == {
        "results_dir": "/r",
        "train": {"num_epochs": 2},
    }


def test_pull_time_follows_the_image_size_and_the_pull_rate(gpu: BrevSimulator) -> None:
    gpu.set_docker(nvcr_anonymous_pull=True, pull_bytes_per_second=10_000_000, image_bytes={PYT: 8_000_000, "*": 0})
    started = time.monotonic()
    assert sh(gpu, f"docker pull {PYT}").returncode == 0
    took = time.monotonic() - started
    assert took >= 0.8  # 8 MB at 10 MB/s
    assert sh(gpu, f"docker pull {PYT}").returncode == 0  # present: nothing to download (no wait for it)
    assert sh(gpu, f"docker pull {DS}").returncode == 0  # "*": size 0
    pulls = gpu.docker_calls("gpu", subcommand="pull")
    assert [c.get("bytes", 0) for c in pulls] == [8_000_000, 0, 0]
