"""Machinery shared by the chaos suite.

* :func:`assert_chaos_invariants` -- the post-conditions every chaos case must meet, whatever the fault:
  no instance left (after the teardown, or after the janitor where no teardown can run), the job command
  started exactly once per try, no Brev token or ``secret_env`` value in any CLI argv / ssh command / remote
  command / task log / leftover remote file, and a failed run whose log names the cause.
* :func:`run_like_triggerer` -- drives a trigger the way Airflow 3.3's ``TriggerRunner.run_trigger`` does:
  ``run()`` in a task; a user action cancels it with a message and then awaits ``on_kill()``; a triggerer
  shutdown cancels it without one; ``cleanup()`` runs on every exit.

No ``time.sleep`` is used for synchronisation: every wait is a bounded polling loop on an observable condition.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import time
from typing import TYPE_CHECKING, Any

from helpers import cli_calls, run_state, task_states

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path

#: ``airflow.jobs.triggerer_job_runner._USER_ACTION_CANCEL_MSG``: the cancel message of a user kill
#: (mark failed / mark success / clear). Copied, not imported: the triggerer module is heavy and private.
USER_ACTION_CANCEL_MSG = "__airflow_user_action__"
#: ``[triggerer] on_kill_timeout`` default.
ON_KILL_TIMEOUT = 30.0
#: Log chunk size of the chaos jobs' polls (``CHUNK_BYTES`` in tests/integration/dags/brev_chaos_cases.py) ...
POLL_BYTES = 12345
#: ... so this string only occurs in those polls: not in a launch, kill or cleanup, nor in a re-attach probe.
POLL_MARKER = f"__BJ_MAX={POLL_BYTES}\n"


# ------------------------------------------------------------------------------------------------ waiting
def wait_until(
    predicate: Callable[[], Any],
    *,
    timeout: float = 30.0,
    what: str | Callable[[], str] = "condition",
    interval: float = 0.05,
) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); fail after ``timeout`` seconds.

    ``what`` describes the condition; a callable is evaluated only on failure (e.g. a log tail).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what() if callable(what) else what}")
        time.sleep(interval)


async def await_until(
    predicate: Callable[[], Any], *, timeout: float = 30.0, what: str = "condition", interval: float = 0.05
) -> Any:
    """:func:`wait_until` for coroutines (yields to the event loop between checks)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(interval)


# ---------------------------------------------------------------------------------------- the simulator
def created_names(sim) -> list[str]:
    """Instance names passed to ``brev create`` (in order, without repeats)."""
    names: list[str] = []
    for call in cli_calls(sim, "create"):
        name = call["argv"][1]
        if name not in names:
            names.append(name)
    return names


def counter_files(sim) -> list[Path]:
    """Every ``counter`` file a chaos job wrote, in any sandbox of this simulator (deleted instances too)."""
    return sorted(sim.root.glob("instances/*/home/counter"))


def started_counter(sim) -> Path | None:
    """The first ``counter`` file, once a chaos job has started."""
    files = counter_files(sim)
    return files[0] if files else None


def counter_lines(sim, name: str) -> list[str]:
    path = sim.sandbox(name) / "counter"
    return path.read_text().splitlines() if path.exists() else []


def job_polls(sim) -> list[dict]:
    """Finished ``brev exec`` calls that polled a chaos job (launch, kill and cleanup excluded)."""
    return [call for call in cli_calls(sim, "exec") if POLL_MARKER in call["argv"][-1]]


def connection_token() -> str:
    """The token of the ``brev_default`` connection the run used (set by the ``run_dag`` fixture or the test)."""
    return json.loads(os.environ["AIRFLOW_CONN_BREV_DEFAULT"])["password"]


def chaos_conf(command: str, secret: str) -> dict[str, str]:
    """``run_conf`` of the chaos DAGs: what the job runs after its counter/secret preamble, and its secret."""
    return {"command": command, "secret": secret}


# ------------------------------------------------------------------------------------------ the invariants
def _is_login(call: dict) -> bool:
    return next((a for a in call["argv"] if not a.startswith("-")), None) == "login"


def _leaked_into_files(root: Path, values: Iterable[str]) -> list[str]:
    found = []
    for path in root.glob("instances/*/home/**/*"):
        if not path.is_file() or path.is_symlink():
            continue
        with contextlib.suppress(OSError):
            text = path.read_text(errors="ignore")
            found += [f"{path}: {value[:6]}..." for value in values if value in text]
    return found


def assert_chaos_invariants(
    sim,
    task_logs,
    *,
    secrets: Sequence[str],
    counters: dict[str, list[str]] | list[str] | None,
    dag_run: Any = None,
    failure: Sequence[str] | None = None,
    janitor: Callable[[], Any] | None = None,
    also_logs: Sequence[str] = (),
    instance_timeout: float = 30.0,
) -> None:
    """The post-conditions of every chaos case.

    :param secrets: ``secret_env`` values the run used (the connection's token is checked as well).
    :param counters: expected ``counter`` lines per instance (``["try-1"]`` = started once, by try 1); a plain
        list means "the one instance this run created". ``None``: no job was expected to start.
        In every sandbox, no line may appear twice (no try started its command twice).
    :param dag_run: the ``dag.test()`` result (omit for trigger-level cases).
    :param failure: ``None``: the run must succeed, every task included. Otherwise the run must fail and one
        log line must contain every one of these strings (the error names its cause).
    :param janitor: for cases where no teardown can run (a SIGKILLed worker): run the janitor (returns its
        DagRun, which must succeed) before checking that nothing is left.
    :param also_logs: other log texts that must not hold a secret either (a child worker's output).
    """
    # 1. the run's outcome, and a failure that names its cause
    if dag_run is not None:
        states = task_states(dag_run)
        if failure is None:
            assert run_state(dag_run) == "success", states
            assert set(states.values()) == {"success"}, states
        else:
            assert run_state(dag_run) == "failed", states
    if failure is not None:
        assert any(all(part in line for part in failure) for line in task_logs.lines), (
            f"no log line names the cause {failure!r}"
        )

    # 2. nothing left once the teardown (or the janitor) ran; deletion is asynchronous (DELETING, then gone)
    if janitor is not None:
        sweep = janitor()
        assert run_state(sweep) == "success", task_states(sweep)
    wait_until(
        lambda: not sim.instances(),
        timeout=instance_timeout,
        what=f"no instance left, still: {[(i['name'], i['status']) for i in sim.instances()]}",
    )

    # 3. the job command started exactly once per try
    for path in counter_files(sim):
        lines = path.read_text().splitlines()
        assert len(lines) == len(set(lines)), f"a try started its command twice: {path}: {lines}"
    if counters is not None:
        if isinstance(counters, list):
            names = created_names(sim)
            assert len(names) == 1, f"expected one created instance, got {names}"
            counters = {names[0]: counters}
        for name, expected in counters.items():
            assert counter_lines(sim, name) == expected, f"job starts on {name}"
    else:
        assert counter_files(sim) == [], "no job was expected to start"

    # 4. no secret anywhere: CLI argv (and the ssh command line the CLI builds), remote commands, logs, files
    assert secrets, "a chaos case must use a secret"
    assert all(len(secret) >= 8 for secret in secrets), secrets
    tokens = {connection_token()}
    tokens |= {
        call["argv"][call["argv"].index("--token") + 1] for call in sim.calls("login") if "--token" in call["argv"]
    }
    # Each place first holds something (no vacuous "not in"), then no secret.
    calls = sim.calls()
    assert cli_calls(sim, "create"), "the run created nothing: nothing to check for secrets"
    for call in calls:
        blob = json.dumps(call)
        for secret in secrets:
            assert secret not in blob, f"secret_env value on a command line: {call['argv'][:2]}"
        if not _is_login(call):  # `brev login --token` is the one command line that must carry the token
            for token in tokens:
                assert token not in blob, f"Brev token on a command line: {call['argv'][:2]}"
    runs = sim.runs()
    assert runs or counters is None, "a job was expected, yet no command ran on an instance"
    for run in runs:
        blob = json.dumps(run)
        for value in (*secrets, *tokens):
            assert value not in blob, "a secret in a command run on an instance"
    for text in (task_logs.text, *also_logs):
        assert text.strip(), "an empty log proves nothing"
        for value in (*secrets, *tokens):
            assert value not in text, "a secret in the task logs"
    assert _leaked_into_files(sim.root, (*secrets, *tokens)) == []


# ------------------------------------------------------------------------------------------ the triggerer
async def run_like_triggerer(trigger, events: list, on_kill_errors: list | None = None) -> None:
    """One trigger as Airflow 3.3's ``TriggerRunner.run_trigger`` runs it (without spans, DB and timeouts).

    Cancelled with :data:`USER_ACTION_CANCEL_MSG` (a user marked the task failed/success or cleared it), it
    awaits ``trigger.on_kill()`` after the cancellation reached ``run()``; cancelled without it (triggerer
    shutdown/restart) it does not. ``cleanup()`` runs on every exit, as in Airflow.
    """
    try:
        async for event in trigger.run():
            events.append(event)
    except asyncio.CancelledError as err:
        if err.args and err.args[0] == USER_ACTION_CANCEL_MSG:
            try:
                await asyncio.wait_for(trigger.on_kill(), timeout=ON_KILL_TIMEOUT)
            except Exception as kill_error:  # Airflow logs and swallows it
                if on_kill_errors is not None:
                    on_kill_errors.append(kill_error)
        raise
    finally:
        with contextlib.suppress(Exception):
            await trigger.cleanup()


async def cancel_and_wait(task: asyncio.Task, msg: str | None = None) -> None:
    """Cancel the task running a trigger (with the user-action message or none) and wait until it is done."""
    task.cancel(msg)
    with contextlib.suppress(asyncio.CancelledError):
        await task


def trigger_from_serialized(serialized: tuple[str, dict[str, Any]]):
    """Rebuild a trigger from ``serialize()`` as another triggerer process does (classpath + kwargs)."""
    classpath, kwargs = serialized
    module, _, name = classpath.rpartition(".")
    trigger_class = getattr(importlib.import_module(module), name)
    return trigger_class(**json.loads(json.dumps(kwargs)))  # through JSON, like the trigger table's column
