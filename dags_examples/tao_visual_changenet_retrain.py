"""Recurring Visual ChangeNet retraining on NVIDIA Brev -- the flagship example.

Weekly (Monday 03:00 UTC) and whenever the dataset asset gets a new event, one GPU instance serves the whole
pipeline between a setup and a teardown:

    preflight → create (setup) → gap analysis → train → evaluate → metrics gate (explicit direction)
                                                                  → "model promoted" asset event
                               ↘ delete (teardown: runs even when a step fails) → the run's cost table

Every TAO step owns its data: its ``inputs`` (the dataset, and for ``evaluate`` the trained checkpoints) are
synced from S3 before it launches -- incrementally, so the later steps download nothing already there -- and its
``outputs`` go to its own folder under the run's S3 prefix, ``s3://<bucket>/runs/<run slug>/{gap_analysis,train,
evaluate}/``, while it runs (``train``: at every checkpoint) and when it ends, success or failure. A lost
instance is re-created from the create task's record and the step runs again on it; ``train`` resumes from its
newest checkpoint in S3.

**Warm by default.** The teardown *stops* the instance instead of deleting it when its type can stop and the
break-even favours it -- the disk kept for ``max_idle_hours`` (3) costs less than the GPU time of the boot, image
pulls and staging a warm start saves -- and the next run's create task *starts* it (``reuse_key``): the images are
present (0 bytes pulled) and the dataset synced (0 unchanged objects downloaded). Stopped, only its disk is billed;
no run within ``max_idle_hours`` and the janitor deletes it. The weekly slot itself is 7 days away, where the disk
would cost more than a cold start: the instance is kept for the runs in between (a dataset event, a re-run). Turn
it off per run with ``release="delete"`` (or an empty ``reuse_key``) in the trigger form.

Every Brev task reports what it cost (XCom ``brev_cost``: the type's price per hour and the billed seconds and
dollars of boot, image pulls, staging, work, resume, upload and idle time); the last task logs the run's bill, split
into every task's phases.

Nothing is paid for before the pre-launch checks pass (S3 inputs readable, NGC key for nvcr.io images). TAO
success is verified beyond the exit code (status.json SUCCESS, a new checkpoint). Program faults (out of
memory, bad spec) and an unreachable KPI fail without retry; infrastructure faults retry on the same instance
(the create task adopts it, the exec tasks re-attach to still-running jobs).

Configuration: Airflow connections ``brev_default`` (Brev token), ``aws_default`` (S3), ``ngc_default`` (NGC API
key in the password). ``make demo`` runs it end to end against the bundled Brev simulator and a local moto S3.

**Unpausing does not start a run.** Each run creates a billed GPU instance, so the first scheduled run is the
*next* Monday 03:00 UTC after you unpause, never a slot that already passed: the DAG has no ``start_date`` and its
``CronTriggerTimetable`` has ``run_immediately=False`` (with a ``start_date``, Airflow would run the latest past
slot as soon as the DAG is unpaused, ``catchup=False`` or not). Runs start earlier only when you trigger one or when
the dataset asset gets an event. Pausing it later and unpausing it after a Monday has passed *does* run that
missed Monday once (Airflow's ``catchup=False``): trigger it by hand instead if that is not what you want.
"""

from __future__ import annotations

import os
from datetime import timedelta

from airflow.sdk import DAG, Asset, Param, task

from airflow_provider_brev.compat import AirflowSkipException, AssetOrTimeSchedule, CronTriggerTimetable
from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
from airflow_provider_brev.operators.tao import (
    BrevPreflightOperator,
    VisualChangeNetEvaluateOperator,
    VisualChangeNetGapAnalysisOperator,
    VisualChangeNetTrainOperator,
)
from airflow_provider_brev.utils.cost import cost_report
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
# The newest checkpoint train wrote (a real file: the ``*_latest.pth`` symlink is never uploaded to S3).
EVALUATE_SPEC = {
    "dataset": TRAIN_SPEC["dataset"],
    "evaluate": {"checkpoint": "/results/train/{{ ti.xcom_pull(task_ids='train')['checkpoints'][-1] }}"},
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
DATASET_URI = "s3://{{ params.bucket }}/{{ params.dataset_prefix }}"
RUN_URI = "s3://{{ params.bucket }}/" + RUN_PREFIX
# Each TAO action writes to <results_dir>/<action>/ (gap analysis: vcn_aoi); each goes to its own folder of the run.
GAP_DIR, TRAIN_DIR, EVALUATE_DIR = (f"{RESULTS_DIR}/{action}" for action in ("vcn_aoi", "train", "evaluate"))

# Warm by default (see "Warm by default" above): the key a run's stopped instance is kept under, and how long.
REUSE_KEY = "tao-vcn-retrain"
MAX_IDLE_HOURS = 3

# Mondays 03:00 UTC, first run on the Monday after unpausing (no start_date; see "Unpausing" above).
WEEKLY = CronTriggerTimetable("0 3 * * 1", timezone="UTC", run_immediately=False)

with DAG(
    dag_id="tao_visual_changenet_retrain",
    schedule=AssetOrTimeSchedule(timetable=WEEKLY, assets=DATASET),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["brev", "tao", "example"],
    user_defined_filters={"run_slug": run_slug},
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2)},
    params={
        "bucket": Param(BUCKET, type="string", minLength=3, description="S3 bucket of the dataset and the results."),
        "dataset_prefix": Param(
            DATASET_PREFIX,
            type="string",
            pattern=r"^[^/].*/$",
            description="Key prefix of the Visual ChangeNet dataset in the bucket, ending in '/'.",
        ),
        "gpu": Param(
            "L40S:1",
            type="string",
            minLength=1,
            description="GPU of the Brev instance, NAME[:COUNT] (e.g. L40S:1), resolved through `brev search`.",
        ),
        "num_epochs": Param(3, type="integer", minimum=1, description="Training epochs."),
        "gate_metric": Param(
            "test_acc",
            type="string",
            enum=["test_acc", "defect_acc", "test_fpr", "test_fnr"],
            description="Evaluation KPI the promotion gate compares with the threshold.",
        ),
        "gate_direction": Param(
            "higher",
            type="string",
            enum=["higher", "lower"],  # explicit: never inferred from the metric's name
            description="'higher': promote when the KPI is at least the threshold (accuracies); "
            "'lower': at most the threshold (error rates).",
        ),
        "gate_threshold": Param(0.8, type="number", description="The KPI value the gate compares with."),
        "reuse_key": Param(
            REUSE_KEY,
            type=["null", "string"],
            description="Warm reuse: start the instance an earlier run stopped under this key (its images and "
            "synced dataset kept) instead of creating one. Empty (null): a fresh instance every run.",
        ),
        "max_idle_hours": Param(
            MAX_IDLE_HOURS,
            type="number",
            exclusiveMinimum=0,
            description="With reuse_key: how long a stopped instance may wait for the next run before the janitor "
            "deletes it; also the idle time the stop-or-delete break-even prices when the next run is further away.",
        ),
        "release": Param(
            "stop",
            type="string",
            enum=["stop", "delete"],
            description="How the teardown ends the instance: 'stop' keeps it for the next run under reuse_key when "
            "its type can stop and the break-even favours it (its disk over max_idle_hours costs less than the "
            "GPU time of the cold start it saves; else it is deleted, logged with both numbers); 'delete' always "
            "ends it.",
        ),
    },
) as dag:
    # [START howto_tao_retrain]
    preflight = BrevPreflightOperator(
        task_id="preflight",
        s3_inputs=[DATASET_URI],
        image=TRAIN_IMAGE,
        retries=0,
    )

    create = BrevCreateInstanceOperator(
        task_id="create_instance",
        gpu="{{ params.gpu }}",
        reuse_key="{{ params.reuse_key }}",
        max_idle="{{ params.max_idle_hours * 3600 }}",
        require_docker=True,
        deferrable=True,
        ready_timeout=1800,
        max_lifetime=timedelta(hours=12),
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
        task_id="gap_analysis",
        image=DATA_SERVICES_IMAGE,
        spec=GAP_SPEC,
        inputs={DATASET_URI: DATA_DIR},
        outputs={GAP_DIR: RUN_URI + "gap_analysis/"},
        **common,
    )
    train = VisualChangeNetTrainOperator(
        task_id="train",
        image=TRAIN_IMAGE,
        spec=TRAIN_SPEC,
        overrides={"train.num_epochs": "{{ params.num_epochs }}"},
        inputs={DATASET_URI: DATA_DIR},
        outputs={TRAIN_DIR: RUN_URI + "train/"},  # checkpoints uploaded as written: a lost instance resumes
        **common,
    )
    evaluate = VisualChangeNetEvaluateOperator(
        task_id="evaluate",
        image=TRAIN_IMAGE,
        spec=EVALUATE_SPEC,
        inputs={DATASET_URI: DATA_DIR, RUN_URI + "train/": TRAIN_DIR},  # the checkpoint, on a re-created instance too
        outputs={EVALUATE_DIR: RUN_URI + "evaluate/"},
        **common,
    )

    @task(outlets=[PROMOTED_MODEL], multiple_outputs=False)  # the decision is one XCom value
    def promote(evaluation: dict, gap: dict, training: dict, params=None, outlet_events=None) -> dict:
        """Metrics gate with an explicit direction; emits the "model promoted" asset event only when it passes,
        naming the checkpoint in S3 and where each step's outputs are."""
        metric, direction = params["gate_metric"], params["gate_direction"]  # validated by their Params
        threshold = float(params["gate_threshold"])
        value = float(evaluation["kpis"][metric])
        passed = value >= threshold if direction == "higher" else value <= threshold
        decision = {
            "metric": metric,
            "value": value,
            "direction": direction,
            "threshold": threshold,
            "promoted": passed,
            "model": training["outputs"][TRAIN_DIR] + training["checkpoints"][-1],
            "results": {
                step: result["outputs"][directory]
                for step, result, directory in (
                    ("gap_analysis", gap, GAP_DIR),
                    ("train", training, TRAIN_DIR),
                    ("evaluate", evaluation, EVALUATE_DIR),
                )
            },
            "gap_threshold": gap.get("kpis", {}).get("threshold"),
        }
        if not passed:
            raise AirflowSkipException(f"Not promoted: {metric}={value} is not {direction} than {threshold}.")
        outlet_events[PROMOTED_MODEL].extra = decision
        return decision

    delete = BrevDeleteInstanceOperator(
        task_id="delete_instance", instance_name=create.output, release="{{ params.release }}"
    )

    preflight >> create >> gap_analysis >> train >> evaluate
    promote(evaluate.output, gap_analysis.output, train.output)
    [gap_analysis, train, evaluate] >> delete.as_teardown(setups=create)
    delete >> cost_report()
    # [END howto_tao_retrain]


try:  # the test suite's runner (tests/system/system_tests.py); elsewhere this is a plain DAG file
    from system.system_tests import get_test_run
except ImportError:
    pass
else:
    test_run = get_test_run(dag)
