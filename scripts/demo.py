"""``make demo``: run an example DAG end to end with ``dag.test()``.

Without Brev credentials it runs against the bundled Brev simulator (nothing leaves this machine); with
``AIRFLOW_CONN_BREV_DEFAULT`` or ``BREV_API_TOKEN`` set it runs against real Brev (real GPU instances,
real money: the banner says so). Everything it starts lives in a temporary directory removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DAG = "example_brev_lifecycle"


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
        }
    )


def _start_simulator(workdir: Path):
    from airflow_provider_brev.testing import BrevSimulator

    sim = BrevSimulator(workdir / "brev-sim", profile="released").install()
    os.environ.update(sim.env())
    home = workdir / "worker-home"
    home.mkdir()
    os.environ["HOME"] = str(home)
    os.environ["AIRFLOW_CONN_BREV_DEFAULT"] = sim.connection_json()
    return sim


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dag", default=os.environ.get("DEMO_DAG", DEFAULT_DAG))
    args = parser.parse_args(argv)
    real = bool(os.environ.get("AIRFLOW_CONN_BREV_DEFAULT") or os.environ.get("BREV_API_TOKEN"))
    workdir = Path(tempfile.mkdtemp(prefix="brev-demo-"))
    sim = None
    try:
        _prepare_airflow(workdir)
        if real:
            print("=" * 78)
            print("Brev credentials found: running against REAL Brev (GPU instances are billed).")
            print("=" * 78)
        else:
            sim = _start_simulator(workdir)
            print(f"No Brev credentials configured: using the bundled simulator ({sim.profile} profile).")

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
        started = time.monotonic()
        dag_run = dag.test()
        elapsed = time.monotonic() - started
        states = {ti.task_id: getattr(ti.state, "value", ti.state) for ti in dag_run.get_task_instances()}
        state = getattr(dag_run.state, "value", dag_run.state)
        print()
        print(f"DAG {args.dag}: {state} in {elapsed:.1f} s")
        for task_id, task_state in states.items():
            print(f"  {task_id:<28} {task_state}")
        if sim is not None:
            deadline = time.monotonic() + 30
            while sim.instances() and time.monotonic() < deadline:
                time.sleep(0.1)
            calls = sim.calls()
            print(
                f"brev CLI invocations: {len(calls)}  (logins: {sum(1 for c in calls if c['argv'][:1] == ['login'])})"
            )
            print(f"instances left: {len(sim.instances())}")
            if sim.instances():
                return 1
        return 0 if state == "success" else 1
    finally:
        if sim is not None:
            sim.kill_all()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
