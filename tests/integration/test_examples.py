"""Every example DAG imports cleanly and runs end to end the way users trigger it on Airflow 3: a manual run with
no logical date (UI, CLI and REST API default), against the simulator and moto S3.

The examples are discovered from ``dags_examples/``: a new example file is run here without anyone listing it.
"""

from __future__ import annotations

import copy
import json
import runpy
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers import (
    adds_up_to_the_bill,
    assert_no_process_left,
    cli_calls,
    delete_kept_instance,
    run_state,
    task_states,
    the_page_reads_the_bill,
    wait_for_no_instances,
)

from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset
from airflow_provider_brev.utils.templates import run_slug

if TYPE_CHECKING:
    from collections.abc import Callable

EXAMPLES = Path(__file__).resolve().parents[2] / "dags_examples"
EXAMPLE_FILES = sorted(path.name for path in EXAMPLES.glob("*.py"))
DATASET_PREFIX = "datasets/vcn-aoi/"


def test_every_example_imports_without_errors(dagbag):
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(EXAMPLES))
    assert bag.import_errors == {}
    assert {
        "example_brev_lifecycle",
        "example_brev_ephemeral_exec",
        "example_brev_mixed_stages",
        "tao_visual_changenet_retrain",
        "tao_visual_changenet_export_inference",
        "brev_janitor",
        "example_mixed_brev_lepton",
    } <= set(bag.dag_ids)
    assert {Path(dag.fileloc).name for dag in bag.dags.values()} == set(EXAMPLE_FILES)  # no file without a DAG


def dag_ids_in(dagbag: Any, file_name: str) -> list[str]:
    return sorted(dag_id for dag_id, dag in dagbag.dags.items() if Path(dag.fileloc).name == file_name)


def run_conf_for(dag: Any, aws: Any) -> dict[str, Any]:
    """What a user passes when triggering the example: the S3 bucket and the dataset, where the DAG takes them."""
    conf: dict[str, Any] = {}
    if "bucket" in dag.params:
        conf["bucket"] = aws.bucket
    if "dataset_prefix" in dag.params:
        upload_synthetic_vcn_dataset(aws.client, aws.bucket, DATASET_PREFIX)
        conf["dataset_prefix"] = DATASET_PREFIX
    return conf


class CallsSince:
    """The simulator's call log from a point on (``cli_calls`` works on it as on the simulator)."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.start = len(sim.calls())

    def calls(self) -> list[dict[str, Any]]:
        return self.sim.calls()[self.start :]


def ti_of(dag_run: Any, task_id: str) -> Any:
    return next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)


def check_costs(dag_run: Any, task_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Every task in ``task_ids`` pushed ``brev_cost``: its phases add up to its total, its dollars are price x
    seconds; returns the costs by task id."""
    phases = ["boot", "pull", "stage", "work", "resume", "upload", "idle"]
    costs = {}
    for task_id in task_ids:
        cost = ti_of(dag_run, task_id).xcom_pull(task_ids=task_id, key="brev_cost")
        assert cost is not None, task_id
        json.dumps(cost)  # JSON-serialisable
        assert list(cost["seconds"]) == phases and list(cost["dollars"]) == phases, cost
        price = cost["price_per_hour"]
        assert price > 0 and cost["instance_type"], cost
        assert sum(cost["seconds"].values()) == pytest.approx(cost["total_seconds"], abs=0.01), cost
        assert cost["total_seconds"] > 0, cost
        assert cost["total_dollars"] == pytest.approx(price * cost["total_seconds"] / 3600, abs=1e-6), cost
        for phase in phases:
            assert cost["dollars"][phase] == pytest.approx(price * cost["seconds"][phase] / 3600, abs=1e-6), cost
        assert sum(cost["dollars"].values()) == pytest.approx(cost["total_dollars"], abs=1e-5), cost
        costs[task_id] = cost
    return costs


def bill_of(dag_run: Any) -> dict[str, Any]:
    """The run's bill, as its ``cost_report`` task reported it."""
    report = ti_of(dag_run, "cost_report").xcom_pull(task_ids="cost_report")
    assert report is not None
    return report


def check_ephemeral_exec(dag_run: Any, sim: Any, written: list[str]) -> None:
    assert len(cli_calls(sim, "create")) == 1
    cost = check_costs(dag_run, ["gpu_smoke_test"])["gpu_smoke_test"]  # the ephemeral step bills its boot too
    assert cost["seconds"]["boot"] > 0 and cost["seconds"]["work"] > 0


def check_lifecycle(dag_run: Any, sim: Any, written: list[str]) -> None:
    """The work task returns the instance's GPU model (a value a downstream task can use, not a table border)."""
    assert len(cli_calls(sim, "create")) == 1
    assert len(cli_calls(sim, "delete")) == 1
    assert ti_of(dag_run, "nvidia_smi").xcom_pull(task_ids="nvidia_smi") == "NVIDIA L40S"
    costs = check_costs(dag_run, ["create_instance", "wait_until_ready"])
    assert costs["create_instance"]["seconds"]["boot"] > 0  # brev create, without the wait
    assert costs["wait_until_ready"]["seconds"]["boot"] > 0  # the sensor's wait: the instance boots, and bills
    rows = {row["task_id"]: row for row in bill_of(dag_run)["tasks"]}
    assert rows["wait_until_ready"]["seconds"]["boot"] > 0 and rows["wait_until_ready"]["seconds"]["work"] == 0
    assert rows["(uncovered)"]["seconds"]["uncovered"] > 0  # nvidia_smi is a plain @task: no meter


def check_mixed_stages(dag_run: Any, sim: Any, written: list[str]) -> None:
    creates = [call["argv"] for call in cli_calls(sim, "create")]
    types = sorted(argv[argv.index("--type") + 1] for argv in creates)
    assert len(types) == 2 and "m6i.2xlarge" in types  # a CPU type and a GPU type
    assert ti_of(dag_run, "train").xcom_pull(task_ids="train")["last_line"].strip() == "100"
    assert f"mixed/{run_slug(dag_run.run_id)}/prepared/samples.txt" in written
    costs = check_costs(dag_run, ["create_cpu", "prepare_data", "create_gpu", "train"])
    assert {task: (c["instance_type"], c["price_per_hour"]) for task, c in costs.items()} == {
        "create_cpu": ("m6i.2xlarge", 0.46),
        "prepare_data": ("m6i.2xlarge", 0.46),
        "create_gpu": ("g6e.xlarge", 2.24),
        "train": ("g6e.xlarge", 2.24),
    }


def check_flagship(dag_run: Any, sim: Any, written: list[str]) -> None:
    """Each TAO step put its outputs in its own folder of the run's prefix (and said so in XCom), the checkpoint
    evaluate used is in S3, and the promotion decision names it. Warm by default: the teardown stopped the instance
    for the next run (tests/integration/test_warm_flagship.py runs it twice); the test then deletes it."""
    assert task_states(dag_run)["promote"] == "success"
    assert len(cli_calls(sim, "create")) == 1
    assert cli_calls(sim, "delete") == [] and len(cli_calls(sim, "stop")) == 1
    assert ti_of(dag_run, "delete_instance").xcom_pull(task_ids="delete_instance")["stopped"] is True
    delete_kept_instance(sim.sim, ti_of(dag_run, "create_instance").xcom_pull(task_ids="create_instance"))
    results = f"runs/{run_slug(dag_run.run_id)}/"
    run_uri = f"s3://{dag_run.conf['bucket']}/{results}"
    step_dirs = {
        "gap_analysis": "vcn/results/vcn_aoi",
        "train": "vcn/results/train",
        "evaluate": "vcn/results/evaluate",
    }
    for step, directory in step_dirs.items():
        outputs = ti_of(dag_run, step).xcom_pull(task_ids=step)["outputs"]
        assert outputs == {directory: f"{run_uri}{step}/"}, (step, outputs)
        assert f"{results}{step}/status.json" in written, (step, written)
    train = ti_of(dag_run, "train").xcom_pull(task_ids="train")
    checkpoint = train["checkpoints"][-1]
    assert checkpoint.startswith("model_epoch_") and f"{results}train/{checkpoint}" in written, written
    assert not any(key.endswith("_latest.pth") for key in written), written  # symlinks are not uploaded
    evaluate_sync = ti_of(dag_run, "evaluate").xcom_pull(task_ids="evaluate")["sync"]
    dataset_uri = f"s3://{dag_run.conf['bucket']}/{DATASET_PREFIX}"
    assert [report["uri"] for report in evaluate_sync["inputs"]] == [dataset_uri, f"{run_uri}train/"]
    decision = ti_of(dag_run, "promote").xcom_pull(task_ids="promote")
    assert decision["promoted"] is True and decision["direction"] == "higher"
    assert decision["model"] == f"{run_uri}train/{checkpoint}"
    assert decision["results"] == {step: f"{run_uri}{step}/" for step in step_dirs}
    check_flagship_cost(dag_run)


def check_flagship_cost(dag_run: Any) -> None:
    """Every Brev task reported its cost on the run's one L40S instance (the cheapest, g6e.xlarge at $2.24/h): the
    create task its boot, each TAO step its pull, staging, work and upload; the last task's table adds them up."""
    tasks = ["create_instance", *FLAGSHIP_STEPS]
    costs = check_costs(dag_run, tasks)
    assert {(c["instance_type"], c["price_per_hour"]) for c in costs.values()} == {("g6e.xlarge", 2.24)}
    assert costs["create_instance"]["seconds"]["boot"] > 0
    for step in FLAGSHIP_STEPS:
        seconds = costs[step]["seconds"]
        assert seconds["boot"] == 0 and seconds["work"] > 0 and seconds["pull"] > 0, (step, seconds)
        assert seconds["stage"] > 0 and seconds["upload"] > 0, (step, seconds)
    report = bill_of(dag_run)
    [instance] = report["bill"]  # one instance, billed from brev create to brev delete
    assert (instance["kind"], instance["task_id"], instance["price_per_hour"]) == ("instance", "delete_instance", 2.24)
    [life] = report["lifetimes"]
    assert instance["seconds"] == pytest.approx(life["total_seconds"], abs=0.001)
    assert report["unpriced"] == []
    rows = {row["task_id"]: row for row in report["tasks"]}
    assert [task for task in rows if task in tasks] == tasks  # in the DAG's order
    for step in FLAGSHIP_STEPS:  # a step's share of the bill is what it measured (nothing overlaps it)
        assert rows[step]["seconds"]["work"] == pytest.approx(costs[step]["seconds"]["work"], abs=0.01), step
    table = report["table"].splitlines()
    # The flagship's default teardown stops the instance (warm reuse): its window ends at the stop request.
    stopped = ti_of(dag_run, "delete_instance").xcom_pull(task_ids="delete_instance").get("stopped")
    window = "from brev start/create to brev stop" if stopped else "from brev create to brev delete"
    assert table[1].startswith("  instance ") and f"{window} (delete_instance)" in table[1], table[1]


def check_mixed_platform(dag_run: Any, sim: Any, written: list[str]) -> None:
    """Gap analysis on a small Brev instance, train as a Lepton job, evaluate on a Brev GPU instance, data through
    S3."""
    creates = [call["argv"] for call in cli_calls(sim, "create")]
    assert len(creates) == 2 and len(cli_calls(sim, "delete")) == 2  # two ephemeral instances, both deleted
    assert "g4dn.xlarge" in creates[0]  # the T4 of gap analysis
    run = f"mixed-platform/{run_slug(dag_run.run_id)}/"
    train = ti_of(dag_run, "train").xcom_pull(task_ids="train")
    checkpoint = train["checkpoints"][-1]
    assert train["job"].startswith("af-") and f"{run}train/{checkpoint}" in written, (train, written)
    assert f"{run}gap_analysis/metrics.json" in written and f"{run}evaluate/status.json" in written, written
    evaluate = ti_of(dag_run, "evaluate").xcom_pull(task_ids="evaluate")
    assert evaluate["kpis"] and evaluate["status"]["status"] == "SUCCESS"
    sums = ti_of(dag_run, "checksums").xcom_pull(task_ids="checksums")  # a plain command as a Lepton job
    assert sums["exit_code"] == 0 and sums["job"].startswith("af-") and sums["last_line"].endswith(".pth"), sums
    assert f"{run}train-sums/SHA256SUMS" in written, written


def check_export_inference(dag_run: Any, sim: Any, written: list[str]) -> None:
    """train's checkpoint, the ONNX file export made of it and inference's scores are in the run's S3 prefix, each
    step in its own folder; one instance served the three steps."""
    assert len(cli_calls(sim, "create")) == 1 and len(cli_calls(sim, "delete")) == 1
    results = f"runs/{run_slug(dag_run.run_id)}/"
    checkpoint = ti_of(dag_run, "train").xcom_pull(task_ids="train")["checkpoints"][-1]
    assert f"{results}train/{checkpoint}" in written, written
    assert f"{results}export/changenet.onnx" in written, written
    assert f"{results}inference/inference.csv" in written, written
    for step in ("export", "inference"):
        result = ti_of(dag_run, step).xcom_pull(task_ids=step)
        assert result["status"]["status"] == "SUCCESS", (step, result)
        assert f"{results}{step}/status.json" in written, (step, written)


def check_janitor(dag_run: Any, sim: Any, written: list[str]) -> None:
    assert cli_calls(sim, "delete") == []  # nothing expired to delete


#: The flagship's GPU steps, in pipeline order.
FLAGSHIP_STEPS = ["gap_analysis", "train", "evaluate"]

#: What each example must have done besides succeeding; an example missing here fails the test (add its checks).
CHECKS: dict[str, Callable[[Any, Any, list[str]], None]] = {
    "example_brev_ephemeral_exec": check_ephemeral_exec,
    "example_brev_lifecycle": check_lifecycle,
    "example_brev_mixed_stages": check_mixed_stages,
    "tao_visual_changenet_retrain": check_flagship,
    "tao_visual_changenet_export_inference": check_export_inference,
    "brev_janitor": check_janitor,
    "example_mixed_brev_lepton": check_mixed_platform,
}
#: Examples that also need the fake Lepton workspace (skipped without the lepton extra).
LEPTON_EXAMPLES = {"example_mixed_brev_lepton.py"}


@pytest.mark.parametrize("file_name", EXAMPLE_FILES)
def test_example_runs_without_a_logical_date(
    file_name, dagbag, run_dag, brev_sim, aws_connection, monkeypatch, request
):
    """A manual run as the REST API creates it (``logical_date`` null): no template may need ``ds``/``ts``/...,
    everything the run writes to S3 lands under its own run-id prefix, and nothing the provider or the CLI started
    (``ssh-agent`` included) is still running afterwards."""
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": "ngc-test-key"}))
    lepton = request.getfixturevalue("lepton_fake") if file_name in LEPTON_EXAMPLES else None
    if lepton is not None:
        lepton.add_image_pull_secret("nvcr-ngc")
    (dag_id,) = dag_ids_in(dagbag, file_name)  # one DAG per example, the ``dag`` of its system-test block
    calls = CallsSince(brev_sim)
    before: set[str] = set()
    runs = []

    def run_example(dag: Any, **test_kwargs: Any) -> Any:
        conf = run_conf_for(dagbag.get_dag(dag.dag_id), aws_connection)
        before.update(aws_connection.keys())  # the bucket as the run starts (the dataset uploaded)
        runs.append(run_dag(dag.dag_id, conf=conf, **test_kwargs))
        return runs[-1]

    example_test_run(file_name)(run_example)  # the example's own test: it runs the DAG and asserts it succeeded
    (dag_run,) = runs
    assert dag_run.dag_id == dag_id
    assert dag_run.logical_date is None
    assert dag_run.data_interval_start is None and dag_run.data_interval_end is None
    assert run_state(dag_run) == "success", task_states(dag_run)
    written = sorted(set(aws_connection.keys()) - before)
    slug = run_slug(dag_run.run_id)
    assert all(f"/{slug}/" in f"/{key}" for key in written), written
    assert dag_id in CHECKS, f"add the checks for the new example {dag_id} to CHECKS"
    CHECKS[dag_id](dag_run, calls, written)
    if cli_calls(calls, "create") or lepton is not None:  # it rented compute: its last task reports the bill
        adds_up_to_the_bill(bill_of(dag_run))
        assert the_page_reads_the_bill(dag_run) == bill_of(dag_run)  # what the page reads is what the task returned
    wait_for_no_instances(brev_sim)
    assert brev_sim.agents() == []  # the CLI started no ssh-agent for any brev exec...
    assert_no_process_left(brev_sim)  # ...and nothing it or the provider started is still running
    if lepton is not None:  # every Lepton resource released: no job alive, no secret left
        assert not lepton.workspace.secrets
        assert all(job.state in ("Completed", "Failed", "Stopped") for job in lepton.jobs().values())


def example_test_run(file_name: str) -> Callable[..., None]:
    """The ``test_run`` of an example's system-test block (tests/system/system_tests.py), as the test suite sees
    the file."""
    namespace = runpy.run_path(str(EXAMPLES / file_name))
    assert callable(namespace.get("test_run")), f"{file_name} has no system-test block"
    return namespace["test_run"]


def test_an_examples_test_run_fails_when_its_run_fails():
    """``test_run`` asserts the run's outcome (it is a test, not a launcher)."""
    from types import SimpleNamespace

    failed = SimpleNamespace(state="failed", get_task_instances=lambda: [SimpleNamespace(task_id="t", state="failed")])
    kwargs: dict[str, Any] = {}

    def run_example(dag: Any, **test_kwargs: Any) -> Any:
        kwargs.update(test_kwargs, dag_id=dag.dag_id)
        return failed

    with pytest.raises(AssertionError, match="The system test brev_janitor failed: {'t': 'failed'}"):
        example_test_run("brev_janitor.py")(run_example)
    assert kwargs == {"dag_id": "brev_janitor"}


def test_scheduled_runs_write_to_distinct_prefixes(dagbag):
    """Scheduled runs have a logical date: each one must still get its own output prefix (one a week here), for
    upload tasks and for the ``outputs`` of exec and TAO steps alike."""
    from datetime import UTC, datetime

    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    from airflow_provider_brev.operators.step import BrevStepOperator
    from airflow_provider_brev.transfers import BrevToS3Operator

    mondays = [datetime(2026, 1, 5, 3, tzinfo=UTC), datetime(2026, 1, 12, 3, tzinfo=UTC)]
    run_ids = [DagRun.generate_run_id(run_type=DagRunType.SCHEDULED, logical_date=d, run_after=d) for d in mondays]

    def destinations(task: Any) -> list[str]:
        """The S3 destination templates of an upload task, or of a step that declares ``outputs``."""
        if isinstance(task, BrevToS3Operator):
            return [task.s3_prefix]
        if isinstance(task, BrevStepOperator):
            return list((task.outputs or {}).values())
        return []

    uploads = [
        (dag, task, destination)
        for file_name in EXAMPLE_FILES
        for dag in map(dagbag.get_dag, dag_ids_in(dagbag, file_name))
        for task in dag.tasks
        for destination in destinations(task)
    ]
    assert {dag.dag_id for dag, _, _ in uploads} >= {"tao_visual_changenet_retrain", "example_brev_mixed_stages"}
    for dag, task, destination in uploads:
        template = dag.get_template_env().from_string(destination)
        prefixes = [template.render(run_id=run_id, params=dict(dag.params)) for run_id in run_ids]
        assert prefixes[0] != prefixes[1], (dag.dag_id, task.task_id, prefixes)
        assert all(run_slug(run_id) in prefix for run_id, prefix in zip(run_ids, prefixes, strict=True))


def test_every_example_imports_only_public_provider_modules():
    """What users copy must not depend on private modules (``airflow_provider_brev._compat`` and the like)."""
    import ast

    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for path in EXAMPLES.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    provider = sorted(name for name in imported if name and name.startswith("airflow_provider_brev"))
    assert "airflow_provider_brev.compat" in provider
    assert [name for name in provider if any(part.startswith("_") for part in name.split("."))] == []


def test_unpausing_the_flagship_schedules_its_first_run_in_the_future(dagbag):
    """Each flagship run bills a GPU instance: the scheduler's first run after unpausing is the next Monday 03:00 UTC,
    not the slot that already passed (asked the way the scheduler asks: serialized DAG, its time restriction)."""
    from datetime import UTC, datetime, timedelta

    from airflow.serialization import serialized_objects

    serializer = getattr(serialized_objects, "DagSerialization", None) or serialized_objects.SerializedDAG
    dag = serializer.from_dict(serializer.to_dict(dagbag.get_dag("tao_visual_changenet_retrain")))
    now = datetime.now(UTC)
    first = dag.timetable.next_dagrun_info(last_automated_data_interval=None, restriction=dag._time_restriction)
    assert first is not None
    assert now < first.run_after <= now + timedelta(days=7)
    assert (first.run_after.weekday(), first.run_after.hour, first.run_after.minute) == (0, 3, 0)


def test_the_flagships_trigger_form_refuses_a_free_text_gate_direction(dagbag):
    """Every flagship param is typed and described; ``gate_direction`` is a choice, so a typo never reaches the
    gate (it would otherwise be compared as text at the end of a paid run)."""
    params = dagbag.get_dag("tao_visual_changenet_retrain").params
    assert {name: bool(params.get_param(name).description) for name in params} == dict.fromkeys(params, True)
    assert params.get_param("gate_direction").schema["enum"] == ["higher", "lower"]
    params.validate()  # the defaults are valid
    form = copy.deepcopy(params)
    from airflow.exceptions import ParamValidationError  # one name on 3.0 and 3.3 (a ValueError only on 3.1+)

    with pytest.raises(ParamValidationError, match="gate_direction"):
        form["gate_direction"] = "up"
