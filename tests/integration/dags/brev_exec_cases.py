"""DAGs exercised by tests/integration/test_exec_dags.py against the Brev simulator."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)

START = datetime(2026, 1, 1)
LINES = 'for i in $(seq 1 10000); do echo "line $i"; done'

for deferrable in (False, True):
    with DAG(
        dag_id=f"brev_exec_{'deferrable' if deferrable else 'sync'}",
        schedule=None,
        start_date=START,
        params={"command": LINES, "detach": True},
    ):
        create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
        run = BrevExecOperator(
            task_id="run",
            instance_name=create.output,
            command="{{ params.command }}",
            env={"GREETING": "hello"},
            deferrable=deferrable,
            poll_interval=0.2,
        )
        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
        create >> run >> delete.as_teardown(setups=create)


with DAG(dag_id="brev_exec_foreground", schedule=None, start_date=START, params={"command": "echo hi"}):
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    run = BrevExecOperator(task_id="run", instance_name=create.output, command="{{ params.command }}", detach=False)
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> run >> delete.as_teardown(setups=create)


with DAG(dag_id="brev_exec_secret", schedule=None, start_date=START, params={"secret": "", "deferrable": False}):
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    run = BrevExecOperator(
        task_id="run",
        instance_name=create.output,
        command='test -n "$API_SECRET" && printf %s "$API_SECRET" | sha256sum > secret.sha256 && echo ok',
        secret_env={"API_SECRET": "{{ params.secret }}"},
        poll_interval=0.2,
    )
    run_fg = BrevExecOperator(
        task_id="run_foreground",
        instance_name=create.output,
        command='printf %s "$API_SECRET" | sha256sum > secret_fg.sha256',
        secret_env={"API_SECRET": "{{ params.secret }}"},
        detach=False,
    )
    run_deferred = BrevExecOperator(
        task_id="run_deferred",
        instance_name=create.output,
        command='printf %s "$API_SECRET" | sha256sum > secret_deferred.sha256',
        secret_env={"API_SECRET": "{{ params.secret }}"},
        deferrable=True,
        poll_interval=0.2,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> run >> run_fg >> run_deferred >> delete.as_teardown(setups=create)


with DAG(
    dag_id="brev_exec_resume",
    schedule=None,
    start_date=START,
    params={"command": "echo x"},
):
    # The test SIGKILLs the process running `run` mid-job, then re-runs the same DAG run: the retry must
    # re-attach to the still-running job instead of launching it again.
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    run = BrevExecOperator(
        task_id="run",
        instance_name=create.output,
        command="{{ params.command }}",
        poll_interval=0.2,
        retries=2,
        retry_delay=timedelta(seconds=0),
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> run >> delete.as_teardown(setups=create)


with DAG(
    dag_id="brev_exec_ephemeral",
    schedule=None,
    start_date=START,
    params={"command": "echo done", "timeout": 120, "deferrable": False},
):
    BrevExecOperator(
        task_id="run",
        gpu="L40S:1",
        command="{{ params.command }}",
        timeout=120,
        poll_interval=0.2,
        ready_timeout=60,
    )

with DAG(dag_id="brev_exec_ephemeral_timeout", schedule=None, start_date=START):
    BrevExecOperator(task_id="run", gpu="L40S:1", command="sleep 300", timeout=3, poll_interval=0.2, ready_timeout=60)

with DAG(dag_id="brev_exec_ephemeral_deferrable", schedule=None, start_date=START):
    BrevExecOperator(
        task_id="run",
        gpu="L40S:1",
        command="echo deferred-ephemeral",
        deferrable=True,
        poll_interval=0.2,
        ready_timeout=60,
    )


with DAG(
    dag_id="brev_exec_bad_input",
    schedule=None,
    start_date=START,
    params={"command": "echo x", "instance_name": "", "gpu": ""},
):
    BrevExecOperator(
        task_id="run",
        instance_name="{{ params.instance_name }}",
        gpu="{{ params.gpu }}",
        command="{{ params.command }}",
    )


#: Log chunk size of ``brev_exec_retry_reattach``'s job polls: ``__BJ_MAX=23456`` occurs only in those polls (not in
#: the launch, nor in the 1-byte probe with which a retry looks for an earlier try's job), so a test can aim a
#: ``connection_drop`` fault at them.
RETRY_REATTACH_CHUNK_BYTES = 23456

with DAG(dag_id="brev_exec_retry_reattach", schedule=None, start_date=START, params={"command": "echo x"}):
    # Try 1 loses the connection for good (two failed polls in a row, max_poll_failures=1) while its job keeps running on the instance;
    # try 2 must find that job (task state store / deterministic job id of try 1) and re-attach to it.
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    run = BrevExecOperator(
        task_id="run",
        instance_name=create.output,
        command="{{ params.command }}",
        poll_interval=0.2,
        log_chunk_bytes=RETRY_REATTACH_CHUNK_BYTES,
        max_poll_failures=1,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> run >> delete.as_teardown(setups=create)


with DAG(dag_id="brev_exec_secret_printed", schedule=None, start_date=START, params={"secret": ""}):
    # Commands that PRINT a secret (a debugging `env`, a library echoing its config): the output leaves the
    # instance redacted, in every mode.
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    printed = {
        "command": 'echo "key=$API_SECRET"',
        "secret_env": {"API_SECRET": "{{ params.secret }}"},
        "instance_name": create.output,
    }
    detached = BrevExecOperator(task_id="detached", poll_interval=0.2, **printed)  # type: ignore[arg-type]
    foreground = BrevExecOperator(task_id="foreground", detach=False, **printed)  # type: ignore[arg-type]
    deferred = BrevExecOperator(task_id="deferred", deferrable=True, poll_interval=0.2, **printed)  # type: ignore[arg-type]
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> detached >> foreground >> deferred >> delete.as_teardown(setups=create)


with DAG(dag_id="brev_exec_secret_multiline", schedule=None, start_date=START, params={"pem": "", "credential": ""}):
    # Multi-line secrets (a PEM key, a pretty-printed JSON credential) printed by the command, in every mode, on
    # success (the last line is one of the key's lines) and on failure (the error message quotes the last line).
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    prints = (
        'printf "%s\\n" "$PEM"; printf "%s\\n" "$CREDENTIAL"; echo "plain output stays"; '
        'printf "%s\\n" "$PEM" | sed -n 2p'
    )
    multiline = {
        "secret_env": {"PEM": "{{ params.pem }}", "CREDENTIAL": "{{ params.credential }}"},
        "instance_name": create.output,
        "poll_interval": 0.2,
    }
    steps = [
        BrevExecOperator(task_id="detached", command=prints, **multiline),  # type: ignore[arg-type]
        BrevExecOperator(task_id="foreground", command=prints, detach=False, **multiline),  # type: ignore[arg-type]
        BrevExecOperator(task_id="deferred", command=prints, deferrable=True, **multiline),  # type: ignore[arg-type]
        BrevExecOperator(task_id="detached_fails", command=prints + "; exit 3", **multiline),  # type: ignore[arg-type]
        BrevExecOperator(
            task_id="foreground_fails",
            command=prints + "; exit 3",
            detach=False,
            **multiline,  # type: ignore[arg-type]
        ),
    ]
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> steps >> delete.as_teardown(setups=create)
