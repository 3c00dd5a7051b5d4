"""What GPU time costs (the repository's "GPU bill" issue): every step reports its dollars, and price caps refuse
before anything is paid for.

Real ``dag.test()`` runs of tests/integration/dags/brev_cost_cases.py against the simulator, whose catalog prices the types
(``brev search --json``: g6e.xlarge $2.24/h, g5.xlarge $1.21/h).
"""

from __future__ import annotations

import re

import pytest
from helpers import adds_up_to_the_bill, cli_calls, run_state, task_states

from airflow_provider_brev.core.cost import money

PHASES = ["boot", "pull", "stage", "work", "resume", "upload", "idle"]


def _ti(dag_run, task_id: str):
    return next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)


def _cost(dag_run, task_id: str) -> dict:
    cost = _ti(dag_run, task_id).xcom_pull(task_ids=task_id, key="brev_cost")
    assert cost is not None, task_id
    return cost


def _adds_up(cost: dict) -> None:
    """Seconds per phase add up to the total; dollars are price x seconds, per phase and in total."""
    price = cost["price_per_hour"]
    assert list(cost["seconds"]) == PHASES
    assert sum(cost["seconds"].values()) == pytest.approx(cost["total_seconds"], abs=0.01)
    assert cost["total_dollars"] == pytest.approx(price * cost["total_seconds"] / 3600, abs=1e-6)
    for phase in PHASES:
        assert cost["dollars"][phase] == pytest.approx(price * cost["seconds"][phase] / 3600, abs=1e-6)


def test_every_step_reports_its_cost_and_the_run_adds_them_up(run_dag, brev_sim, task_logs):
    dag_run = run_dag("brev_cost_steps")
    assert run_state(dag_run) == "success", task_states(dag_run)

    create, run, solo = (_cost(dag_run, task_id) for task_id in ("create", "run", "solo"))
    for cost in (create, run, solo):
        _adds_up(cost)
    # the create task's boot, deferred until ready; the step on its instance bills its own time (no boot)
    assert (create["instance_type"], create["price_per_hour"]) == ("g6e.xlarge", 2.24)
    # boot until the trigger saw it ready, then resume until Airflow resumed the task, then idle (its record told)
    assert create["seconds"]["boot"] > 0
    assert {p for p, s in create["seconds"].items() if s} <= {"boot", "resume", "idle"}
    assert (run["instance_type"], run["price_per_hour"]) == ("g6e.xlarge", 2.24)
    # `sleep 1`, across the deferral; work starts when the launch returns, a few ms after the job may have started
    assert run["seconds"]["boot"] == 0 and run["seconds"]["work"] >= 0.95
    # the ephemeral step bills its boot too, on the cheapest type within the cap
    assert (solo["instance_type"], solo["price_per_hour"]) == ("g5.xlarge", 1.21)
    # `sleep 0.5`: work starts when the launch returns, a few ms after the job itself may have started
    assert solo["seconds"]["boot"] > 0 and solo["seconds"]["work"] >= 0.45
    assert "type g5.xlarge at $1.21/h, cheapest of 2" in task_logs.text
    assert "type g6e.xlarge at $2.24/h" in task_logs.text
    assert task_logs.text.count("Cost: $") >= 3  # one line per task: total, rate and phases

    # the record tells later steps the price and when the instance was created and ready
    record = _ti(dag_run, "create").xcom_pull(task_ids="create", key="brev_instance")
    assert record["price_per_hour"] == 2.24 and record["spec"]["max_price_per_hour"] == 3.0
    assert record["created_at"] < record["ready_at"]

    report = _ti(dag_run, "cost_report").xcom_pull(task_ids="cost_report")
    adds_up_to_the_bill(report)
    [life] = report["lifetimes"]  # the delete task priced the instance's billed window
    instance, own = report["bill"]
    assert (instance["kind"], instance["task_id"], instance["tasks"]) == (
        "instance",
        "delete",
        ["create", "run", "delete"],
    )
    assert instance["seconds"] == pytest.approx(life["total_seconds"], abs=0.001)
    assert life["ended_by"] == "delete" and life["tasks_dollars"] <= life["total_dollars"]
    # the ephemeral step's own instance: the time it measured, boot included
    assert (own["kind"], own["instance_type"], own["tasks"]) == ("measured", "g5.xlarge", ["solo"])
    assert own["seconds"] == pytest.approx(solo["total_seconds"], abs=0.01)
    rows = {row["task_id"]: row for row in report["tasks"]}
    assert rows["create"]["seconds"]["boot"] == pytest.approx(create["seconds"]["boot"], abs=0.01)
    assert rows["run"]["seconds"]["work"] == pytest.approx(run["seconds"]["work"], abs=0.01)
    assert report["total_dollars"] == pytest.approx(instance["dollars"] + own["dollars"], abs=1e-6)
    lines = report["table"].splitlines()
    assert lines[0].startswith(f"Bill: {money(report['total_dollars'])} for ")  # the bill first
    assert lines[1].startswith("  instance ") and "from brev create to brev delete (delete)" in lines[1]
    assert "What this DAG run cost, the bill first" in task_logs.text


def _refused(dag_run, brev_sim, task_logs, error: str, *fragments: str, probed: bool = False) -> None:
    """Failed on the first try with ``error`` saying ``fragments``; nothing created, launched or billed (``probed``:
    the readiness probe of an existing instance ran, nothing else)."""
    (ti,) = dag_run.get_task_instances()
    assert ti.state == "failed"
    assert ti.try_number == 1  # a cap refusal is an AirflowFailException: no retry is spent
    assert error in task_logs.text
    for fragment in fragments:
        assert fragment in task_logs.text
    assert cli_calls(brev_sim, "create") == []  # nothing created
    assert [run for run in brev_sim.runs() if "echo never" in str(run)] == []  # nothing launched
    cost = ti.xcom_pull(task_ids=ti.task_id, key="brev_cost")
    if not probed:
        assert brev_sim.runs() == []  # not even a probe
        assert cost is None  # nothing billed
    else:  # the step's own time on the instance: its readiness check, nothing else
        assert cost["seconds"]["work"] == cost["seconds"]["boot"] == 0 and cost["seconds"]["idle"] > 0


def test_max_price_per_hour_refuses_the_create_task_before_brev_create(run_dag, brev_sim, task_logs):
    dag_run = run_dag("brev_cost_cap_create", conf={"cap": "1.5"})
    _refused(
        dag_run,
        brev_sim,
        task_logs,
        "BrevPriceCapError",
        "No instance type within max_price_per_hour=$1.50/h: the candidates are g6e.xlarge at $2.24/h",
        "Raise max_price_per_hour or ask for a cheaper GPU",
    )


def test_max_price_per_hour_refuses_an_ephemeral_step_before_brev_create(run_dag, brev_sim, task_logs):
    dag_run = run_dag("brev_cost_cap_ephemeral", conf={"price": "2", "cost": ""})
    _refused(dag_run, brev_sim, task_logs, "BrevPriceCapError", "max_price_per_hour=$2.00/h")


def test_max_run_cost_refuses_an_ephemeral_step_before_brev_create(run_dag, brev_sim, task_logs):
    """$0.30 for (60 + 600) s allows at most $1.64/h: no L40S type is that cheap."""
    dag_run = run_dag("brev_cost_cap_ephemeral", conf={"price": "", "cost": "0.30"})
    _refused(
        dag_run,
        brev_sim,
        task_logs,
        "BrevCostCapError",
        "No instance type fits max_run_cost=$0.3000: the step may bill up to 0.18 h",
        "at $1.64/h at most",
        "g6e.xlarge at $2.24/h",
    )


def test_max_run_cost_refuses_a_step_on_an_existing_instance_before_launch(run_dag, brev_sim, task_logs):
    """1 h at $2.24/h is more than $0.50: refused once the instance's type is known, before anything runs."""
    brev_sim.create_instance_directly("priced-box", instance_type="g6e.xlarge")
    dag_run = run_dag("brev_cost_cap_existing", conf={"cost": "0.5"})
    _refused(
        dag_run,
        brev_sim,
        task_logs,
        "BrevCostCapError",
        "The step may cost $2.24 (1.00 h at $2.24/h on instance 'priced-box' (g6e.xlarge))",
        "more than max_run_cost=$0.5000",
        probed=True,
    )


def test_max_run_cost_within_the_estimate_runs_the_step(run_dag, brev_sim, task_logs):
    brev_sim.create_instance_directly("priced-box", instance_type="g6e.xlarge")
    dag_run = run_dag("brev_cost_cap_existing", conf={"cost": "2.5"})
    assert run_state(dag_run) == "success", task_states(dag_run)
    cost = _cost(dag_run, "run")
    _adds_up(cost)
    assert (cost["instance_name"], cost["instance_type"], cost["price_per_hour"]) == ("priced-box", "g6e.xlarge", 2.24)


def test_a_capped_gpu_request_creates_only_an_admitted_type_on_either_cli(run_dag, brev_sim_both, task_logs):
    """A CLI that takes ``--gpu`` would let Brev choose any L40S type: under a cap the provider passes the admitted
    types with ``--type`` instead, on the released CLI and the documented one alike."""
    dag_run = run_dag("brev_cost_cap_create", conf={"cap": "3"})
    assert run_state(dag_run) == "success", task_states(dag_run)
    [create] = [call["argv"] for call in cli_calls(brev_sim_both, "create")]
    assert "--gpu" not in create and create[create.index("--type") + 1] == "g6e.xlarge"
    cost = _cost(dag_run, "create")
    _adds_up(cost)
    assert (cost["instance_type"], cost["price_per_hour"]) == ("g6e.xlarge", 2.24) and cost["seconds"]["boot"] > 0


#: The settling time the next test gives the deferral: far longer than its job (``sleep 0.5``).
SETTLE_SECONDS = 3.0


def test_work_is_the_job_s_own_run_time_never_the_event_held_back_nor_the_resumption(
    run_dag, brev_sim, task_logs, monkeypatch
):
    """The triggerer holds the job's event until the deferral has settled (``deferral_settle_seconds``), then Airflow
    resumes the task: all of that is ``resume``. ``work`` ends when the trigger saw the job end."""
    monkeypatch.setenv("AIRFLOW__BREV__DEFERRAL_SETTLE_SECONDS", str(SETTLE_SECONDS))
    brev_sim.create_instance_directly("priced-box", instance_type="g6e.xlarge")
    dag_run = run_dag("brev_cost_settle")
    assert run_state(dag_run) == "success", task_states(dag_run)
    held = [float(s) for s in re.findall(r"Holding the event back ([0-9.]+) s", task_logs.text)]
    assert len(held) == 1 and held[0] > 0.5, held  # the job ended well within the settling time
    cost = _cost(dag_run, "run")
    _adds_up(cost)
    seconds = cost["seconds"]
    assert seconds["work"] >= 0.5  # `sleep 0.5`
    assert seconds["resume"] >= held[0] - 0.05  # the event held back (logged to 0.1 s) is resume...
    work, resume = (span for span in cost["spans"] if span[0] in ("work", "resume"))
    # ...and never work: work ends where resume begins (the job's end, seen by the trigger: one instant, no gap and
    # no overlap), so the hold inside resume is outside work. No wall-clock bound on work itself: on a busy machine
    # the time from the launch to the deferral (work, rightly) is as long as the machine makes it.
    assert work[2] == resume[1] and resume[2] - resume[1] >= held[0] - 0.05
    report = _ti(dag_run, "settle_report").xcom_pull(task_ids="settle_report")
    adds_up_to_the_bill(report)
    # the same phases, each rounded to the millisecond on its own path (the task's spans, the bill's split rows)
    assert report["seconds"]["work"] == pytest.approx(seconds["work"], abs=0.0015)
    assert report["seconds"]["resume"] == pytest.approx(seconds["resume"], abs=0.0015)
    assert "(resume: from a job's end until Airflow resumed its task after the deferral; not work)" in report["table"]
