"""``make demo``: run the flagship retraining DAG end to end with ``dag.test()`` and print a summary.

Without Brev credentials it runs against the bundled Brev simulator and a local moto S3 server seeded with a
small synthetic Visual ChangeNet dataset (nothing leaves this machine). With ``AIRFLOW_CONN_BREV_DEFAULT`` or
``BREV_API_TOKEN`` set it runs against real Brev, real S3 (``aws_default``) and NGC (``ngc_default``): real GPU
instances, real money -- the banner says so. Everything it starts lives in a temporary directory and is
stopped/removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DAG = "tao_visual_changenet_retrain"
DEMO_BUCKET = "tao-vcn-demo"
DATASET_PREFIX = "datasets/vcn-aoi/"
#: The flagship's params in the demo: a cold run whose instance is deleted at the end, so the demo leaves nothing
#: billing -- not even the disk of a stopped instance, which the DAG's own defaults (warm reuse) would keep.
DEMO_COLD = {"reuse_key": None, "release": "delete"}
#: Every bucket an example DAG defaults to (its ``bucket`` param without BREV_EXAMPLE_BUCKET/TAO_VCN_BUCKET): the
#: local S3 of ``make demo`` and ``make airflow`` (scripts/airflow_local.py) creates each, so every example runs as
#: triggered. tests/integration/test_examples.py fails when an example defaults to a bucket missing here.
EXAMPLE_BUCKETS = (DEMO_BUCKET, "brev-examples")


def seed_local_s3(client: Any) -> int:
    """Create every bucket of :data:`EXAMPLE_BUCKETS` in a local S3 and upload the synthetic dataset to
    ``s3://DEMO_BUCKET/DATASET_PREFIX``; returns how many objects the dataset has."""
    from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset

    for bucket in EXAMPLE_BUCKETS:
        client.create_bucket(Bucket=bucket)
    return upload_synthetic_vcn_dataset(client, DEMO_BUCKET, DATASET_PREFIX)


#: Warnings the demo's own ``dag.test()`` causes and a user can do nothing about: Airflow runs its execution API
#: in-process through Starlette's ``TestClient``, which warns (a ``UserWarning``, so shown by default) when only
#: ``httpx`` is installed, not ``httpx2``. A real deployment never uses that client.
DEMO_IGNORED_WARNINGS = (r"Using `httpx` with `starlette\.testclient` is deprecated",)


def _quiet_known_warnings() -> None:
    """Ignore :data:`DEMO_IGNORED_WARNINGS`, and Airflow's deprecation notices about its own code (Airflow 3.0
    calls names it deprecated itself, e.g. ``Connection.get_connection_from_secrets``). Importing Airflow puts its
    own "show DeprecationWarning of airflow.*" filter first, so this runs again once Airflow is imported; the
    provider's own warnings (``airflow_provider_brev``) stay visible."""
    for message in DEMO_IGNORED_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"airflow(\.|$)")


def _prepare_airflow(workdir: Path) -> None:
    from cryptography.fernet import Fernet

    dags = workdir / "dags"
    dags.mkdir()
    for path in (ROOT / "dags_examples").glob("*.py"):
        shutil.copy(path, dags / path.name)
    os.environ.update(
        {
            "AIRFLOW_HOME": str(workdir / "airflow"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{workdir}/airflow.db",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("DEMO_LOG_LEVEL", "WARNING"),
            # dag.test() runs triggers inline, with no scheduler whose deferral race the settling time guards
            # against (airflow_provider_brev/triggers/brev.py): no reason to hold events back here.
            "AIRFLOW__BREV__DEFERRAL_SETTLE_SECONDS": "0",
            # a fresh key per demo: connections and variables in its throw-away DB are stored encrypted, and
            # Airflow does not warn "empty cryptography key"
            "AIRFLOW__CORE__FERNET_KEY": os.environ.get("AIRFLOW__CORE__FERNET_KEY") or Fernet.generate_key().decode(),
        }
    )
    _quiet_known_warnings()


def _start_local_services(workdir: Path, s3_endpoint: str | None = None) -> tuple[Any, Any, str]:
    """The Brev simulator, a moto S3 server with the synthetic dataset, and the three connections.

    :param workdir: where the simulator and the worker's home live.
    :param s3_endpoint: a moto server already running elsewhere (e.g. in its own process, as the bill benchmark
        starts it); ``None``: one is started in this process (the returned server, ``None`` otherwise).
    """
    import json

    from airflow_provider_brev.testing import BrevSimulator
    from airflow_provider_brev.testing.local_s3 import LocalS3Server, isolated_aws_environment, s3_client

    sim = BrevSimulator(workdir / "brev-sim", profile="released").install()
    os.environ.update(sim.env())
    home = workdir / "worker-home"
    home.mkdir()
    os.environ["HOME"] = str(home)
    os.environ["AIRFLOW_CONN_BREV_DEFAULT"] = sim.connection_json()

    server: Any = None
    endpoint = s3_endpoint or ""
    if not endpoint:
        server = LocalS3Server().start()  # the pytest plugin's local S3 (brev_s3): its request log is silenced
        endpoint = server.endpoint
    env, removed = isolated_aws_environment(endpoint)  # aws_default -> moto, dummy keys
    for name in removed:
        os.environ.pop(name, None)
    os.environ.update(env)
    os.environ["AIRFLOW_CONN_NGC_DEFAULT"] = json.dumps({"conn_type": "generic", "password": "demo-ngc-api-key"})
    count = seed_local_s3(s3_client(endpoint))
    others = ", ".join(bucket for bucket in EXAMPLE_BUCKETS if bucket != DEMO_BUCKET)
    print(
        f"Local S3 (moto) at {endpoint}: seeded s3://{DEMO_BUCKET}/{DATASET_PREFIX} with {count} objects"
        f" (and the other examples' bucket(s): {others})."
    )
    return sim, server, endpoint


#: The flagship's steps that own their data, in pipeline order.
DATA_STEPS = ("gap_analysis", "train", "evaluate")


def _count_objects(uri: str) -> int:
    """How many objects are under the S3 URI prefix (``aws_default``: the moto server here, or real S3)."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return len(S3Hook(aws_conn_id="aws_default").list_keys(bucket_name=bucket, prefix=prefix) or [])


def _data_table(results: dict[str, dict[str, Any]]) -> tuple[list[str], bool]:
    """Per step: where its outputs landed in S3 (and how many objects are there), what its input sync did; and
    whether every step has outputs in S3."""
    lines, complete = [], True
    for step in DATA_STEPS:
        result = results.get(step) or {}
        inputs = (result.get("sync") or {}).get("inputs") or []
        fetched = sum(int(report.get("transferred", 0)) for report in inputs)
        unchanged = sum(int(report.get("skipped", 0)) for report in inputs)
        synced = f"inputs: {fetched} downloaded, {unchanged} unchanged"
        outputs = result.get("outputs") or {}
        if not outputs:
            lines.append(f"  {step:<13} -> (no outputs recorded)")
            complete = False
        for uri in outputs.values():
            count = _count_objects(uri)
            complete = complete and count > 0
            lines.append(f"  {step:<13} -> {uri} ({count} files; {synced})")
    return lines, complete


def _decision(state: str | None, decision: dict[str, Any]) -> str:
    if state == "success" and decision.get("promoted"):
        comparison = ">=" if decision.get("direction") == "higher" else "<="
        return (
            f"Promoted: {decision.get('metric')}={decision.get('value')} {comparison} {decision.get('threshold')}; "
            f"model {decision.get('model')}"
        )
    if state == "skipped":
        return "Not promoted: the metrics gate did not pass (see the promote task log)."
    return f"Not promoted: the promote task is {state}."


def _cost_table(dag_run: Any, report: dict[str, Any] | None) -> str:
    """The run's cost table: the one its last task logged (the flagship's ``cost_report``), else built here from
    every task's ``brev_cost``."""
    if report and report.get("table"):
        return str(report["table"])
    from airflow_provider_brev.core.bill import cost_table, run_cost
    from airflow_provider_brev.core.cost import costs_in

    costs = [
        (ti.task_id, cost)
        for ti in sorted(dag_run.get_task_instances(), key=lambda ti: ti.start_date or ti.end_date or 0)
        for cost in costs_in(ti.xcom_pull(task_ids=ti.task_id, key="brev_cost"))
    ]
    return cost_table(run_cost(costs)) if costs else ""


def _summary(dag_run: Any, sim: Any, *, flagship: bool) -> int:
    tis = {ti.task_id: ti for ti in dag_run.get_task_instances()}
    state = getattr(dag_run.state, "value", dag_run.state)

    def duration(task_id: str) -> float:
        ti = tis.get(task_id)
        return float(ti.duration or 0.0) if ti is not None else 0.0

    def xcom(task_id: str, key: str = "return_value") -> Any:
        ti = tis.get(task_id)
        return ti.xcom_pull(task_ids=task_id, key=key) if ti is not None else None

    def task_state(task_id: str) -> str | None:
        ti = tis.get(task_id)
        return None if ti is None else getattr(ti.state, "value", ti.state)

    print()
    print(f"DAG {dag_run.dag_id}: {state} (run {dag_run.run_id}, logical date {dag_run.logical_date})")
    for task_id, ti in sorted(tis.items(), key=lambda kv: kv[1].start_date or kv[1].end_date or 0):
        print(f"  {task_id:<20} {getattr(ti.state, 'value', ti.state):<10} {float(ti.duration or 0):7.1f} s")
    complete = True
    if flagship:
        results = {step: xcom(step) or {} for step in DATA_STEPS}
        pulls = sum(float(xcom(step, "tao_pull_seconds") or 0) for step in DATA_STEPS)
        print()
        print("Instance lifetime, split:")
        print(f"  boot (create + readiness)  {duration('create_instance'):7.1f} s")
        print(f"  image pulls                {pulls:7.1f} s")
        for step in DATA_STEPS:
            print(f"  {step.replace('_', ' '):<26} {duration(step):7.1f} s  (with its image pull and data syncs)")
        print()
        print("Step outputs in S3:")
        lines, complete = _data_table(results)
        print("\n".join(lines))
        evaluation, gap = results["evaluate"], results["gap_analysis"]
        print()
        print(f"KPIs (evaluate): {evaluation.get('kpis')}")
        print(f"Gap analysis: threshold {gap.get('kpis', {}).get('threshold')}, f1 {gap.get('kpis', {}).get('f1')}")
        print(_decision(task_state("promote"), xcom("promote") or {}))
    table = _cost_table(dag_run, xcom("cost_report") if flagship else None)
    if table:
        print()
        print("What it cost (brev_cost of every task; with the simulator: its timings and its catalog prices):")
        print(table)
    left = -1
    if sim is not None:
        deadline = time.monotonic() + 30
        while sim.instances() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = len(sim.instances())
        print(f"brev CLI invocations: {len(sim.calls())}")
        print(f"Instances left: {left}")
    return 0 if state == "success" and left in (0, -1) and complete else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dag", default=os.environ.get("DEMO_DAG", DEFAULT_DAG))
    args = parser.parse_args(argv)
    real = bool(os.environ.get("AIRFLOW_CONN_BREV_DEFAULT") or os.environ.get("BREV_API_TOKEN"))
    workdir = Path(tempfile.mkdtemp(prefix="brev-demo-"))
    sim = server = None
    bucket = os.environ.get("TAO_VCN_BUCKET", DEMO_BUCKET)
    try:
        _prepare_airflow(workdir)
        if real:
            print("=" * 78)
            print("Brev credentials found: running against REAL Brev, S3 and NGC (GPU instances are billed).")
            print("=" * 78)
        else:
            sim, server, _ = _start_local_services(workdir)
            bucket = DEMO_BUCKET
            print(f"No Brev credentials configured: using the bundled Brev simulator ({sim.profile} profile).")

        from airflow.models import DagBag
        from airflow.utils.db import initdb

        _quiet_known_warnings()  # again: importing Airflow put its own DeprecationWarning filter first

        from airflow_provider_brev.testing.dag_sync import sync_dag_bundles_to_db

        initdb()
        sync_dag_bundles_to_db()  # what the DAG processor does: on Airflow 3.0 dag.test() leaves assets inactive
        bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
        if bag.import_errors:
            print(f"DAG import errors: {bag.import_errors}", file=sys.stderr)
            return 1
        dag = bag.get_dag(args.dag)
        if dag is None:
            print(f"No DAG {args.dag!r} in dags_examples/", file=sys.stderr)
            return 1
        conf = {"bucket": bucket, "dataset_prefix": DATASET_PREFIX, **DEMO_COLD} if args.dag == DEFAULT_DAG else None
        print(f"Running {args.dag} with dag.test(), as a manual run without a logical date ...")
        if conf is not None:
            print(
                "The demo ends every bill: reuse_key=None and release='delete' (triggered from the UI, the DAG keeps its"
                " instance stopped for the next run instead)."
            )
        # logical_date=None: what the UI, `airflow dags trigger` and the REST API create on Airflow 3 (dag.test()
        # without it would use the current time and hide templates that need ds/ds_nodash).
        dag_run = dag.test(logical_date=None, run_conf=conf)
        return _summary(dag_run, sim, flagship=args.dag == DEFAULT_DAG)
    finally:
        if sim is not None:
            sim.kill_all()
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
