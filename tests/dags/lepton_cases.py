"""DAGs of the Lepton step tests (tests/integration/test_lepton_steps.py), run against the fake Lepton workspace."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_provider_brev.operators.lepton import LeptonJobOperator

IMAGE = "docker.io/library/ubuntu:22.04"
COMMAND = (
    "set -e; cat data/hello.txt; mkdir -p results; "
    'echo "secret is $API_SECRET"; wc -c < data/hello.txt > results/count.txt; '
    "echo epoch done > results/log.txt; echo finished"
)
DATA = {
    "inputs": {"s3://{{ params.bucket }}/lepton/in/": "data"},
    "outputs": {"results": "s3://{{ params.bucket }}/lepton/out/{{ run_id }}/"},
}

for dag_id, deferrable in (("lepton_command", False), ("lepton_command_deferred", True)):
    with DAG(dag_id, schedule=None, catchup=False, params={"bucket": "b"}) as dag:
        LeptonJobOperator(
            task_id="job",
            resource_shape="cpu.small",
            image=IMAGE,
            command=COMMAND,
            secret_env={"API_SECRET": "s3cr3t-value-123"},
            poll_interval=0.2,
            deferrable=deferrable,
            **DATA,
        )

with DAG("lepton_queue_limit", schedule=None, catchup=False) as dag:
    LeptonJobOperator(
        task_id="job",
        resource_shape="gpu.8xh100-sxm",
        image=IMAGE,
        command="echo never",
        queue_timeout=1.0,
        poll_interval=0.2,
        aws_conn_id=None,
    )

with DAG("lepton_fails", schedule=None, catchup=False) as dag:
    LeptonJobOperator(
        task_id="job",
        resource_shape="cpu.small",
        image=IMAGE,
        command="echo about to fail; exit 3",
        poll_interval=0.2,
        aws_conn_id=None,
    )

#: A job that says it started, then waits (bounded: 60 s) until the test opens the ``gate`` file in its directory.
GATED = "echo started; for i in $(seq 1 1200); do [ -e gate ] && break; sleep 0.05; done; echo job-done"

with DAG("lepton_gated", schedule=None, catchup=False) as dag:
    LeptonJobOperator(
        task_id="job",
        resource_shape="gpu.1xh100-sxm",
        image=IMAGE,
        command=GATED,
        poll_interval=0.2,
        aws_conn_id=None,
        retries=0,
    )

#: Prints a multi-line secret (a PEM key), a plain line, then one line of the key again (the job's last line).
PRINTS_SECRET = 'printf "%s\\n" "$PEM"; echo "plain output stays"; printf "%s\\n" "$PEM" | sed -n 2p'

for dag_id, deferrable in (("lepton_secret_multiline", False), ("lepton_secret_multiline_deferred", True)):
    with DAG(dag_id, schedule=None, catchup=False, params={"pem": ""}) as dag:
        LeptonJobOperator(
            task_id="job",
            resource_shape="cpu.small",
            image=IMAGE,
            command=PRINTS_SECRET,
            secret_env={"PEM": "{{ params.pem }}"},
            poll_interval=0.2,
            deferrable=deferrable,
            aws_conn_id=None,
        )

with DAG("lepton_ttl_too_short", schedule=None, catchup=False) as dag:
    # Lepton would remove the ended job (and its log) before the step read how it ended: refused up front.
    LeptonJobOperator(
        task_id="job",
        resource_shape="cpu.small",
        image=IMAGE,
        command="echo never submitted",
        ttl_seconds_after_finished=0,
        retries=1,
        aws_conn_id=None,
    )

with DAG(
    "lepton_connections",
    schedule=None,
    catchup=False,
    params={"conn": "lepton_default"},
    default_args={"brev_conn_id": "brev_default"},  # a mixed DAG's defaults: Brev's connection is no Lepton argument
) as dag:
    # A Lepton step's connection is its own: templated, and mappable.
    LeptonJobOperator(
        task_id="templated",
        lepton_conn_id="{{ params.conn }}",
        resource_shape="cpu.small",
        image=IMAGE,
        command="echo templated",
        poll_interval=0.2,
        aws_conn_id=None,
    )
    LeptonJobOperator.partial(
        task_id="mapped",
        resource_shape="cpu.small",
        image=IMAGE,
        command="echo mapped",
        poll_interval=0.2,
        aws_conn_id=None,
    ).expand(lepton_conn_id=["lepton_default", "lepton_other"])

#: A progress bar (``\r`` updates of one line), then a second of work.
PROGRESS = "printf 'step 1/3 33%%\\rstep 2/3 66%%\\rstep 3/3 100%%\\n'; sleep 1; echo trained"

for dag_id, deferrable in (("lepton_logs_and_cost", False), ("lepton_logs_and_cost_deferred", True)):
    with DAG(dag_id, schedule=None, catchup=False, params={"price": "0.5"}) as dag:
        LeptonJobOperator(
            task_id="priced",
            resource_shape="cpu.small",
            shape_prices={"cpu.small": "{{ params.price }}"},
            image=IMAGE,
            command=PROGRESS,
            poll_interval=0.2,
            deferrable=deferrable,
            aws_conn_id=None,
        )
        LeptonJobOperator(  # no price of its own: the connection's extra shape_prices
            task_id="from_connection",
            resource_shape="gpu.1xh100-sxm",
            image=IMAGE,
            command="echo on a GPU",
            poll_interval=0.2,
            deferrable=deferrable,
            aws_conn_id=None,
        )
