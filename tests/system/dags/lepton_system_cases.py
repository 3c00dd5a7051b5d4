"""The DAG of the Lepton system test (tests/system/test_system_lepton.py): one tiny job, no S3 data."""

from __future__ import annotations

import os

from airflow.sdk import DAG

from airflow_provider_brev.operators.lepton import LeptonJobOperator

with DAG("lepton_system_job", schedule=None, catchup=False, params={"marker": "lepton-marker"}) as dag:
    LeptonJobOperator(
        task_id="run",
        lepton_conn_id=os.environ.get("LEPTON_SYSTEM_CONN_ID", "lepton_default"),
        resource_shape=os.environ.get("LEPTON_SYSTEM_SHAPE", "cpu.small"),
        node_groups=[g for g in os.environ.get("LEPTON_SYSTEM_NODE_GROUP", "").split(",") if g] or None,
        image=os.environ.get("LEPTON_SYSTEM_IMAGE", "docker.io/library/ubuntu:22.04"),
        command='echo "hello from a Lepton job"; uname -m; echo {{ params.marker }}',
        aws_conn_id=None,
        timeout=int(os.environ.get("LEPTON_SYSTEM_TIMEOUT", "900")),
        queue_timeout=600,
        poll_interval=2.0,
        retries=0,
    )
