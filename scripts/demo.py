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
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DAG = "tao_visual_changenet_retrain"
DEMO_BUCKET = "tao-vcn-demo"
DATASET_PREFIX = "datasets/vcn-aoi/"


def _prepare_airflow(workdir: Path) -> None:
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
        }
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_local_services(workdir: Path) -> tuple[Any, Any, str]:
    """The Brev simulator, a moto S3 server with the synthetic dataset, and the three connections."""
    import json

    import boto3
    from moto.server import ThreadedMotoServer

    from airflow_provider_brev.testing import BrevSimulator
    from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset

    sim = BrevSimulator(workdir / "brev-sim", profile="released").install()
    os.environ.update(sim.env())
    home = workdir / "worker-home"
    home.mkdir()
    os.environ["HOME"] = str(home)
    os.environ["AIRFLOW_CONN_BREV_DEFAULT"] = sim.connection_json()

    from werkzeug.serving import WSGIRequestHandler

    WSGIRequestHandler.log_request = lambda *args, **kwargs: None  # type: ignore[method-assign]  # URLs are signed
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        os.environ.pop(name, None)
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = json.dumps(
        {
            "conn_type": "aws",
            "login": "demo-access-key",
            "password": "demo-secret-key",
            "extra": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        }
    )
    os.environ["AIRFLOW_CONN_NGC_DEFAULT"] = json.dumps({"conn_type": "generic", "password": "demo-ngc-api-key"})
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="demo-access-key",
        aws_secret_access_key="demo-secret-key",
    )
    client.create_bucket(Bucket=DEMO_BUCKET)
    count = upload_synthetic_vcn_dataset(client, DEMO_BUCKET, DATASET_PREFIX)
    print(f"Local S3 (moto) at {endpoint}: seeded s3://{DEMO_BUCKET}/{DATASET_PREFIX} with {count} objects.")
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
    from airflow_provider_brev.cli.instances.cost import cost_table, costs_in, run_cost

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

        initdb()
        bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
        if bag.import_errors:
            print(f"DAG import errors: {bag.import_errors}", file=sys.stderr)
            return 1
        dag = bag.get_dag(args.dag)
        if dag is None:
            print(f"No DAG {args.dag!r} in dags_examples/", file=sys.stderr)
            return 1
        conf = {"bucket": bucket, "dataset_prefix": DATASET_PREFIX} if args.dag == DEFAULT_DAG else None
        print(f"Running {args.dag} with dag.test(), as a manual run without a logical date ...")
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
