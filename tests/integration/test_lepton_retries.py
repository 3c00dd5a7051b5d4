"""A retry's choice between an earlier try's Lepton job and its own (steps/lepton.py ``attach_or_launch``), against the fake
workspace through the real SDK: try 2 of a task re-attaches to try 1's running job, collects its succeeded one, and
submits its own after a failed one. The task instance is a small stand-in (its ids, try number and XCom);
``dag.test()`` cannot run a real retry (it re-runs a task as try 1), so this is where try 2 is exercised."""

from __future__ import annotations

import base64
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_brev.core.lepton.names import job_name
from airflow_provider_brev.core.lepton.report import JobReport, render_result

pytest.importorskip("leptonai.api.v2.client", reason="the lepton extra (leptonai) is not installed")

IMAGE = "docker.io/library/ubuntu:22.04"
IDS = {"dag_id": "lepton_retry", "task_id": "job", "run_id": "manual__retry"}


@dataclass
class RetryTI:
    """The task instance of try 2 (retries=2, never cleared: max_tries 2): the ids, the try, XCom in memory."""

    try_number: int = 2
    max_tries: int = 2
    map_index: int = -1
    xcoms: dict[str, Any] = field(default_factory=dict)
    dag_id: str = IDS["dag_id"]
    task_id: str = IDS["task_id"]
    run_id: str = IDS["run_id"]

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> Any:
        return self.xcoms.get(key)


def compute(ti: RetryTI, secret_env: dict[str, str] | None = None):
    """The Lepton compute of try 2 (its command's ``secret_env``), and the try it runs (as the step service hands
    it)."""
    from airflow_provider_brev.hooks.lepton import LeptonHook
    from airflow_provider_brev.steps.compute import StepTask, Tries
    from airflow_provider_brev.steps.lepton import LeptonJobCompute
    from airflow_provider_brev.steps.lepton_spec import lepton_step_spec
    from airflow_provider_brev.steps.lepton_workload import LeptonCommandWorkload
    from airflow_provider_brev.steps.workload import command_spec
    from airflow_provider_brev.utils.task_memory import TaskMemory

    params = {
        "lepton_conn_id": "lepton_default",
        "resource_shape": "cpu.small",
        "poll_interval": 0.1,
        "max_poll_failures": 3,
        "output_sync_interval": 60,
        "aws_conn_id": None,
    }
    task = StepTask(None, logging.getLogger("lepton-retry"), TaskMemory({"ti": ti}), killed=lambda: False)
    step = LeptonJobCompute(
        lepton_step_spec(params, deferrable_default=False),
        LeptonCommandWorkload(IMAGE, command_spec({"command": "echo try-2", "secret_env": secret_env})),
        task,
        hook=LeptonHook(retry_delay=0.01),
    )
    return step, Tries.of(ti, retries=2)


def submit_try_1(fake, command: str) -> str:
    from airflow_provider_brev.hooks.lepton import LeptonHook

    name = job_name(try_number=1, **IDS)
    spec = {"resource_shape": "cpu.small", "container": {"image": IMAGE, "command": ["bash", "-c", command]}}
    LeptonHook().create_job({"metadata": {"id": name, "name": name}, "spec": spec})
    return name


def wait_for_state(fake, name: str, *states: str) -> None:
    deadline = time.monotonic() + 60
    while fake.job(name).state not in states:
        assert time.monotonic() < deadline, f"{name} stayed {fake.job(name).state}"
        time.sleep(0.05)


def test_try_2_reattaches_to_try_1s_running_job(lepton_fake):
    earlier = submit_try_1(lepton_fake, "echo started; sleep 30")
    deadline = time.monotonic() + 60
    while "started" not in [line for _ts, line in lepton_fake.job(earlier).log]:  # its container runs
        assert time.monotonic() < deadline and lepton_fake.job(earlier).state != "Failed", lepton_fake.job(earlier).log
        time.sleep(0.05)
    step, tries = compute(RetryTI())
    assert step.attach_or_launch(tries)["job"] == earlier and len(lepton_fake.submissions()) == 1  # not again
    lepton_fake.workspace.stop(earlier)


def test_try_2_collects_try_1s_succeeded_job(lepton_fake):
    result = render_result(JobReport(exit_code=0))
    earlier = submit_try_1(lepton_fake, f"echo trained; echo '{result}'")
    wait_for_state(lepton_fake, earlier, "Completed")
    step, tries = compute(RetryTI())
    handle = step.attach_or_launch(tries)
    outcome = step.follow(handle, None)
    assert handle["job"] == earlier and step.collect(handle, outcome)["last_line"] == "trained"
    assert len(lepton_fake.submissions()) == 1


class Lines(logging.Handler):
    """The messages of one logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_try_2_redacts_the_secret_lines_an_earlier_jobs_log_shows(lepton_fake):
    """A job whose output did not pass the provider's agent (submitted by hand here; a job of an older provider's
    agent alike): the worker redacts every line of the step's secret from what it logs and returns."""
    key_lines = [base64.b64encode(os.urandom(30)).decode() for _ in range(2)]
    pem = "-----BEGIN KEY-----\n" + "\n".join(key_lines) + "\n-----END KEY-----"
    result = render_result(JobReport(exit_code=0))
    earlier = submit_try_1(lepton_fake, f"echo 'key: {key_lines[0]}'; echo {key_lines[1]}; echo '{result}'")
    wait_for_state(lepton_fake, earlier, "Completed")
    step, tries = compute(RetryTI(), secret_env={"PEM": pem})
    logger, lines = logging.getLogger("lepton-retry"), Lines()
    logger.addHandler(lines)
    try:
        handle = step.attach_or_launch(tries)
        collected = step.collect(handle, step.follow(handle, None))
    finally:
        logger.removeHandler(lines)
    assert (collected["last_line"], collected["log_tail"]) == ("***", ["key: ***", "***"])
    assert f"[{earlier}] key: ***" in lines.messages
    for line in key_lines:
        assert line not in "\n".join(lines.messages)


def test_try_2_submits_its_own_job_after_try_1s_failed_one(lepton_fake):
    earlier = submit_try_1(lepton_fake, "exit 1")
    wait_for_state(lepton_fake, earlier, "Failed")
    step, tries = compute(RetryTI())
    handle = step.attach_or_launch(tries)
    job = handle["job"]
    assert job == job_name(try_number=2, **IDS) and lepton_fake.job(earlier) is None  # the failed one is deleted
    result = step.collect(handle, step.follow(handle, None))
    assert result["last_line"] == "try-2" and [s["metadata"]["id"] for s in lepton_fake.submissions()] == [earlier, job]
    step.release()
    assert not lepton_fake.workspace.secrets


def test_a_lepton_train_resumes_from_the_newest_checkpoint_in_its_outputs(aws_connection, lepton_fake):
    from airflow_provider_brev.operators.lepton import _TAO_ON_LEPTON
    from airflow_provider_brev.steps.lepton_workload import LeptonTaoWorkload
    from airflow_provider_brev.steps.tao import tao_spec

    prefix = "runs/r1/train/"
    for name in ("model_epoch_000_step_10.pth", "model_epoch_001_step_20.pth", "status.json"):
        aws_connection.put(prefix + name, b"ckpt")
    params = {
        **_TAO_ON_LEPTON,
        "image": "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt",
        "task": "visual_changenet",
        "action": "train",
        "spec": {"train": {"num_epochs": 3}},
        "results_dir": "results",
        "num_gpus": "all",
        "hf_conn_id": None,
        "aws_conn_id": "aws_default",
        "outputs": {"results/train": f"s3://{aws_connection.bucket}/{prefix}"},
    }
    launch = LeptonTaoWorkload(tao_spec(params)).launch()
    [resume] = launch.inputs
    assert resume["path"] == "results/train/model_epoch_001_step_20.pth" and resume["size"] == 4
    resume_key = "train.resume_training_checkpoint_path=/workspace/results/train/model_epoch_001_step_20.pth"
    assert resume_key in launch.command and "X-Amz" not in launch.command
