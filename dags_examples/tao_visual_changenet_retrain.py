"""Recurring Visual ChangeNet retraining on NVIDIA Brev -- the flagship example.

Weekly (Monday 03:00 UTC) and whenever the dataset asset gets a new event, one GPU instance serves the whole
pipeline between a setup and a teardown:

    preflight → create (setup) → stage dataset from S3 → gap analysis → train → evaluate → upload results to a
    per-run S3 prefix → metrics gate (explicit direction) → "model promoted" asset event
                                                           ↘ delete (teardown: runs even when training fails)

Nothing is paid for before the pre-launch checks pass (S3 inputs readable, NGC key for nvcr.io images). TAO
success is verified beyond the exit code (status.json SUCCESS, a new checkpoint). Program faults (out of
memory, bad spec) and an unreachable KPI fail without retry; infrastructure faults retry on the same instance
(the create task adopts it, the exec tasks re-attach to still-running jobs).

Configuration: Airflow connections ``brev_default`` (Brev token), ``aws_default`` (S3), ``ngc_default`` (NGC API
key in the password). ``make demo`` runs it end to end against the bundled Brev simulator and a local moto S3.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, Asset, task

from airflow_provider_brev._compat import AssetOrTimeSchedule, CronTriggerTimetable
from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
from airflow_provider_brev.operators.tao import (
    BrevPreflightOperator,
    VisualChangeNetEvaluateOperator,
    VisualChangeNetGapAnalysisOperator,
    VisualChangeNetTrainOperator,
)
from airflow_provider_brev.transfers import BrevToS3Operator, S3ToBrevOperator
from airflow_provider_brev.utils.templates import run_slug

BUCKET = os.environ.get("TAO_VCN_BUCKET", "tao-vcn-demo")
DATASET_PREFIX = os.environ.get("TAO_VCN_DATASET_PREFIX", "datasets/vcn-aoi/")
TRAIN_IMAGE = os.environ.get("TAO_PYT_IMAGE", "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt")
DATA_SERVICES_IMAGE = os.environ.get("TAO_DS_IMAGE", "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-data-services")

DATASET = Asset(f"s3://{BUCKET}/{DATASET_PREFIX}")
PROMOTED_MODEL = Asset(f"s3://{BUCKET}/models/visual-changenet/promoted")

DATA_DIR = "vcn/data"  # on the instance, relative to the remote home
RESULTS_DIR = "vcn/results"
MOUNTS = {DATA_DIR: "/data"}

TRAIN_SPEC = {
    "dataset": {
        "classify": {
            "train_dataset": {"csv_path": "/data/train.csv", "images_dir": "/data/images"},
            "validation_dataset": {"csv_path": "/data/val.csv", "images_dir": "/data/images"},
            "test_dataset": {"csv_path": "/data/test.csv", "images_dir": "/data/images"},
            "image_ext": ".jpg",
            "batch_size": 4,
            "workers": 2,
        }
    },
    "train": {"num_epochs": 3, "checkpoint_interval": 1, "validation_interval": 1},
}
EVALUATE_SPEC = {
    "dataset": TRAIN_SPEC["dataset"],
    "evaluate": {"checkpoint": "/results/train/changenet_model_classify_latest.pth"},
}
GAP_SPEC = {
    "inference_results_dir": "/data/champion/inference",
    "train_config": "/data/champion/train_config.yaml",
    "kpi_media_path": "/data/images",
    "min_recall": 0.9,
    "top_k_per_label": 50,
}
# One results prefix per DAG run. run_id, not ds/ds_nodash: manual and asset-triggered runs have no logical date.
RUN_PREFIX = "runs/{{ run_id | run_slug }}/"

with DAG(
    dag_id="tao_visual_changenet_retrain",
    schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable("0 3 * * 1", timezone="UTC"), assets=DATASET),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["brev", "tao", "example"],
    user_defined_filters={"run_slug": run_slug},
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2)},
    params={
        "bucket": BUCKET,
        "dataset_prefix": DATASET_PREFIX,
        "gpu": "L40S:1",
        "num_epochs": 3,
        "gate_metric": "test_acc",
        "gate_direction": "higher",  # explicit: never inferred from the metric's name
        "gate_threshold": 0.8,
    },
) as dag:
    # [START howto_tao_retrain]
    preflight = BrevPreflightOperator(
        task_id="preflight",
        s3_inputs=["s3://{{ params.bucket }}/{{ params.dataset_prefix }}"],
        image=TRAIN_IMAGE,
        retries=0,
    )

    create = BrevCreateInstanceOperator(
        task_id="create_instance",
        gpu="{{ params.gpu }}",
        require_docker=True,
        deferrable=True,
        ready_timeout=1800,
        max_lifetime=timedelta(hours=12),
    )

    stage = S3ToBrevOperator(
        task_id="stage_dataset",
        instance_name=create.output,
        s3_bucket="{{ params.bucket }}",
        s3_prefix="{{ params.dataset_prefix }}",
        remote_dir=DATA_DIR,
    )

    common = {
        "instance_name": create.output,
        "results_dir": RESULTS_DIR,
        "mounts": MOUNTS,
        "deferrable": True,
        "poll_interval": 2.0,
        "timeout": 6 * 3600,
    }
    gap_analysis = VisualChangeNetGapAnalysisOperator(
        task_id="gap_analysis", image=DATA_SERVICES_IMAGE, spec=GAP_SPEC, **common
    )
    train = VisualChangeNetTrainOperator(
        task_id="train",
        image=TRAIN_IMAGE,
        spec=TRAIN_SPEC,
        overrides={"train.num_epochs": "{{ params.num_epochs }}"},
        **common,
    )
    evaluate = VisualChangeNetEvaluateOperator(task_id="evaluate", image=TRAIN_IMAGE, spec=EVALUATE_SPEC, **common)

    upload = BrevToS3Operator(
        task_id="upload_results",
        instance_name=create.output,
        remote_dir=RESULTS_DIR,
        s3_bucket="{{ params.bucket }}",
        s3_prefix=RUN_PREFIX,
        exclude=["specs/*"],
    )

    @task(outlets=[PROMOTED_MODEL])
    def promote(evaluation: dict, gap: dict, upload_summary: dict, params=None, outlet_events=None) -> dict:
        """Metrics gate with an explicit direction; emits the "model promoted" asset event only when it passes."""
        from airflow_provider_brev._compat import AirflowSkipException

        metric, direction = params["gate_metric"], params["gate_direction"]
        threshold = float(params["gate_threshold"])
        if direction not in ("higher", "lower"):
            raise ValueError("gate_direction must be 'higher' or 'lower'")
        value = float(evaluation["kpis"][metric])
        passed = value >= threshold if direction == "higher" else value <= threshold
        decision = {
            "metric": metric,
            "value": value,
            "direction": direction,
            "threshold": threshold,
            "promoted": passed,
            "results": upload_summary.get("s3_uri") or upload_summary.get("s3_prefix"),
            "gap_threshold": gap.get("kpis", {}).get("threshold"),
            "checkpoints": evaluation.get("checkpoints"),
        }
        if not passed:
            raise AirflowSkipException(f"Not promoted: {metric}={value} is not {direction} than {threshold}.")
        outlet_events[PROMOTED_MODEL].extra = decision
        return decision

    delete = BrevDeleteInstanceOperator(task_id="delete_instance", instance_name=create.output)

    preflight >> create >> stage >> gap_analysis >> train >> evaluate >> upload
    promote(evaluate.output, gap_analysis.output, upload.output)
    [stage, gap_analysis, train, evaluate, upload] >> delete.as_teardown(setups=create)
    # [END howto_tao_retrain]
