"""Issue 12 item 7: a tiny lifecycle and an exec job as real DAG runs, on the cheapest matching instance type.

Against the simulator inside ``make test``; against real Brev with ``make system-test`` (``BREV_SYSTEM_TEST=real``
and ``BREV_API_TOKEN`` or ``AIRFLOW_CONN_BREV_DEFAULT``), which prints the estimated cost first and always deletes.
"""

from __future__ import annotations

import pytest
from helpers import run_state, task_states

from airflow_provider_brev.core.jobs.follower import REMOTE_LINE_PREFIX
from system.system_support import TEST_TIMEOUT, same_gpu

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)


def xcom(dag_run, task_id: str):
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id)


def test_lifecycle_creates_waits_runs_nvidia_smi_and_deletes(system_instance, run_system_dag):
    with system_instance("lifecycle") as instance:
        dag_run = run_system_dag("brev_system_lifecycle", conf=instance.conf)
        assert run_state(dag_run) == "success", task_states(dag_run)
        assert xcom(dag_run, "create_instance") == instance.name
        gpu = xcom(dag_run, "gpu_name")
        assert same_gpu(instance.offer.gpu_name, gpu), (instance.offer, gpu)
    assert instance.cleanup.outcome == "absent"  # the DAG's own teardown deleted it (and waited until gone)


def test_exec_job_streams_its_output_and_returns_its_last_line(system_instance, run_system_dag, request):
    with system_instance("exec") as instance:
        logs = request.getfixturevalue("task_logs")
        dag_run = run_system_dag("brev_system_exec", conf={**instance.conf, "marker": "exec-marker-7"})
        assert run_state(dag_run) == "success", task_states(dag_run)
        result = xcom(dag_run, "run")
        assert result["exit_code"] == 0
        assert result["last_line"] == "exec-marker-7"
        assert result["instance_name"] == instance.name
        assert result["job_id"]
        streamed = [line for line in logs.lines if REMOTE_LINE_PREFIX in line]
        assert any("hello from a detached job" in line for line in streamed), streamed
        assert any(same_gpu(instance.offer.gpu_name, line) for line in streamed), streamed
    assert instance.cleanup.outcome == "absent"
