"""DAGs of the Lepton step tests (tests/integration/test_lepton_*.py), run against the fake Lepton workspace."""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG

from airflow_provider_brev.operators.lepton import LeptonJobOperator

IMAGE = "docker.io/library/ubuntu:22.04"
#: What every step of these cases has unless it says otherwise: a CPU shape, fast polls, no S3 data.
STEP: dict[str, Any] = {"resource_shape": "cpu.small", "image": IMAGE, "poll_interval": 0.2, "aws_conn_id": None}
#: A DAG id and ``deferrable`` for the worker's and the triggerer's follow.
BOTH_WAYS = (("", False), ("_deferred", True))


def step(task_id: str = "job", **kwargs: Any) -> LeptonJobOperator:
    """A command step of these cases (:data:`STEP`, then ``kwargs``)."""
    return LeptonJobOperator(task_id=task_id, **{**STEP, **kwargs})


COMMAND = (
    "set -e; cat data/hello.txt; mkdir -p results; "
    'echo "secret is $API_SECRET"; wc -c < data/hello.txt > results/count.txt; '
    "echo epoch done > results/log.txt; echo finished"
)
DATA = {
    "inputs": {"s3://{{ params.bucket }}/lepton/in/": "data"},
    "outputs": {"results": "s3://{{ params.bucket }}/lepton/out/{{ run_id }}/"},
    "aws_conn_id": "aws_default",
}

for suffix, deferrable in BOTH_WAYS:
    with DAG(f"lepton_command{suffix}", schedule=None, catchup=False, params={"bucket": "b"}) as dag:
        step(command=COMMAND, secret_env={"API_SECRET": "s3cr3t-value-123"}, deferrable=deferrable, **DATA)

with DAG("lepton_queue_limit", schedule=None, catchup=False) as dag:
    step(resource_shape="gpu.8xh100-sxm", command="echo never", queue_timeout=1.0)

with DAG("lepton_fails", schedule=None, catchup=False) as dag:
    step(command="echo about to fail; exit 3")

#: A job that says it started, then waits (bounded: 60 s) until the test opens the ``gate`` file in its directory.
GATED = "echo started; for i in $(seq 1 1200); do [ -e gate ] && break; sleep 0.05; done; echo job-done"

with DAG("lepton_gated", schedule=None, catchup=False) as dag:
    step(resource_shape="gpu.1xh100-sxm", command=GATED, retries=0)

#: Prints a multi-line secret (a PEM key), a plain line, then one line of the key again (the job's last line).
PRINTS_SECRET = 'printf "%s\\n" "$PEM"; echo "plain output stays"; printf "%s\\n" "$PEM" | sed -n 2p'

for suffix, deferrable in BOTH_WAYS:
    with DAG(f"lepton_secret_multiline{suffix}", schedule=None, catchup=False, params={"pem": ""}) as dag:
        step(command=PRINTS_SECRET, secret_env={"PEM": "{{ params.pem }}"}, deferrable=deferrable)

with DAG("lepton_ttl_too_short", schedule=None, catchup=False) as dag:
    # Lepton would remove the ended job (and its log) before the step read how it ended: refused up front.
    step(command="echo never submitted", ttl_seconds_after_finished=0, retries=1, poll_interval=5.0)

with DAG(
    "lepton_connections",
    schedule=None,
    catchup=False,
    params={"conn": "lepton_default"},
    default_args={"brev_conn_id": "brev_default"},  # a mixed DAG's defaults: Brev's connection is no Lepton argument
) as dag:
    # A Lepton step's connection is its own: templated, and mappable.
    step("templated", lepton_conn_id="{{ params.conn }}", command="echo templated")
    LeptonJobOperator.partial(task_id="mapped", command="echo mapped", **STEP).expand(
        lepton_conn_id=["lepton_default", "lepton_other"]
    )

#: A progress bar (``\r`` updates of one line), then a second of work.
PROGRESS = "printf 'step 1/3 33%%\\rstep 2/3 66%%\\rstep 3/3 100%%\\n'; sleep 1; echo trained"

for suffix, deferrable in BOTH_WAYS:
    with DAG(f"lepton_logs_and_cost{suffix}", schedule=None, catchup=False, params={"price": "0.5"}) as dag:
        step("priced", shape_prices={"cpu.small": "{{ params.price }}"}, command=PROGRESS, deferrable=deferrable)
        # no price of its own: the connection's extra shape_prices
        step("from_connection", resource_shape="gpu.1xh100-sxm", command="echo on a GPU", deferrable=deferrable)
