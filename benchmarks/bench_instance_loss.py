"""A checkpointed TAO training step whose instance is lost at 70 % of the run: recovered vs redone by hand.

One run of this script measures both sides against one Brev simulator and one moto S3 server (its own process,
``bench_stage_small.Moto``), each side in real ``dag.test(logical_date=None)`` runs of the DAG
``create >> train >> delete.as_teardown(setups=create)``:

- ``create``: ``BrevCreateInstanceOperator`` (``require_docker=True``): its XCom ``brev_instance`` records the
  spec that recovery re-creates the instance from;
- ``train``: ``VisualChangeNetTrainOperator`` (the dataset's champion spec from S3, overridden to 10 epochs with a
  checkpoint after every epoch, i.e. every 10 % of the run) on that instance, the synthetic Visual ChangeNet
  dataset staged from S3 as ``inputs`` and ``{results_dir}/train`` synced to ``s3://<bucket>/runs/<run
  slug>/train/`` as ``outputs``; it polls every 0.2 s (:data:`STEP_POLL_SECONDS`), scaled with the epochs;
- ``delete``: ``BrevDeleteInstanceOperator`` as the teardown.

The instance is lost (``instance_lost`` fault, ``mode="deleted"``: gone from ``brev ls``, its processes killed)
right after the fake TAO finished 0-based epoch 6, i.e. 70 % of the run. The fault is armed once (``times=1``)
before each side's first DAG run, for whichever instance trains, and cleared after it.

- **with recovery**: the step as shipped (default ``max_instance_recoveries``): it re-creates the instance under
  the same name and resumes from the newest checkpoint that reached S3;
- **without recovery** (the baseline, what a person does today): the same DAG with ``max_instance_recoveries=0``
  fails; then the DAG is run again from its create task (a second ``dag.test``: a new run id, so a new output
  prefix, so training starts at epoch 0). The person's reaction time is not counted.

Reported per side: ``recovered``, ``epochs_needed``, ``epochs_run`` (every epoch any training process finished:
``epochs_run`` of the runs that ended, from ``sim.tao_runs()``; a run killed with its instance writes no end
record, so its epochs are counted from the per-epoch records of TAO's ``status.json`` in the lost instance's
sandbox), ``wasted_work_fraction`` = (epochs run - epochs needed) / epochs needed, wall seconds, ``brev create``
calls, ``leaked_instances`` (after the teardown and the simulator's DELETING phase) and whether the final
checkpoint is in S3.

The DAG file ``dag.test()`` parses from the dags folder is a copy of this script (see the end of the module).

    python benchmarks/bench_instance_loss.py --out result.json [--epoch-seconds 3.0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import (
    WORK_DIR,
    count_by_subcommand,
    is_probe,
    progress,
    quiet_provider_logs,
    subcommand,
    use_simulator,
    write_json,
)

if TYPE_CHECKING:
    from airflow.sdk import DAG

    from airflow_provider_brev.testing.simulator import BrevSimulator

BASE = WORK_DIR / "instance-loss"
DAGS_DIR = BASE / "dags"
BUCKET = "bench-instance-loss"
DATASET_PREFIX = "datasets/vcn/"
RESULTS_DIR = "vcn/results"
EPOCHS = 10
LOST_AFTER_EPOCH = 6  # 0-based: the 7th of 10 epochs finished, 70 % of the run
#: side -> (dag id, max_instance_recoveries; None = the operator's default)
SIDES: dict[str, tuple[str, int | None]] = {
    "with_recovery": ("bench_instance_loss_recovery", None),
    "without_recovery": ("bench_instance_loss_no_recovery", 0),
}
#: the train step's poll interval while the job prints nothing new (the operator's default is 5 s, sized for real
#: epochs of minutes); scaled down with the compressed epochs, see benchmarks/README.md section 10
STEP_POLL_SECONDS = 0.2
NGC_KEY = "ngc-bench-" + "7a3f" * 8
#: the dataset's own ``champion/train_config.yaml`` (the previous model's training spec, read from S3 by the operator)
#: with this data's paths and the run's length: a checkpoint after every epoch, i.e. every 10 % of the run
SPEC_KEY = DATASET_PREFIX + "champion/train_config.yaml"
OVERRIDES: dict[str, Any] = {
    **{
        f"dataset.classify.{split}_dataset.{key}": value
        for split, csv in (("train", "train.csv"), ("validation", "val.csv"))
        for key, value in (("csv_path", f"/data/{csv}"), ("images_dir", "/data/images"))
    },
    "train.num_epochs": EPOCHS,
    "train.checkpoint_interval": 1,
}


def build_dag(dag_id: str, max_instance_recoveries: int | None) -> DAG:
    """``create >> train >> delete.as_teardown(setups=create)``; operator defaults but the step's poll interval."""
    from airflow.sdk import DAG

    from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
    from airflow_provider_brev.operators.tao import VisualChangeNetTrainOperator
    from airflow_provider_brev.utils.templates import run_slug

    recoveries = {} if max_instance_recoveries is None else {"max_instance_recoveries": max_instance_recoveries}
    with DAG(
        dag_id=dag_id, schedule=None, params={"bucket": BUCKET}, user_defined_filters={"run_slug": run_slug}
    ) as dag:
        create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", require_docker=True)
        train = VisualChangeNetTrainOperator(
            task_id="train",
            instance_name=create.output,
            image="nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt",
            spec_s3_uri=f"s3://{BUCKET}/{SPEC_KEY}",
            overrides=OVERRIDES,
            results_dir=RESULTS_DIR,
            mounts={"vcn/data": "/data"},
            inputs={"s3://{{ params.bucket }}/" + DATASET_PREFIX: "vcn/data"},
            outputs={f"{RESULTS_DIR}/train": "s3://{{ params.bucket }}/runs/{{ run_id | run_slug }}/train/"},
            poll_interval=STEP_POLL_SECONDS,
            **recoveries,
        )
        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)  # type: ignore[arg-type]
        create >> train >> delete.as_teardown(setups=create)
    return dag


# --------------------------------------------------------------------------------------- set-up
def prepare_airflow() -> None:
    """A fresh AIRFLOW_HOME with a migrated SQLite DB, whose dags folder holds a copy of this file."""
    home = BASE / "airflow-home"
    DAGS_DIR.mkdir(parents=True)
    shutil.copy(Path(__file__), DAGS_DIR / "bench_instance_loss_dags.py")
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        }
    )
    from airflow.utils.db import initdb

    initdb()


def use_moto(moto: Any) -> Any:
    """``aws_default`` pointing at moto, no ambient AWS credentials; returns a client with the bucket created."""
    from bench_stage_small import KEY_ID, REGION, SECRET

    conn = {"conn_type": "aws", "login": KEY_ID, "password": SECRET}
    conn["extra"] = {"endpoint_url": moto.endpoint, "region_name": REGION}  # type: ignore[assignment]
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = json.dumps(conn)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        os.environ.pop(name, None)
    os.environ.update({"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null"})
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = "/dev/null"
    client = moto.client()
    client.create_bucket(Bucket=BUCKET)
    return client


# ---------------------------------------------------------------------------------- measuring
def wait_until_gone(sim: BrevSimulator, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Instances still listed once DELETING had ``timeout`` seconds to finish (``brev delete`` is asynchronous)."""
    deadline = time.monotonic() + timeout
    while sim.instances() and time.monotonic() < deadline:
        time.sleep(0.1)
    return sim.instances()


def status_epochs(sim: BrevSimulator, instance_id: str) -> int:
    """Epochs TAO finished on an instance: per-epoch records of ``<results_dir>/train/status.json``."""
    path = sim.sandbox(instance_id) / RESULTS_DIR / "train" / "status.json"
    if not path.exists():
        return 0
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sum(1 for r in records if r.get("status") == "RUNNING" and "epoch" in r)


def train_runs(sim: BrevSimulator, since: float) -> list[dict[str, Any]]:
    """The side's TAO ``train`` runs: start epoch, epochs finished, checkpoints written, exit code, instance."""
    runs = [r for r in sim.tao_runs() if r.get("action") == "train" and float(r.get("ts", 0)) >= since]
    out = []
    for run in runs:
        ended = "epochs_run" in run
        same_instance = [r for r in runs if r.get("instance_id") == run.get("instance_id") and "epochs_run" in r]
        killed_epochs = status_epochs(sim, run["instance_id"]) - sum(int(r["epochs_run"]) for r in same_instance)
        out.append(
            {
                "instance": run.get("instance"),
                "instance_id": run.get("instance_id"),
                "ended": ended,
                "exit_code": run.get("exit_code"),
                "start_epoch": run.get("start_epoch"),
                "epochs_run": int(run["epochs_run"]) if ended else killed_epochs,
                "checkpoints_written": len(run.get("checkpoints_written") or []) if ended else None,
            }
        )
    return out


def final_checkpoint_keys(client: Any, run_id: str) -> list[str]:
    from airflow_provider_brev.utils.templates import run_slug

    prefix = f"runs/{run_slug(run_id)}/train/"
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    keys = [obj["Key"] for page in pages for obj in page.get("Contents", [])]
    return [k for k in keys if k.rsplit("/", 1)[-1].startswith(f"model_epoch_{EPOCHS - 1:03d}_")]


def run_once(dag: DAG) -> dict[str, Any]:
    """One ``dag.test(logical_date=None)``: a new DAG run (new run id) through create, train and the teardown."""
    started = time.monotonic()
    dag_run = dag.test(logical_date=None)
    wall = time.monotonic() - started
    states = {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in dag_run.get_task_instances()}
    train_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "train")
    result = train_ti.xcom_pull(task_ids="train") if states["train"] == "success" else None
    return {
        "run_id": dag_run.run_id,
        "state": str(getattr(dag_run.state, "value", dag_run.state)),
        "task_states": states,
        "wall_s": round(wall, 1),
        "resumed_from": (result or {}).get("resumed_from"),
    }


def measure_side(side: str, dag: DAG, sim: BrevSimulator, client: Any) -> dict[str, Any]:
    since = time.time()
    sim.set_fault("instance_lost", mode="deleted", at_epoch=LOST_AFTER_EPOCH, times=1)
    progress(f"instance_loss: {side}: DAG run 1 (instance lost after epoch {LOST_AFTER_EPOCH + 1}/{EPOCHS})")
    runs = [run_once(dag)]
    fault_fired = not [f for f in sim.faults() if f.get("kind") == "instance_lost"]
    sim.clear_faults("instance_lost")
    if runs[0]["state"] != "success":
        progress(f"instance_loss: {side}: run 1 {runs[0]['state']} ({runs[0]['task_states']}); re-running the DAG")
        leftover = wait_until_gone(sim)  # a person re-runs once the failed run's teardown is through
        runs.append({**run_once(dag), "instances_left_by_run_1": len(leftover)})
    leaked = wait_until_gone(sim)
    calls = [c for c in sim.calls() if float(c.get("ts", 0)) >= since and not is_probe(c["argv"])]
    trains = train_runs(sim, since)
    epochs_run = sum(t["epochs_run"] for t in trains)
    final = runs[-1]
    checkpoint_keys = final_checkpoint_keys(client, final["run_id"]) if final["state"] == "success" else []
    return {
        "recovered": runs[0]["state"] == "success",
        "succeeded_eventually": final["state"] == "success",
        "dag_runs": len(runs),
        "instance_lost": fault_fired,
        "epochs_needed": EPOCHS,
        "epochs_run": epochs_run,
        "wasted_work_fraction": round((epochs_run - EPOCHS) / EPOCHS, 3),
        "wall_s": round(sum(r["wall_s"] for r in runs), 1),
        "brev_create_calls": sum(1 for c in calls if subcommand(c["argv"]) == "create"),
        "leaked_instances": len(leaked),
        "leaked": [{"name": i["name"], "status": i.get("status")} for i in leaked],
        "final_checkpoint_in_s3": bool(checkpoint_keys),
        "final_checkpoint_keys": checkpoint_keys,
        "train_runs": trains,
        "runs": runs,
        "brev_calls_by_subcommand": count_by_subcommand(calls),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--epoch-seconds", type=float, default=3.0, help="fake TAO time per training epoch")
    args = parser.parse_args()
    from bench_stage_small import BASE as MOTO_LOG_DIR
    from bench_stage_small import Moto

    from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset
    from airflow_provider_brev.testing.simulator import BrevSimulator

    shutil.rmtree(BASE, ignore_errors=True)
    MOTO_LOG_DIR.mkdir(parents=True, exist_ok=True)  # Moto writes its log there
    sim = BrevSimulator(BASE / "sim").install()
    use_simulator(sim, BASE / "worker-home")
    prepare_airflow()
    os.environ["AIRFLOW_CONN_NGC_DEFAULT"] = json.dumps({"conn_type": "generic", "password": NGC_KEY})
    moto = Moto()
    try:
        client = use_moto(moto)
        objects = upload_synthetic_vcn_dataset(client, BUCKET, DATASET_PREFIX)
        sim.set_tao(epoch_seconds=args.epoch_seconds)
        quiet_provider_logs()
        results = {side: measure_side(side, build_dag(*spec), sim, client) for side, spec in SIDES.items()}
    finally:
        sim.kill_all()
        moto.stop()
    with_rec, without = results["with_recovery"], results["without_recovery"]
    result = {
        **results,
        "epochs": EPOCHS,
        "checkpoint_every_epochs": 1,
        "lost_after_epoch": LOST_AFTER_EPOCH + 1,
        "epoch_seconds": args.epoch_seconds,
        "step_poll_seconds": STEP_POLL_SECONDS,
        "dataset_objects": objects,
        "wall_s_saved": round(without["wall_s"] - with_rec["wall_s"], 1),
        "method": "dag.test(logical_date=None) against the Brev simulator and a moto S3 server (own process)",
    }
    write_json(Path(args.out), result)
    shutil.rmtree(BASE, ignore_errors=True)
    for side in SIDES:
        r = results[side]
        progress(
            f"instance_loss: {side}: recovered={r['recovered']} epochs_run={r['epochs_run']}/{EPOCHS} "
            f"wasted={r['wasted_work_fraction']} wall={r['wall_s']} s creates={r['brev_create_calls']} "
            f"leaked={r['leaked_instances']} final checkpoint in S3={r['final_checkpoint_in_s3']}"
        )
    return 0 if with_rec["instance_lost"] and without["instance_lost"] else 1


if __name__ == "__main__":
    sys.exit(main())
else:  # the copy in the dags folder, parsed by dag.test() (its module name is not __main__)
    DAGS = [build_dag(dag_id, recoveries) for dag_id, recoveries in SIDES.values()]
