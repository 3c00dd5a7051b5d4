"""What a user reads in the task log of a real ``dag.test()`` run is true: no deletion is announced for an
instance that was never created (airflow_provider_brev/instances/release.py). The TAO steps' log (no docker notice,
one Amazon connection lookup per execution) is checked in test_tao_dags.py."""

from __future__ import annotations

from helpers import cli_calls, task_states


def deletion_lines(task_logs) -> list[str]:
    return [line for line in task_logs.lines if "Deleting instance" in line or "does not exist" in line]


def test_bad_gpu_type_announces_no_deletion(run_dag, brev_sim, task_logs):
    dag_run = run_dag("brev_bad_input_create", conf={"gpu": "NOPE:1"})
    assert task_states(dag_run) == {"create": "failed"}
    failure = next((line for line in task_logs.lines if "Task failed with exception" in line), "(none logged)")
    ending = " | ".join(failure.splitlines()[-4:])  # one line, so that pytest does not cut it from its summary
    assert "No Brev instance type offers 1x NOPE" in task_logs.as_read, (
        f"{len(task_logs.lines)} lines; the failure ends: {ending}"
    )
    assert deletion_lines(task_logs) == []
    assert cli_calls(brev_sim, "create") == [] and cli_calls(brev_sim, "delete") == []


def test_create_that_created_nothing_says_so(run_dag, brev_sim, task_logs):
    """``brev create`` fails in a way that could have left an instance (transient, after the request): the cleanup
    looks, finds none, and says that nothing was created -- no "Deleting", no "does not exist"."""
    brev_sim.set_fault("listing_unavailable", times=None)
    dag_run = run_dag("brev_case_create_only")
    assert task_states(dag_run) == {"create": "failed"}
    assert cli_calls(brev_sim, "create") and brev_sim.instances() == []
    assert "was created before the failure: nothing to delete" in task_logs.text
    assert deletion_lines(task_logs) == []
    assert cli_calls(brev_sim, "delete") == []
