"""The simulator's ``instance_lost`` fault (an instance deleted by someone else, or failed, at a chosen moment) and
the fake TAO ``train`` resuming on a replacement instance, driven through real ``brev`` subprocesses."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import pytest

from unit.testing.fake_tao.test_run import PYT, RUN, gpu, sh, stage_dataset, status_records  # noqa: F401  (gpu: a fixture)
from unit.testing.test_simulator import brev, login, pid_alive, wait_for

if TYPE_CHECKING:
    from airflow_provider_brev.testing import BrevSimulator

DETACHED_SLEEP = "setsid nohup sleep 60 > /dev/null 2>&1 < /dev/null & echo $! > job.pid"


def listed(name: str) -> list[dict]:
    return [w for w in json.loads(brev("ls", "--json").stdout)["workspaces"] or [] if w["name"] == name]


def test_deleted_after_seconds_kills_jobs_and_frees_the_name(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.create_instance_directly("w", ssh_config_home=brev_sim.home)
    assert brev("exec", "w", f"echo kept > marker; {DETACHED_SLEEP}").returncode == 0
    pid = int(wait_for(lambda: (brev_sim.sandbox("w") / "job.pid").read_text().strip()))
    brev_sim.set_fault("instance_lost", instance="w", mode="deleted", after_seconds=100)
    brev_sim.advance(99)
    assert [w["status"] for w in listed("w")] == ["RUNNING"]
    assert pid_alive(pid)
    brev_sim.advance(1)
    assert listed("w") == []  # any brev command lets the due loss fire first
    wait_for(lambda: not pid_alive(pid), timeout=5)
    assert brev_sim.sandbox_pids("w") == [] and brev_sim.faults() == []
    res = brev("exec", "w", "true")
    assert res.returncode == 1
    assert 'ssh connection failed and could not look up instance "w": ' in res.stderr
    assert brev("create", "w", "--type", "g6e.xlarge").returncode == 0
    res = brev("exec", "w", "ls")
    assert res.returncode == 0 and "marker" not in res.stdout  # a new, empty sandbox
    assert (brev_sim.sandbox("w") / "marker").exists() is False


def test_failure_when_file_appears_stops_an_attached_exec(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.create_instance_directly("f", ssh_config_home=brev_sim.home)
    brev_sim.set_fault("instance_lost", instance="f", mode="failure", when_file="out/step_3")
    loop = "mkdir -p out; for i in 1 2 3 4 5 6 7 8; do touch out/step_$i; sleep 0.3; done"
    res = brev("exec", "f", loop)
    assert res.returncode == 1
    assert res.stderr.strip().endswith('instance "f" is in state "FAILURE" \u2014 please check with: brev ls')
    assert (brev_sim.sandbox("f") / "out" / "step_3").exists()
    assert not (brev_sim.sandbox("f") / "out" / "step_8").exists()  # killed long before the loop's end
    assert [w["status"] for w in listed("f")] == ["FAILURE"]
    assert brev_sim.sandbox_pids("f") == []
    assert brev("exec", "f", "true").returncode == 1
    assert brev("delete", "f").returncode == 0
    wait_for(lambda: brev_sim.instance("f") is None, timeout=5)


def test_validation_and_an_already_due_loss_fires_on_arming(brev_sim: BrevSimulator) -> None:
    with pytest.raises(ValueError, match="at most one trigger"):
        brev_sim.set_fault("instance_lost", instance="x", after_seconds=1, at_epoch=2)
    with pytest.raises(ValueError, match="mode="):
        brev_sim.set_fault("instance_lost", instance="x", mode="stopped")
    brev_sim.create_instance_directly("now")
    brev_sim.set_fault("instance_lost", instance="now")
    assert brev_sim.instance("now") is None and brev_sim.faults() == []


@pytest.mark.parametrize("brev_sim_profile", ["documented"])
def test_train_lost_at_epoch_resumes_on_a_replacement(gpu: BrevSimulator) -> None:  # noqa: F811 (fixture)
    gpu.set_fault("instance_lost", instance="gpu", mode="deleted", at_epoch=6)
    long_run = "train.num_epochs=10 train.checkpoint_interval=1"
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml {long_run}")
    assert res.returncode == 1 and 'could not look up instance "gpu"' in res.stderr
    old = gpu.sandbox("gpu")  # the dead instance's disk, kept for inspection
    train = old / "results" / "exp" / "train"
    assert sorted(p.name[:15] for p in train.glob("model_epoch_*")) == [f"model_epoch_{e:03d}" for e in range(7)]
    assert os.readlink(train / "changenet_model_classify_latest.pth").startswith("model_epoch_006_")
    recs = status_records(train / "status.json")
    assert (recs[-1]["status"], recs[-1]["epoch"]) == ("RUNNING", 6)
    assert gpu.tao_runs("gpu")[-1]["exit_code"] is None
    wait_for(lambda: gpu.sandbox_pids("gpu") == [], timeout=5)
    # the replacement: same name, empty disk; stage the data and the last checkpoint again, then resume
    assert brev("create", "gpu", "--type", "g6e.xlarge").returncode == 0
    new = gpu.sandbox("gpu")
    assert new != old and list(new.iterdir()) == []
    stage_dataset(new)
    (new / "results" / "ckpt").mkdir()
    (new / "results" / "ckpt" / "last.pth").write_bytes((train / "changenet_model_classify_latest.pth").read_bytes())
    resume = "train.resume_training_checkpoint_path=/results/ckpt/last.pth"
    res = sh(gpu, f"{RUN} {PYT} visual_changenet train -e /data/spec.yaml {long_run} {resume}")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Epoch 8/10" in res.stdout and "Epoch 7/10" not in res.stdout
    run = gpu.tao_runs("gpu")[-1]
    assert (run["start_epoch"], run["epochs_run"]) == (7, 3)
    assert [c[:15] for c in run["checkpoints_written"]] == ["model_epoch_007", "model_epoch_008", "model_epoch_009"]
    recs = status_records(new / "results" / "exp" / "train" / "status.json")
    assert [(r["status"], r.get("epoch")) for r in recs] == [
        ("STARTED", None),
        ("RUNNING", 7),
        ("RUNNING", 8),
        ("RUNNING", 9),
        ("SUCCESS", None),
    ]
