"""Issue 11, "Proof that the promises hold" (part B): one test per branch that had none, each driven for real.

Real ``dag.test()`` runs of tests/integration/dags/brev_proof_misc_cases.py and tests/integration/dags/brev_ownership_cases.py against the
simulator (airflow_provider_brev/testing/), the real moto server (tests/fixtures_s3.py), gate files and simulator
knobs; never timing luck. Positive assertions come before negative ones.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from helpers import ChaosAgent, cli_calls, run_state, task_states, wait_for_no_instances

from airflow_provider_brev._compat import AIRFLOW_V_3_3_PLUS
from airflow_provider_brev.core.jobs.remote import RemoteJob
from airflow_provider_brev.core.protocol.names import managed_instance_name
from airflow_provider_brev.exceptions import BrevTimeoutError, BrevTransferError
from airflow_provider_brev.hooks.base import _reset_process_caches
from airflow_provider_brev.hooks.brev import BrevHook
from airflow_provider_brev.instances.provisioning import XCOM_INSTANCE_RECORD, InstanceRecord
from airflow_provider_brev.testing.datasets import write_synthetic_vcn_dataset
from integration.chaos.chaos_helpers import wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_provider_brev.testing.simulator import BrevSimulator

MIB = 1024 * 1024
NGC_KEY = "ngc-key-" + "5e7b" * 8
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"
#: a small training spec (tests/integration/dags/brev_proof_misc_cases.py mounts the staged dataset at /data)
TRAIN_SPEC: dict[str, Any] = {
    "dataset": {
        "classify": {
            "train_dataset": {"csv_path": "/data/train.csv", "images_dir": "/data/images"},
            "validation_dataset": {"csv_path": "/data/val.csv", "images_dir": "/data/images"},
            "image_ext": ".jpg",
            "batch_size": 4,
            "workers": 2,
        }
    },
    "train": {"num_epochs": 2, "checkpoint_interval": 1, "validation_interval": 1},
}


@pytest.fixture(autouse=True)
def _fresh_process_caches() -> Any:
    _reset_process_caches()
    yield
    _reset_process_caches()


def ti_of(dag_run: Any, task_id: str) -> Any:
    return next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)


def logged(capture: Any, text: str) -> Callable[[], bool]:
    """A cheap condition for :class:`ChaosAgent`: ``text`` appeared in a line captured since the last check."""
    seen = 0

    def check() -> bool:
        nonlocal seen
        lines = capture.lines[seen:]
        seen += len(lines)
        return any(text in line for line in lines)

    return check


def release_deleting(sim: BrevSimulator) -> None:
    """Let every DELETING instance finish now (the simulated clock moves on), and later deletions take 0.3 s."""
    sim.set_timings(delete_seconds=0.3)
    sim.advance(900)


# ------------------------------------------------------------------ 1. adopt_existing and leftovers (provisioning)
def test_adopt_existing_waits_out_a_deleting_leftover_then_creates_its_own(run_dag, brev_sim, task_logs):
    brev_sim.set_timings(delete_seconds=600)  # DELETING until the gate below moves the clock past it
    leftover = brev_sim.create_instance_directly("my-notebook", status="DELETING")
    waiting = "Instance my-notebook is still being deleted; waiting for its name to be released."
    with ChaosAgent(logged(task_logs, waiting), lambda _: release_deleting(brev_sim)) as agent:
        dag_run = run_dag("brev_own_adopt")
    assert agent.fired
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert len(cli_calls(brev_sim, "create")) == 1  # created after the leftover was gone
    record = InstanceRecord.from_dict(ti_of(dag_run, "create").xcom_pull(task_ids="create", key=XCOM_INSTANCE_RECORD))
    assert record is not None
    assert (record.name, record.owned, record.adopted) == ("my-notebook", True, False)
    assert record.id != leftover["id"]
    wait_for_no_instances(brev_sim)  # ours, so the teardown deleted it
    assert "Using existing instance" not in task_logs.text


def test_adopt_existing_leaves_a_failure_leftover_it_did_not_create(run_dag, brev_sim, task_logs):
    persons = brev_sim.create_instance_directly("my-notebook")
    brev_sim.set_fault("instance_lost", instance="my-notebook", mode="failure")
    assert brev_sim.instance("my-notebook")["status"] == "FAILURE"
    dag_run = run_dag("brev_own_adopt")
    assert task_states(dag_run)["create"] == "failed"
    assert "BrevInstanceFailedError" in task_logs.text
    assert "is in FAILURE and was not created by this task, so the provider leaves it as it is" in task_logs.text
    assert brev_sim.instance("my-notebook")["id"] == persons["id"]
    assert cli_calls(brev_sim, "create") == []
    assert cli_calls(brev_sim, "delete") == []


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="a retry recognises its earlier try's instance from the 3.3+ store")
def test_a_retry_replaces_the_failure_leftover_of_its_earlier_try(run_dag, brev_sim, task_logs):
    # Try 1 creates the instance, which then fails (FAILURE) during the readiness wait (or, on a busy machine,
    # already before `brev create`'s own listing: the next test pins that path); delete_on_failure=False leaves it.
    # Try 2 finds it recorded as its own: it deletes it, waits until it is gone and creates anew.
    brev_sim.set_fault("instance_lost", instance="retry-notebook", mode="failure")
    dag_run = run_dag("brev_own_keep_failed")
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert ti_of(dag_run, "create").try_number == 2
    assert "Instance retry-notebook from an earlier try is in FAILURE: replacing it." in task_logs.text
    assert len(cli_calls(brev_sim, "create")) == 2
    wait_for_no_instances(brev_sim)  # the replacement, deleted by the teardown
    assert "was not created by this task" not in task_logs.text


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="a retry recognises its earlier try's instance from the 3.3+ store")
def test_delete_on_failure_false_keeps_an_instance_whose_create_ended_in_failure(run_dag, brev_sim, task_logs):
    # The instance is in FAILURE by the time `brev create` has returned (no deploy time): the create itself fails.
    # delete_on_failure=False keeps it for inspection there too, and the retry replaces it as its own.
    brev_sim.set_timings(deploy_seconds=0)
    brev_sim.set_fault("boot_failure", instance="retry-notebook", message="host lost")
    dag_run = run_dag("brev_own_keep_failed")
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert ti_of(dag_run, "create").try_number == 2
    text = task_logs.text
    assert "Instance 'retry-notebook' was created but is in FAILURE" in text
    assert "Keeping instance retry-notebook after its creation failed, as delete_on_failure=False asks" in text
    assert "Deleting instance retry-notebook" not in text.split("Keeping instance retry-notebook")[0]
    assert "Instance retry-notebook from an earlier try is in FAILURE: replacing it." in text
    assert len(cli_calls(brev_sim, "create")) == 2
    wait_for_no_instances(brev_sim)


# ------------------------------------------------------------------ 2. the secret file after a failed launch
GATED_FIND = """#!/bin/bash
# The first call (the launch script's sweep of stale secret files, its first command) blocks until the gate opens,
# then ends the launch shell without launching anything; later calls are the real find.
if mkdir {state}/first 2>/dev/null; then
  : > {state}/waiting
  for _ in $(seq 1200); do [ -e {state}/open ] && break; sleep 0.05; done
  kill -KILL $PPID
  exit 1
fi
exec /usr/bin/find "$@"
"""


def test_a_failed_launch_removes_its_secret_file_from_the_instance(brev_sim, monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    brev_sim.create_instance_directly("launch-fails-1")
    home = brev_sim.sandbox("launch-fails-1")
    gate = tmp_path / "gate"
    gate.mkdir()
    brev_sim.add_tool("find", GATED_FIND.replace("{state}", str(gate)))
    hook = BrevHook(retry_limit=1)  # one attempt: the launch's `brev exec` times out and is not repeated
    job = RemoteJob("launch-fails-job")
    secret_name = ".airflow-brev-secret-launch-fails-job.env"
    try:
        with pytest.raises(BrevTimeoutError):
            hook.launch_job(
                "launch-fails-1", job, "echo never", secret_env={"API_SECRET": "s3cr3t-value-42"}, timeout=3
            )
        assert (gate / "waiting").exists()  # the launch script was held at its first command
        assert len(cli_calls(brev_sim, "copy")) == 1  # the secret file was shipped ...
        sweep = '__brev_sweep_secrets "$__B_FILES"'  # the body of remote/secret_sweep.sh
        cleanups = [run for run in brev_sim.runs("launch-fails-1") if sweep in run["command"]]
        assert len(cleanups) == 1 and secret_name in cleanups[0]["command"]  # ... and the hook removed it
        assert not (home / secret_name).exists()
    finally:
        (gate / "open").touch()
    wait_until(lambda: not brev_sim.sandbox_pids("launch-fails-1"), what="the held launch shell to end")
    assert not (home / ".airflow-brev" / "jobs" / job.job_id).exists()  # nothing was launched


# ------------------------------------------------------------------ 3. killing an upload aborts its multipart uploads
GATED_CURL = """#!/bin/bash
# Uploads of part 2 of any file wait for the gate file; everything else is real curl.
prev=; target=
for a in "$@"; do [ "$prev" = -T ] && target=$a; prev=$a; done
case ${target##*/} in
  p.*.2) : > {state}/waiting; for _ in $(seq 1200); do [ -e {state}/open ] && break; sleep 0.05; done ;;
esac
exec /usr/bin/curl "$@"
"""


def test_killing_an_upload_aborts_its_open_multipart_uploads(brev_sim, aws_connection, monkeypatch, tmp_path):
    from airflow_provider_brev.transfers import BrevToS3Operator

    aws = aws_connection
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    brev_sim.create_instance_directly("xfer-kill-1")
    (brev_sim.sandbox("xfer-kill-1") / "ckpt").mkdir()
    (brev_sim.sandbox("xfer-kill-1") / "ckpt/model.bin").write_bytes(b"\1" * (11 * MIB))
    gate = tmp_path / "gate"
    gate.mkdir()
    brev_sim.add_tool("curl", GATED_CURL.replace("{state}", str(gate)))
    op = BrevToS3Operator(
        task_id="up",
        instance_name="xfer-kill-1",
        remote_dir="ckpt",
        s3_bucket=aws.bucket,
        s3_prefix="killed/",
        multipart_threshold=5 * MIB,
        part_size=5 * MIB,
        max_attempts=1,
        curl_retries=0,
    )
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(op.execute({}))
        except BaseException as err:
            outcome.append(err)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        wait_until(lambda: (gate / "waiting").exists(), timeout=60, what="the upload of part 2 to start")
        assert len(aws.client.list_multipart_uploads(Bucket=aws.bucket)["Uploads"]) == 1  # open, parts billed
        op.on_kill()  # what Airflow calls on SIGTERM
        assert not aws.client.list_multipart_uploads(Bucket=aws.bucket).get("Uploads")
    finally:
        (gate / "open").touch()
        worker.join(timeout=120)
    assert not worker.is_alive()
    assert isinstance(outcome[0], BrevTransferError)  # part 2 went to an aborted upload
    assert aws.keys("killed/") == []


# ------------------------------------------------------------------ 4-6. TAO: preparation, verification, spec sources
@pytest.fixture
def tao_box(brev_sim: BrevSimulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """An existing instance with the synthetic dataset staged, an NGC key, and the spec in a file on the worker."""
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    brev_sim.create_instance_directly("tao-box")
    write_synthetic_vcn_dataset(brev_sim.sandbox("tao-box") / "data")
    spec_file = tmp_path / "train.yaml"
    spec_file.write_text(yaml.safe_dump(TRAIN_SPEC))
    return {"name": "tao-box", "spec_file": str(spec_file), "spec_s3_uri": ""}


def test_tao_results_dir_that_cannot_be_created_stops_before_docker(run_dag, brev_sim, tao_box, task_logs):
    (brev_sim.sandbox("tao-box") / "tao-results").write_text("a file where the results directory should be")
    dag_run = run_dag("brev_proof_tao", conf=tao_box)
    assert task_states(dag_run)["train"] == "failed"
    assert "Could not create tao-results on tao-box: mkdir: " in task_logs.text  # mkdir's reason, from stderr
    assert brev_sim.docker_calls(subcommand="login") == []
    assert brev_sim.docker_calls(subcommand="pull") == []


def test_tao_docker_login_failure_stops_before_the_pull(run_dag, brev_sim, tao_box, task_logs):
    brev_sim.set_docker(revoked_ngc_keys=[NGC_KEY])
    dag_run = run_dag("brev_proof_tao", conf=tao_box)
    assert task_states(dag_run)["train"] == "failed"
    assert "docker login nvcr.io failed on tao-box: Error response from daemon: " in task_logs.text  # stderr
    assert len(brev_sim.docker_calls(subcommand="login")) == 2  # once per try
    assert brev_sim.docker_calls(subcommand="pull") == []
    assert NGC_KEY not in task_logs.text


def test_tao_failed_image_pull_is_retried_by_the_next_try(run_dag, brev_sim, tao_box, task_logs):
    brev_sim.set_docker(fail_pull=1)  # the next pull times out, later ones work
    dag_run = run_dag("brev_proof_tao", conf=tao_box)
    assert task_states(dag_run)["train"] == "success"
    assert ti_of(dag_run, "train").try_number == 2
    assert f"Pulling {IMAGE} on tao-box failed: Error response from daemon: " in task_logs.text  # docker's reason
    assert "BrevImagePullError" in task_logs.text
    assert f"Image {IMAGE} is on tao-box (waited" in task_logs.text
    assert "Pull complete" not in task_logs.text  # docker pull's line per layer is DEBUG; INFO has the outcome
    assert len(brev_sim.docker_calls(subcommand="pull")) == 2
    assert len(brev_sim.docker_calls(subcommand="run")) == 1  # the GPU work started only after the good pull


def test_tao_exit_0_without_a_success_record_is_a_typed_failure(run_dag, brev_sim, tao_box, task_logs):
    brev_sim.set_tao(no_success_record="train")
    dag_run = run_dag("brev_proof_tao", conf=tao_box)
    assert task_states(dag_run)["train"] == "failed"
    (run,) = brev_sim.tao_runs("tao-box")
    assert run["exit_code"] == 0
    assert "TaoVerificationError" in task_logs.text
    assert "TAO visual_changenet train exited 0 but the last status.json record is" in task_logs.text
    assert ti_of(dag_run, "train").try_number == 1  # untruthful success: no retry is spent


@pytest.mark.parametrize("source", ["spec_file", "spec_s3_uri"])
def test_tao_spec_from_a_file_or_s3_reaches_the_remote_command(run_dag, brev_sim, tao_box, aws_connection, source):
    conf = dict(tao_box)
    if source == "spec_s3_uri":
        aws_connection.put("specs/train.yaml", Path(conf["spec_file"]).read_bytes())
        conf.update(spec_file="", spec_s3_uri=f"s3://{aws_connection.bucket}/specs/train.yaml")
    dag_run = run_dag("brev_proof_tao", conf=conf)
    assert task_states(dag_run)["train"] == "success"
    shipped = brev_sim.sandbox("tao-box") / "tao-results/specs/visual_changenet_train.yaml"
    assert yaml.safe_load(shipped.read_text()) == TRAIN_SPEC
    result = ti_of(dag_run, "train").xcom_pull(task_ids="train")
    assert len(result["checkpoints"]) == TRAIN_SPEC["train"]["num_epochs"]  # trained as the spec says
    (run,) = brev_sim.tao_runs("tao-box")
    assert "visual_changenet_train.yaml" in json.dumps(run)


# ------------------------------------------------------------------ 7. API-key login, end to end
def test_api_key_connection_logs_in_with_the_api_key(run_dag, brev_sim, task_logs):
    api_key = "bak-" + "7c1d" * 8
    org_id = brev_sim.config()["accounts"]["org"]["id"]
    connection = json.dumps(
        {
            "conn_type": "brev",
            "extra": {
                "api_key": api_key,
                "org_id": org_id,
                "cli_path": str(brev_sim.brev_path),
                "brev_home": str(brev_sim.home),
            },
        }
    )
    dag_run = run_dag("brev_exec_foreground", conf={"command": "echo via-api-key"}, connection=connection)
    assert run_state(dag_run) == "success", task_states(dag_run)
    (login,) = cli_calls(brev_sim, "login")
    assert login["argv"] == ["login", "--api-key", api_key, "--org-id", org_id]
    assert "Logging in to Brev (brev login --api-key ***)." in task_logs.text
    assert "via-api-key" in task_logs.text
    stored = json.loads((brev_sim.home / ".brev" / "credentials.json").read_text())
    assert (stored["api_key"], stored["api_key_org_id"]) == (api_key, org_id)
    carrying = [call["argv"] for call in brev_sim.calls() if api_key in json.dumps(call)]
    assert carrying == [login["argv"]]  # no other invocation carries it
    assert login["analytics"] is False  # the CLI sends a command's flags to its analytics unless told not to
    assert api_key not in task_logs.text


def test_a_failed_login_leaves_the_session_other_connections_of_its_home_use(run_dag, brev_sim, monkeypatch, task_logs):
    """The released CLI writes credentials.json before it learns the token is wrong: a connection with a wrong token
    must fail its login (typed) without logging out the other connection sharing the HOME, which works on without
    logging in again."""
    brev_sim.create_instance_directly("shared", ssh_config_home=brev_sim.home)
    good = brev_sim.valid_token
    monkeypatch.setenv("AIRFLOW_CONN_BREV_WRONG_TOKEN", brev_sim.connection_json(token="not-the-right-token"))
    dag_run = run_dag("brev_proof_shared_home_logins", conf={"name": "shared"}, connection=brev_sim.connection_json())
    states = task_states(dag_run)
    assert states == {"good_first": "success", "wrong_token": "failed", "good_again": "success"}, states
    assert "rejected the login" in task_logs.text  # BrevAuthError, not a logged-out or transient failure
    assert "good-first" in task_logs.text and "good-again" in task_logs.text
    logins = [call["argv"][2] for call in cli_calls(brev_sim, "login")]
    assert logins == [good, "not-the-right-token"]  # good_again did not have to log in again
    assert [call["analytics"] for call in cli_calls(brev_sim, "login")] == [False, False]  # no token to analytics
    brev_dir = brev_sim.home / ".brev"
    stored = json.loads((brev_dir / "credentials.json").read_text())
    assert stored == {"access_token": good, "refresh_token": "auto-login"}
    assert not list(brev_dir.glob(".airflow-provider-brev-login-*"))  # no scratch HOME (nor its token copy) left


# ------------------------------------------------------------------ 8. wait_for_deletion of the delete operator
def test_delete_with_wait_for_deletion_returns_once_the_instance_is_gone(run_dag, brev_sim, task_logs):
    brev_sim.set_timings(delete_seconds=1.5)
    brev_sim.create_instance_directly("to-delete-1")
    dag_run = run_dag("brev_proof_delete_wait", conf={"name": "to-delete-1", "timeout": 60})
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert "Brev instance to-delete-1 is gone." in task_logs.text
    assert len(cli_calls(brev_sim, "ls")) >= 2  # it polled while the instance was DELETING
    assert brev_sim.instance("to-delete-1") is None  # gone when the task ended, without waiting here


def test_delete_with_wait_for_deletion_fails_at_its_timeout(run_dag, brev_sim, task_logs):
    brev_sim.set_timings(delete_seconds=600)
    brev_sim.create_instance_directly("to-delete-2")
    dag_run = run_dag("brev_proof_delete_wait", conf={"name": "to-delete-2", "timeout": 1})
    assert task_states(dag_run)["delete"] == "failed"
    assert "Instance 'to-delete-2' was still DELETING after 1 s." in task_logs.text
    assert brev_sim.instance("to-delete-2")["status"] == "DELETING"
    assert "Brev instance to-delete-2 is gone." not in task_logs.text


# ------------------------------------------------------------------ 9. skip_on_exit_code
def test_exit_code_listed_in_skip_on_exit_code_skips_the_task(run_dag, brev_sim, task_logs):
    brev_sim.create_instance_directly("skip-box")
    dag_run = run_dag("brev_proof_skip", conf={"name": "skip-box"})
    assert task_states(dag_run)["run"] == "skipped"
    assert "The command exited with 3, listed in skip_on_exit_code." in task_logs.text
    assert "nothing new to process" in task_logs.text
    assert "BrevCommandError" not in task_logs.text


# ------------------------------------------------------------------ 10. the janitor's grace period
def test_janitor_grace_period_keeps_an_expired_instance_until_it_has_passed(run_dag, brev_sim, task_logs):
    expired = managed_instance_name(
        dag_id="some_dag",
        run_id="manual__1",
        task_id="t",
        expires_at=datetime.now(UTC) - timedelta(hours=2),
        prefix="afbrev",
    )
    brev_sim.create_instance_directly(expired)
    within = run_dag("brev_proof_janitor_grace", conf={"grace_seconds": 3 * 3600})
    assert task_states(within)["sweep"] == "success"
    assert f"Keeping {expired} (RUNNING)" in task_logs.text
    assert cli_calls(brev_sim, "delete") == []
    assert brev_sim.instance(expired) is not None
    after = run_dag("brev_proof_janitor_grace", conf={"grace_seconds": 3600})
    assert task_states(after)["sweep"] == "success"
    assert f"Deleting {expired} (RUNNING)" in task_logs.text
    assert len(cli_calls(brev_sim, "delete")) == 1
    assert brev_sim.instance(expired) is None  # wait_for_deletion
