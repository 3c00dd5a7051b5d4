"""The seed's mixed-platform workflow: CPU stages on Brev, the GPU training stage on DGX Cloud Lepton, one DAG.

    gap analysis (a small Brev instance) → train (Lepton job, 8x H100) → evaluate (a Brev GPU instance)
                                                                        → checksums (Lepton job, a CPU shape)

Each stage says where it runs -- ``{"skill": "vcn-gap-analysis", "platform": "brev"}``, ``{"skill":
"visual-changenet", "action": "train", "platform": "lepton"}`` -- and hands its data to the next through S3: every step
declares ``inputs`` (S3 prefix -> directory) and ``outputs`` (directory -> the run's own S3 prefix), on Brev and on
Lepton alike. ``checksums`` is a plain command as a Lepton job (``LeptonJobOperator``): it publishes the SHA-256 sums
of the trained checkpoints beside them, on a CPU shape, while evaluate runs. Every resource is released whatever happens: the Brev steps run on ephemeral instances they create and
delete (success, failure, timeout, kill), the Lepton step's job ends or is stopped (kill, ``timeout``, a queue wait
past ``queue_timeout``) and its plan's secret is deleted. The Lepton job gets no AWS key: it downloads and uploads with
presigned requests the worker makes.

The seed runs gap analysis as a cheap CPU stage; the data-services image of TAO 6.26+ needs a CUDA GPU for it, so
this example gives it the cheapest GPU instance (``gap_gpu``, a T4) and keeps the 8x H100 for training only.

Configuration: connections ``brev_default`` (Brev token), ``lepton_default`` (workspace id in the login, workspace
token in the password), ``aws_default`` (S3), ``ngc_default`` (NGC key, for the Brev steps' nvcr.io images); the
Lepton workspace needs a registry secret for nvcr.io (``image_pull_secret``). ``make airflow`` serves it against the
Brev simulator, the fake Lepton workspace and local S3. Install ``airflow-provider-brev[lepton]``.
"""

from __future__ import annotations

import os
from datetime import timedelta

from airflow.sdk import DAG, Param

from airflow_provider_brev.operators.lepton import LeptonJobOperator, LeptonVisualChangeNetTrainOperator
from airflow_provider_brev.operators.tao import VisualChangeNetEvaluateOperator, VisualChangeNetGapAnalysisOperator
from airflow_provider_brev.utils.cost import cost_report
from airflow_provider_brev.utils.templates import run_slug

TRAIN_IMAGE = os.environ.get("TAO_PYT_IMAGE", "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt")
DATA_SERVICES_IMAGE = os.environ.get("TAO_DS_IMAGE", "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-data-services")
TOOLS_IMAGE = "docker.io/library/ubuntu:22.04"

DATASET_URI = "s3://{{ params.bucket }}/{{ params.dataset_prefix }}"
RUN_URI = "s3://{{ params.bucket }}/mixed-platform/{{ run_id | run_slug }}/"

# Brev: directories below the instance's home, mounted into the TAO container.
BREV_DATA, BREV_RESULTS = "vcn/data", "vcn/results"
BREV_DATASET = {
    "classify": {
        "train_dataset": {"csv_path": "/data/train.csv", "images_dir": "/data/images"},
        "validation_dataset": {"csv_path": "/data/val.csv", "images_dir": "/data/images"},
        "test_dataset": {"csv_path": "/data/test.csv", "images_dir": "/data/images"},
        "image_ext": ".jpg",
        "batch_size": 4,
        "workers": 2,
    }
}
# Lepton: the job's container is TAO's; its directories are below its working directory /workspace.
LEPTON_DATASET = {
    "classify": {
        split: {"csv_path": f"/workspace/data/{csv}.csv", "images_dir": "/workspace/data/images"}
        for split, csv in (("train_dataset", "train"), ("validation_dataset", "val"), ("test_dataset", "test"))
    }
    | {"image_ext": ".jpg", "batch_size": 4, "workers": 2}
}
GAP_SPEC = {
    "inference_results_dir": "/data/champion/inference",
    "train_config": "/data/champion/train_config.yaml",
    "kpi_media_path": "/data/images",
    "min_recall": 0.9,
    "top_k_per_label": 50,
}
TRAIN_SPEC = {
    "dataset": LEPTON_DATASET,
    "train": {"num_epochs": 2, "checkpoint_interval": 1, "validation_interval": 1},
}
EVALUATE_SPEC = {
    "dataset": BREV_DATASET,
    "evaluate": {"checkpoint": "/results/train/{{ ti.xcom_pull(task_ids='train')['checkpoints'][-1] }}"},
}

with DAG(
    dag_id="example_mixed_brev_lepton",
    schedule=None,
    catchup=False,
    doc_md=__doc__,
    tags=["brev", "lepton", "tao", "example"],
    user_defined_filters={"run_slug": run_slug},
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30)},
    params={
        "bucket": Param(os.environ.get("TAO_VCN_BUCKET", "tao-vcn-demo"), type="string", minLength=3),
        "dataset_prefix": Param(os.environ.get("TAO_VCN_DATASET_PREFIX", "datasets/vcn-aoi/"), type="string"),
        "gap_gpu": Param("T4:1", type="string", description="Brev GPU of gap analysis (the cheapest that runs it)."),
        "gpu": Param("L40S:1", type="string", description="Brev GPU of the evaluation instance."),
        "resource_shape": Param("gpu.8xh100-sxm", type="string", description="Lepton resource shape of training."),
        "cpu_shape": Param("cpu.small", type="string", description="Lepton resource shape of the checksums."),
        "image_pull_secret": Param("nvcr-ngc", type="string", description="Lepton registry secret for nvcr.io."),
    },
) as dag:
    # [START howto_mixed_brev_lepton]
    gap_analysis = VisualChangeNetGapAnalysisOperator(  # {"skill": "vcn-gap-analysis", "platform": "brev"}
        task_id="gap_analysis",
        gpu="{{ params.gap_gpu }}",  # an ephemeral instance, deleted when the step ends
        image=DATA_SERVICES_IMAGE,
        spec=GAP_SPEC,
        results_dir=BREV_RESULTS,
        mounts={BREV_DATA: "/data"},
        inputs={DATASET_URI: BREV_DATA},
        outputs={f"{BREV_RESULTS}/vcn_aoi": RUN_URI + "gap_analysis/"},
        timeout=3600,
    )
    train = (
        LeptonVisualChangeNetTrainOperator(  # {"skill": "visual-changenet", "action": "train", "platform": "lepton"}
            task_id="train",
            resource_shape="{{ params.resource_shape }}",
            image=TRAIN_IMAGE,
            image_pull_secrets=["{{ params.image_pull_secret }}"],
            spec=TRAIN_SPEC,
            results_dir="results",
            inputs={DATASET_URI: "data"},
            outputs={"results/train": RUN_URI + "train/"},  # checkpoints uploaded while it trains, and at the end
            queue_timeout=3600,
            timeout=6 * 3600,
            deferrable=True,
            poll_interval=2.0,
        )
    )
    evaluate = VisualChangeNetEvaluateOperator(
        task_id="evaluate",
        gpu="{{ params.gpu }}",  # an ephemeral GPU instance
        image=TRAIN_IMAGE,
        spec=EVALUATE_SPEC,
        results_dir=BREV_RESULTS,
        mounts={BREV_DATA: "/data"},
        inputs={DATASET_URI: BREV_DATA, RUN_URI + "train/": f"{BREV_RESULTS}/train"},
        outputs={f"{BREV_RESULTS}/evaluate": RUN_URI + "evaluate/"},
        timeout=3600,
    )
    checksums = LeptonJobOperator(  # a plain command as a Lepton job: no GPU, no TAO
        task_id="checksums",
        resource_shape="{{ params.cpu_shape }}",
        image=TOOLS_IMAGE,
        command="mkdir -p sums && cd checkpoints && sha256sum *.pth | tee ../sums/SHA256SUMS",
        inputs={RUN_URI + "train/": "checkpoints"},
        outputs={"sums": RUN_URI + "train-sums/"},
        queue_timeout=3600,
        timeout=1800,
        poll_interval=2.0,
    )
    gap_analysis >> train >> [evaluate, checksums] >> cost_report()  # Lepton jobs join with their estimates
    # [END howto_mixed_brev_lepton]


try:  # the test suite's runner (tests/system/system_tests.py); elsewhere this is a plain DAG file
    from system.system_tests import get_test_run
except ImportError:
    pass
else:
    test_run = get_test_run(dag)
