"""DAGs exercised by tests/integration/test_transfers.py against the Brev simulator and a moto S3 server.

Knobs come from ``params`` (``dag.test(run_conf=...)``); templates render as native objects so lists and
booleans reach the operators as such.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.transfers import BrevToS3Operator, S3ToBrevOperator

START = datetime(2026, 1, 1)
MIB = 1024 * 1024

with DAG(
    dag_id="brev_transfer_round_trip",
    schedule=None,
    start_date=START,
    render_template_as_native_obj=True,
    params={
        "bucket": "",
        "in_prefix": "incoming/",
        "out_prefix": "results/",
        "remote_dir": "data/in",
        "include": None,
        "exclude": ["*.tmp"],
        "upload_exclude": ["*.log"],
        "overwrite": False,
        "expected": {},
    },
):
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    download = S3ToBrevOperator(
        task_id="download",
        instance_name=create.output,
        s3_bucket="{{ params.bucket }}",
        s3_prefix="{{ params.in_prefix }}",
        remote_dir="{{ params.remote_dir }}",
        include="{{ params.include }}",
        exclude="{{ params.exclude }}",
        concurrency=2,
        curl_retries=0,
    )

    @task
    def check_and_modify(instance_name: str, params=None, run_id=None) -> None:
        """Check every file's md5 on the instance independently of the operator, then add results."""
        import shlex

        from airflow_provider_brev.hooks.brev import BrevHook

        hook = BrevHook()
        where = shlex.quote(params["remote_dir"])
        listed = hook.run_command(instance_name, f"cd {where} && find . -type f -exec md5sum {{}} +", log_output=False)
        if listed.exit_code:
            raise RuntimeError(f"listing failed with exit code {listed.exit_code}")
        found = {}
        for line in listed.output.splitlines():
            digest, _, path = line.partition("  ")
            found[path.removeprefix("./")] = digest
        if found != params["expected"]:
            raise RuntimeError(f"files on the instance differ from S3: {found} != {params['expected']}")
        made = hook.run_command(
            instance_name,
            f"cd {where} && mkdir -p generated && printf '%s\\n' {shlex.quote(run_id)} > generated/result.txt"
            " && echo noise > debug.log",
        )
        if made.exit_code:
            raise RuntimeError(f"writing results failed with exit code {made.exit_code}")

    upload = BrevToS3Operator(
        task_id="upload",
        instance_name=create.output,
        remote_dir="{{ params.remote_dir }}",
        s3_bucket="{{ params.bucket }}",
        s3_prefix="{{ params.out_prefix }}",
        exclude="{{ params.upload_exclude }}",
        overwrite="{{ params.overwrite }}",  # type: ignore[arg-type]
        multipart_threshold=5 * MIB,
        part_size=5 * MIB,
        concurrency=3,
        curl_retries=0,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    checked = check_and_modify(create.output)
    download >> checked >> upload >> delete.as_teardown(setups=create)


with DAG(
    dag_id="brev_transfer_download_only",
    schedule=None,
    start_date=START,
    render_template_as_native_obj=True,
    params={"bucket": "", "in_prefix": "incoming/", "remote_dir": "data/in", "include": None},
):
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    download = S3ToBrevOperator(
        task_id="download",
        instance_name=create.output,
        s3_bucket="{{ params.bucket }}",
        s3_prefix="{{ params.in_prefix }}",
        remote_dir="{{ params.remote_dir }}",
        include="{{ params.include }}",
        max_attempts=2,
        curl_retries=0,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    download >> delete.as_teardown(setups=create)


with DAG(dag_id="brev_transfer_resaved_checkpoint", schedule=None, start_date=START, params={"bucket": ""}):
    # A 6 MiB checkpoint goes up in two parts; the test re-saves it in place between the listing and the upload.
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    save = BrevExecOperator(
        task_id="save",
        instance_name=create.output,
        command=f"mkdir -p ckpt && head -c {6 * MIB} /dev/zero | tr '\\0' A > ckpt/model.pth",
        poll_interval=0.2,
    )
    upload = BrevToS3Operator(
        task_id="upload",
        instance_name=create.output,
        remote_dir="ckpt",
        s3_bucket="{{ params.bucket }}",
        s3_prefix="ckpts/",
        multipart_threshold=5 * MIB,
        part_size=5 * MIB,
        concurrency=1,
        curl_retries=0,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> save >> upload >> delete.as_teardown(setups=create)
