"""``brev exec``: runs commands in the instance sandbox, the released CLI's re-run on non-zero exit, dropped
connections."""

from __future__ import annotations

import contextlib
import os
import signal
import time

from airflow_provider_brev.testing.fake_brev.cmd_lifecycle import (
    names_or_error,
    poll_until_running,
    reach_instance,
    start_instance,
)
from airflow_provider_brev.testing.fake_brev.context import (
    Ctx,
    authenticate,
    find_instance,
    get_instance_by_id,
    raise_5xx,
)
from airflow_provider_brev.testing.fake_brev.flags import CliError, multierror, traced, write_fd
from airflow_provider_brev.testing.fake_brev.instance_loss import KIND as LOSS_KIND
from airflow_provider_brev.testing.fake_brev.instance_loss import lose_due_instances
from airflow_provider_brev.testing.fake_brev.ssh import (
    run_refresh,
    sandbox_env,
    ssh_check,
    wait_for_ssh,
)
from airflow_provider_brev.testing.fake_brev.ssh_agent import agent_snippet, announces_agent
from airflow_provider_brev.testing.fake_brev.store import derive, peek_fault, sandbox_dir, take_fault
from airflow_provider_brev.testing.fake_common import append_jsonl

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def run_remote(ctx: Ctx, inst: dict, alias: str, command: str, host: bool) -> int:
    """Run ``bash -c command`` in the sandbox, streaming output; returns what ssh would exit with."""
    import select
    import subprocess

    run = {"instance": inst["name"], "instance_id": inst["id"], "command": command, "ts": time.time(), "host": host}
    append_jsonl(os.path.join(ctx.root, "runs.jsonl"), {**run, "brev_pid": os.getpid()})
    st = ctx.store.read()
    drop = peek_fault(st, "connection_drop", instance=inst["name"], match=command)
    loss_armed = any(f.get("kind") == LOSS_KIND for f in st["faults"])
    home = os.path.join(sandbox_dir(ctx.root, inst["id"]), "home")
    os.makedirs(home, exist_ok=True)
    _run_before_exec(ctx, inst, command, home, host)
    proc = subprocess.Popen(
        ["bash", "-c", command],
        **_in_sandbox(ctx, inst, home, host),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    fds = {proc.stdout.fileno(): 1, proc.stderr.fileno(): 2}
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    started = checked = time.monotonic()
    nbytes = 0
    dropped = False
    try:
        while fds:
            events = poller.poll(None if drop is None and not loss_armed else 50)
            if loss_armed and time.monotonic() - checked >= 0.05:
                checked = time.monotonic()
                loss_armed = inst["id"] not in lose_due_instances(ctx.root)
            for fd, _ev in events:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    poller.unregister(fd)
                    del fds[fd]
                    continue
                nbytes += len(data)
                try:
                    if fds[fd] == 2 or not ctx.stdout_broken:
                        write_fd(fds[fd], data)
                except OSError:
                    ctx.stdout_broken = ctx.stdout_broken or fds[fd] == 1
            if drop is not None and _drop_due(drop, started, nbytes):
                if _consume_drop(ctx, inst["name"], command):
                    dropped = True
                    break
                drop = None
            if ctx.stdout_broken:
                break
    finally:
        if dropped or ctx.stdout_broken:
            _kill_group(proc)
        for stream in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
    rc = proc.wait()
    if dropped:
        ctx.err(f"Connection to {alias} closed by remote host.\n")
        return 255
    if rc < 0:
        cur = get_instance_by_id(ctx, inst["id"])
        if cur is None or derive(cur, ctx.now())["status"] != "RUNNING":
            ctx.err(f"Connection to {alias} closed by remote host.\n")
            return 255
        return 128 - rc
    return rc


def _in_sandbox(ctx: Ctx, inst: dict, home: str, host: bool) -> dict[str, Any]:
    """How a command runs on the instance: in its sandbox HOME, with its environment, stdin closed."""
    import subprocess

    return {"cwd": home, "env": sandbox_env(ctx, inst, host), "stdin": subprocess.DEVNULL}


def _run_before_exec(ctx: Ctx, inst: dict, command: str, home: str, host: bool) -> None:
    """A ``before_exec`` gate: its ``run`` snippet runs in the sandbox, to its end, right before a matching command
    (e.g. a file rewritten between a listing and the transfer round that reads it)."""
    import subprocess

    with ctx.store.txn() as st:
        gate = take_fault(st, "before_exec", instance=inst["name"], match=command)
    if gate is not None:
        snippet = ["bash", "-c", str(gate.get("run") or ":")]
        sandbox = _in_sandbox(ctx, inst, home, host)
        subprocess.run(snippet, **sandbox, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def _drop_due(drop: dict, started: float, nbytes: int) -> bool:
    if drop.get("after_bytes") is not None:
        return nbytes >= int(drop["after_bytes"])
    return time.monotonic() - started >= float(drop.get("after_seconds") or 0.0)


def _consume_drop(ctx: Ctx, name: str, command: str) -> bool:
    with ctx.store.txn() as st:
        return take_fault(st, "connection_drop", instance=name, match=command) is not None


def _kill_group(proc: Any) -> None:
    """A dropped connection: SIGHUP the remote command's process group, then SIGKILL its shell (``nohup``/``setsid``
    work keeps running, as on a real instance)."""
    try:
        os.killpg(os.getpgid(proc.pid), signal.SIGHUP)
    except OSError:
        return
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.kill()


def ssh_run(ctx: Ctx, alias: str, command: str, host: bool, connect_timeout: int | None) -> int:
    """One ``bash -c '<agent snippet> && ssh <alias> '<command>''``: ssh's own error line + 255, or the remote exit
    code (``connect_timeout`` None: v0.6.317 - v0.6.319's plain ``ssh``)."""
    agent_snippet(ctx, alias)
    escaped = command.replace("'", "'\\''")
    options = "" if connect_timeout is None else f"-T -o ConnectTimeout={connect_timeout} -o LogLevel=ERROR "
    ssh_argv = f"ssh {options}{alias} '{escaped}'"
    ctx.record.setdefault("ssh_invocations", []).append(ssh_argv)
    ctx.record.setdefault("ssh_argv", ssh_argv)
    inst, line = ssh_check(ctx, alias)
    if inst is None:
        ctx.err(line + "\n")
        return 255
    return run_remote(ctx, inst, alias, command, host)


#: util.PollUntil's error after pollTimeout (10 minutes).
_NOT_RUNNING = "timed out waiting for instance to reach RUNNING state after 10m0s"


class _ExecFailure(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _exit_err(rc: int) -> _ExecFailure:
    return _ExecFailure(traced(f"exit status {rc}", "cmd/exec.runSSHWithTimeout", "cmd/exec/exec.go", 303), rc)


def exec_one(ctx: Ctx, name: str, command: str, host: bool) -> None:
    """exec.runExecCommand (v0.6.320+ fast path, then the slow path)."""
    if announces_agent(ctx):
        _exec_one_v0_6_317(ctx, name, command, host)
        return
    alias = name + "-host" if host else name
    rc = ssh_run(ctx, alias, command, host, 5)
    if rc == 0:
        return
    if ctx.documented and rc != 255:
        raise _exit_err(rc)
    ctx.err("Connection failed, checking instance status...\n")
    try:
        user = authenticate(ctx)
        raise_5xx(ctx, "exec", f"api/organizations/{ctx.org['id']}/workspaces")
        inst = find_instance(ctx, ctx.store.read(), user, name)
    except CliError:
        raise _ExecFailure(
            f'ssh connection failed and could not look up instance "{name}": {_exit_err(rc).message}\n'
            "Please check your instances with: brev ls"
        ) from None
    status = derive(inst, ctx.now())["status"]
    if status not in ("STOPPED", "RUNNING"):
        raise _ExecFailure(f'instance "{name}" is in state "{status}" \u2014 please check with: brev ls')
    try:
        if status == "STOPPED":
            inst = start_instance(ctx, user, name)
            if not poll_until_running(ctx, inst["id"]):
                raise _ExecFailure(_NOT_RUNNING)
        run_refresh(ctx, user)
    except CliError as exc:
        raise _ExecFailure(exc.message) from None
    alias = inst["name"] + "-host" if host else inst["name"]
    line = wait_for_ssh(ctx, alias)
    if line is not None:
        inner = traced("\n" + line, "cmd/util.WaitForSSHToBeAvailable", "cmd/util/ssh.go", 76)
        raise _ExecFailure(
            inner
            if status == "STOPPED"
            else f'could not connect to instance "{name}": {inner}\nPlease check with: brev ls'
        )
    rc = ssh_run(ctx, alias, command, host, 10)
    if rc != 0:
        raise _exit_err(rc)


def _exec_one_v0_6_317(ctx: Ctx, name: str, command: str, host: bool) -> None:
    """exec.runExecCommand of v0.6.317 - v0.6.319: look the instance up, start it if STOPPED, poll for RUNNING,
    refresh, wait for ssh, then run the command once (no fast path, no re-run)."""
    try:
        user = authenticate(ctx)
        inst = find_instance(ctx, ctx.store.read(), user, name)
        _inst, alias, line = reach_instance(ctx, user, name, inst, host, _NOT_RUNNING)
    except CliError as exc:
        raise _ExecFailure(exc.message) from None
    if line is not None:
        raise _ExecFailure(traced("\n" + line, "cmd/util.WaitForSSHToBeAvailable", "cmd/util/ssh.go", 76))
    rc = ssh_run(ctx, alias, command, host, None)
    if rc != 0:
        raise _exit_err(rc)


def cmd_exec(ctx: Ctx, v: dict, pos: list[str]) -> int:
    if not pos:
        raise CliError("requires at least 1 arg(s), only received 0")
    command = pos[-1]
    names = names_or_error(ctx, pos[:-1])
    if command.startswith("@"):
        path = command[1:]
        try:
            with open(path, encoding="utf-8") as fh:
                command = fh.read()
        except OSError as exc:
            raise CliError(f"open {path}: {(exc.strerror or 'error').lower()}") from None
    if not command:
        raise CliError("command is required")
    multi = len(names) > 1
    errors: list[str] = []
    for n in names:
        if multi:
            ctx.err(f"\n=== {n} ===\n")
        try:
            exec_one(ctx, n, command, v["host"])
        except _ExecFailure as exc:
            if multi:
                ctx.err(f"Error on {n}: {exc.message}\n")
                errors.append(exc.message)
                continue
            msg = exc.message
            if msg.startswith("[error]"):
                msg = msg.split("\n: ", 1)[1] if "\n: " in msg else msg
            code = exc.code if (ctx.documented and exc.code not in (0, 1)) else 1
            raise CliError(msg, code) from None
        if ctx.stdout_piped:
            ctx.out(n + "\n")
    if errors:
        raise CliError(multierror(errors))
    return 0
