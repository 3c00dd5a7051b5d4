"""Durable steps: a step owns its data (S3 inputs/outputs), a lost instance is re-created under the same name and
the command runs again, TAO training resumes from its newest checkpoint in S3.

Real ``dag.test()`` runs against the Brev simulator (the ``instance_lost`` fault really kills the instance's
processes and frees its name) and a real moto S3 server.
"""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest
from helpers import ChaosAgent, cli_calls, run_state, task_states, wait_for_no_instances

from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset

NGC_KEY = "ngc-key-" + "5d1e" * 8
INPUTS = {"inputs/a.txt": b"alpha\n", "inputs/sub/b.txt": b"beta\n"}


class InstanceWatch:
    """Samples the simulator's instances in a thread while a DAG runs: the most instances one name ever had."""

    def __init__(self, sim) -> None:
        self.sim = sim
        self.most: Counter[str] = Counter()
        self.most_at_once = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            instances = self.sim.instances()
            self.most_at_once = max(self.most_at_once, len(instances))
            for name, count in Counter(i["name"] for i in instances).items():
                self.most[name] = max(self.most[name], count)
            self._stop.wait(0.02)

    def __enter__(self) -> InstanceWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def created_names(sim) -> list[str]:
    return [call["argv"][1] for call in cli_calls(sim, "create")]


def xcom(dag_run, task_id: str, key: str = "return_value"):
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id, key=key)


@pytest.fixture
def inputs(aws_connection):
    for key, data in INPUTS.items():
        aws_connection.put(key, data)
    return aws_connection


@pytest.mark.parametrize(
    ("dag_id", "mode"),
    [
        ("brev_durable_exec_sync", "deleted"),
        ("brev_durable_exec_sync", "failure"),
        ("brev_durable_exec_deferrable", "deleted"),
    ],
)
def test_instance_lost_mid_step_is_recreated_once(run_dag, brev_sim, inputs, task_logs, dag_id, mode):
    brev_sim.set_fault("instance_lost", mode=mode, when_file="work/started", times=1)
    with InstanceWatch(brev_sim) as watch:
        dag_run = run_dag(dag_id, conf={"bucket": inputs.bucket})
    assert run_state(dag_run) == "success", task_states(dag_run)
    names = created_names(brev_sim)
    assert len(names) == 2 and len(set(names)) == 1, names  # re-created once, under the same name
    assert watch.most[names[0]] == 1  # never two instances of that name at any time
    assert "re-created, recovery 1/2" in task_logs.text
    result = xcom(dag_run, "run")
    (uri,) = result["outputs"].values()
    assert list(result["outputs"]) == ["work/out"]
    prefix = uri.split("/", 3)[3]
    assert inputs.get(prefix + "progress.txt") == b"started\nfinished\n"  # the re-run on the new instance
    assert inputs.get(prefix + "inputs.txt") == b"a.txt\nsub\n"  # its inputs were synced again
    assert result["sync"]["inputs"][0]["transferred"] == 2
    wait_for_no_instances(brev_sim)  # the teardown deleted the re-created instance


def test_ephemeral_instance_lost_is_created_again(run_dag, brev_sim, inputs, task_logs):
    brev_sim.set_fault("instance_lost", mode="failure", when_file="work/started", times=1)
    with InstanceWatch(brev_sim) as watch:
        dag_run = run_dag("brev_durable_ephemeral", conf={"bucket": inputs.bucket})
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert len(created_names(brev_sim)) == 2
    assert watch.most_at_once == 1  # the FAILURE instance was deleted before the new one was created
    assert "re-created, recovery 1/2" in task_logs.text
    assert inputs.get("ephemeral/out/progress.txt") == b"started\nfinished\n"
    wait_for_no_instances(brev_sim)  # the finally deleted the new instance


def test_recovery_budget_exhausted_fails_with_instance_lost(run_dag, brev_sim, inputs, task_logs):
    brev_sim.set_fault("instance_lost", mode="deleted", when_file="work/started", times=3)
    with InstanceWatch(brev_sim) as watch:
        dag_run = run_dag("brev_durable_exec_sync", conf={"bucket": inputs.bucket})
    states = task_states(dag_run)
    assert states["run"] == "failed" and states["delete"] == "success", states
    assert "BrevInstanceLostError" in task_logs.text
    assert "max_instance_recoveries=2 already used" in task_logs.text
    names = created_names(brev_sim)
    assert len(names) == 3 and watch.most[names[0]] == 1
    wait_for_no_instances(brev_sim)


def test_failed_steps_outputs_are_uploaded(run_dag, brev_sim, inputs, task_logs):
    command = "mkdir -p work/out && echo evidence > work/out/evidence.txt && echo giving up && exit 1"
    dag_run = run_dag("brev_durable_exec_sync", conf={"bucket": inputs.bucket, "command": command})
    assert task_states(dag_run)["run"] == "failed"
    assert "failed with exit code 1: giving up" in task_logs.text
    (key,) = [k for k in inputs.keys("runs/") if k.endswith("/out/evidence.txt")]
    assert inputs.get(key) == b"evidence\n"
    assert len(created_names(brev_sim)) == 1  # a failed command is not a lost instance
    wait_for_no_instances(brev_sim)


def test_second_step_with_the_same_inputs_downloads_nothing(run_dag, brev_sim, inputs):
    dag_run = run_dag("brev_durable_two_steps", conf={"bucket": inputs.bucket})
    assert run_state(dag_run) == "success", task_states(dag_run)
    first, second = (xcom(dag_run, task)["sync"]["inputs"] for task in ("first", "second"))
    assert [(r["transferred"], r["skipped"]) for r in first] == [(2, 0)]
    assert [(r["transferred"], r["skipped"]) for r in second] == [(0, 2)]
    assert xcom(dag_run, "second")["outputs"] == {}
    wait_for_no_instances(brev_sim)


def test_a_later_step_finds_an_earlier_steps_outputs_present(run_dag, brev_sim, inputs):
    """Same-instance handoff: the files ``produce`` uploaded count as present for ``consume``'s inputs of that
    prefix into that directory (no object downloaded)."""
    dag_run = run_dag("brev_durable_handoff", conf={"bucket": inputs.bucket})
    assert run_state(dag_run) == "success", task_states(dag_run)
    produced = xcom(dag_run, "produce")["sync"]["outputs"]
    assert [(r["transferred"], r["skipped"]) for r in produced] == [(2, 0)]
    consumed = xcom(dag_run, "consume")["sync"]["inputs"]
    assert [(r["transferred"], r["skipped"]) for r in consumed] == [(0, 2)]
    wait_for_no_instances(brev_sim)


HELD_EPOCH = 6  # 0-based: 7 of the 10 epochs done


@pytest.mark.parametrize("dag_id", ["brev_durable_tao_train_sync", "brev_durable_tao_train_deferrable"])
def test_tao_train_lost_at_70_percent_resumes_from_its_last_checkpoint(
    run_dag, brev_sim, aws_connection, monkeypatch, task_logs, dag_id
):
    """The first training run holds after its 7th of 10 epochs (a gate in the fake TAO, not a timer: on a busy
    machine the periodic sync can take longer than the rest of the training) until the instance is lost, which
    happens once that epoch's checkpoint is in S3; the retry resumes from the newest checkpoint S3 held then, never
    from scratch and never past the lost epoch."""
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    upload_synthetic_vcn_dataset(aws_connection.client, aws_connection.bucket, "datasets/vcn/")
    brev_sim.set_tao(epoch_seconds=0.3, hold_runs=1, hold_after_epoch=HELD_EPOCH)

    def synced_epoch() -> int | None:
        """The held epoch, once its checkpoint is in S3."""
        keys = [k for k in aws_connection.keys("runs/") if "/train/model_epoch_" in k]
        epochs = [int(k.split("/train/model_epoch_")[1][:3]) for k in keys]
        return max(epochs) if epochs and max(epochs) >= HELD_EPOCH else None

    in_s3_at_loss: list[int] = []

    def lose(epoch: int) -> None:
        in_s3_at_loss.append(epoch)
        brev_sim.set_fault("instance_lost", mode="deleted", after_seconds=0, times=1)

    with InstanceWatch(brev_sim) as watch, ChaosAgent(synced_epoch, lose, timeout=600) as agent:
        dag_run = run_dag(dag_id, conf={"bucket": aws_connection.bucket})
    assert agent.fired, "training ended before a checkpoint past epoch 1 reached S3"
    assert run_state(dag_run) == "success", task_states(dag_run)
    names = created_names(brev_sim)
    assert len(names) == 2 and watch.most[names[0]] == 1
    first, second = [run for run in brev_sim.tao_runs() if run.get("action") == "train"]
    assert first.get("exit_code") is None  # killed with its instance
    result = xcom(dag_run, "train")
    resumed_epoch = int(result["resumed_from"].split("_")[2])
    assert resumed_epoch == in_s3_at_loss[0] == HELD_EPOCH, (in_s3_at_loss, result["resumed_from"])
    assert second["start_epoch"] == resumed_epoch + 1
    assert second["start_epoch"] + second["epochs_run"] == 10
    assert f"resuming from epoch {resumed_epoch + 1}" in task_logs.text
    assert any(c.startswith("model_epoch_009_") for c in result["checkpoints"])
    train_keys = [k for k in aws_connection.keys("runs/") if "/train/model_epoch_009_" in k]
    assert train_keys, aws_connection.keys("runs/")  # the final checkpoint is in S3
    wait_for_no_instances(brev_sim)


@pytest.mark.parametrize("mode", ["ephemeral", "on_instance"])
@pytest.mark.parametrize("missing", ["in_bucket", "out_bucket"])
def test_a_missing_bucket_fails_the_step_before_any_brev_call(run_dag, brev_sim, inputs, task_logs, mode, missing):
    brev_sim.create_instance_directly("busy-box")
    absent = "no-such-bucket-" + inputs.bucket.removeprefix("brev-test-")
    conf = {"in_bucket": inputs.bucket, "out_bucket": inputs.bucket, missing: absent}
    dag_run = run_dag(f"brev_durable_missing_bucket_{mode}", conf=conf)
    (ti,) = dag_run.get_task_instances()
    assert ti.state == "failed" and ti.try_number == 1  # no retry spent: the same bucket cannot appear by itself
    text = task_logs.text
    assert "BrevS3LocationError" in text
    where = f"s3://{absent}/inputs/ (inputs)" if missing == "in_bucket" else f"s3://{absent}/runs/out/ (outputs)"
    assert f"Cannot reach {where} with the AWS connection 'aws_default': the bucket does not exist" in text
    assert "NoSuchBucket" in text
    assert cli_calls(brev_sim, "create") == []  # nothing was created...
    assert brev_sim.calls() == []  # ...nor asked of brev at all


def test_stray_keys_in_an_input_prefix_are_skipped_and_named(run_dag, brev_sim, aws_connection, task_logs):
    aws = aws_connection
    for key in ("odd/ok.txt", "odd/sub/b.txt", "odd/junk//x", "odd/../escape", "odd/bell\x07/./y"):
        aws.put(key, b"data\n")
    dag_run = run_dag("brev_durable_stray_keys", conf={"bucket": aws.bucket})
    assert run_state(dag_run) == "success", task_states(dag_run)
    result = xcom(dag_run, "run")
    assert [(r["transferred"], r["skipped"]) for r in result["sync"]["inputs"]] == [(2, 0)]
    assert aws.get("odd-out/inputs.txt").decode().split() == ["work/in:", "ok.txt", "sub", "work/in/sub:", "b.txt"]
    text = task_logs.text
    assert "Skipping 3 object(s) of s3://" in text
    for named in ("odd/junk//x", "odd/../escape", "odd/bell\\x07/./y"):
        assert named in text
    assert "\x07" not in text  # the control character reached no log line raw
    wait_for_no_instances(brev_sim)
