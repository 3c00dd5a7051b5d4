"""Visual ChangeNet from checkpoint to deployable model on NVIDIA Brev: train briefly, export to ONNX, run inference.

    create (setup) → train (the generic TaoOperator) → export (ONNX) → inference (inference.csv)
                   ↘ delete (teardown: runs even when a step fails)

One GPU instance serves the three steps. ``train`` uses the generic :class:`TaoOperator` (any TAO network and
action: here ``visual_changenet train``); ``export`` and ``inference`` use their Visual ChangeNet operators and
take the checkpoint ``train`` reported in XCom. Every step's outputs go to its own folder under the run's S3
prefix, ``s3://<bucket>/runs/<run slug>/{train,export,inference}/``: the ONNX file and ``inference.csv`` (the
scores gap analysis reads, see ``tao_visual_changenet_retrain.py``) end up next to the checkpoint they came from.

Configuration as in the flagship: connections ``brev_default``, ``aws_default`` and ``ngc_default``; the dataset
(``train.csv``, ``test.csv`` and ``images/``) under ``s3://<bucket>/<dataset_prefix>``. Manual runs only (no
schedule). The tests run it against the bundled Brev simulator and a local moto S3.
"""

from __future__ import annotations

import os
from datetime import timedelta

from airflow.sdk import DAG, Param

from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
from airflow_provider_brev.operators.tao import (
    TaoOperator,
    VisualChangeNetExportOperator,
    VisualChangeNetInferenceOperator,
)
from airflow_provider_brev.utils.cost import cost_report
from airflow_provider_brev.utils.templates import run_slug

BUCKET = os.environ.get("TAO_VCN_BUCKET", "tao-vcn-demo")
DATASET_PREFIX = os.environ.get("TAO_VCN_DATASET_PREFIX", "datasets/vcn-aoi/")
IMAGE = os.environ.get("TAO_PYT_IMAGE", "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt")

DATA_DIR, RESULTS_DIR = "vcn/data", "vcn/results"  # on the instance, relative to the remote home
MOUNTS = {DATA_DIR: "/data"}
DATASET = {
    "classify": {
        "train_dataset": {"csv_path": "/data/train.csv", "images_dir": "/data/images"},
        "validation_dataset": {"csv_path": "/data/val.csv", "images_dir": "/data/images"},
        "infer_dataset": {"csv_path": "/data/test.csv", "images_dir": "/data/images"},
        "image_ext": ".jpg",
        "batch_size": 4,
        "workers": 2,
    }
}
# The checkpoint train wrote, as the container sees it (each action writes to <results_dir>/<action>/).
CHECKPOINT = "/results/train/{{ ti.xcom_pull(task_ids='train')['checkpoints'][-1] }}"
RUN_URI = "s3://{{ params.bucket }}/runs/{{ run_id | run_slug }}/"
DATASET_URI = "s3://{{ params.bucket }}/{{ params.dataset_prefix }}"
TRAIN_DIR, EXPORT_DIR, INFERENCE_DIR = (f"{RESULTS_DIR}/{action}" for action in ("train", "export", "inference"))

with DAG(
    dag_id="tao_visual_changenet_export_inference",
    schedule=None,
    doc_md=__doc__,
    tags=["brev", "tao", "example"],
    user_defined_filters={"run_slug": run_slug},
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2)},
    params={
        "bucket": Param(BUCKET, type="string", minLength=3, description="S3 bucket of the dataset and the results."),
        "dataset_prefix": Param(
            DATASET_PREFIX, type="string", pattern=r"^[^/].*/$", description="Key prefix of the dataset, ending in '/'."
        ),
        "gpu": Param("L40S:1", type="string", minLength=1, description="GPU of the Brev instance, NAME[:COUNT]."),
    },
) as dag:
    # [START howto_tao_export_inference]
    create = BrevCreateInstanceOperator(
        task_id="create_instance",
        gpu="{{ params.gpu }}",
        require_docker=True,
        ready_timeout=1800,
        max_lifetime=timedelta(hours=4),
    )
    common = {"instance_name": create.output, "image": IMAGE, "results_dir": RESULTS_DIR, "mounts": MOUNTS}
    train = TaoOperator(
        task_id="train",
        task="visual_changenet",
        action="train",
        spec={"dataset": DATASET, "train": {"num_epochs": 1, "checkpoint_interval": 1, "validation_interval": 1}},
        inputs={DATASET_URI: DATA_DIR},
        outputs={TRAIN_DIR: RUN_URI + "train/"},
        **common,
    )
    export = VisualChangeNetExportOperator(
        task_id="export",
        spec={"dataset": DATASET, "export": {"checkpoint": CHECKPOINT, "onnx_file": "/results/export/changenet.onnx"}},
        outputs={EXPORT_DIR: RUN_URI + "export/"},
        **common,
    )
    inference = VisualChangeNetInferenceOperator(
        task_id="inference",
        spec={"dataset": DATASET, "inference": {"checkpoint": CHECKPOINT}},
        inputs={DATASET_URI: DATA_DIR},
        outputs={INFERENCE_DIR: RUN_URI + "inference/"},
        **common,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete_instance", instance_name=create.output)

    create >> train >> [export, inference]
    [export, inference] >> delete.as_teardown(setups=create)
    delete >> cost_report()
    # [END howto_tao_export_inference]


try:  # the test suite's runner (tests/system/system_tests.py); elsewhere this is a plain DAG file
    from system.system_tests import get_test_run
except ImportError:
    pass
else:
    test_run = get_test_run(dag)
