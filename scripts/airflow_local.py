"""``make airflow``: a real local Airflow 3 UI with the provider, its examples, the Brev simulator and local S3.

One command starts, each in its own process group with its log under ``.airflow-local/logs/``:

* a moto S3 server seeded with the demo dataset (the bucket and prefix of ``scripts/demo.py``, the objects of
  :func:`airflow_provider_brev.testing.datasets.upload_synthetic_vcn_dataset`) and holding every bucket the
  examples default to (``EXAMPLE_BUCKETS`` of ``scripts/demo.py``);
* ``airflow db migrate`` (SQLite), then api-server, scheduler, dag-processor and triggerer (LocalExecutor);
  the dags folder is ``dags_examples/`` itself, so an edited example shows up after the next parse.

The Brev simulator (:class:`airflow_provider_brev.testing.BrevSimulator`) puts its fake ``brev`` first on every
component's PATH. ``brev_default`` (the simulator, with a token valid for 30 days), ``aws_default`` (moto),
``ngc_default`` and ``lepton_default`` (a fake DGX Cloud Lepton workspace,
:mod:`airflow_provider_brev.testing.fake_lepton`, on a port of its own) are environment-variable connections
(``AIRFLOW_CONN_*``), so they are not listed on the UI's Connections page. Everything lives under the git-ignored ``.airflow-local/`` of the checkout: AIRFLOW_HOME (the
SQLite database, task logs), the simulator, the HOME of every component (``~/.brev``), the component logs; the
user's own ``~/.brev`` and ``~/airflow`` are never touched. Examples stay paused until unpaused in the UI.

Ctrl-C (SIGINT) or SIGTERM stops every process it started: SIGTERM to each process group, SIGKILL after a grace
period, then whatever still carries this run's marker variable (:data:`MARKER`, e.g. the simulator's sandboxes).
``deployment/airflow_smoke.py`` drives the same :class:`LocalAirflow` in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import process_groups  # scripts/process_groups.py, beside this file

from airflow_provider_brev.testing.fake_lepton import TOKEN_ENV
from airflow_provider_brev.testing.local_s3 import free_port

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType, ModuleType, TracebackType

    from airflow_provider_brev.testing import BrevSimulator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_ROOT = ROOT / ".airflow-local"
DAGS_FOLDER = ROOT / "dags_examples"
#: every process LocalAirflow starts carries ``MARKER=<run id>`` in its environment (tasks and sandboxes inherit it)
MARKER = "BREV_AIRFLOW_LOCAL_ID"
#: lifetime of the simulator token in ``brev_default``: a local Airflow may run for days (the simulator's default
#: token, :attr:`BrevSimulator.valid_token`, lasts an hour)
TOKEN_SECONDS = 30 * 24 * 3600
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
HEALTH_COMPONENTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")
#: the fake Lepton workspace of ``lepton_default``
LEPTON_WORKSPACE = "ws-local"
S3_LOGIN, S3_SECRET = "demo-access-key", "demo-secret-key"  # moto accepts any keys
#: ``moto_server`` without its request log: a presigned URL's signature must not land in a log file
MOTO_QUIET = (
    "import sys; from werkzeug.serving import WSGIRequestHandler; "
    "WSGIRequestHandler.log_request = lambda *args, **kwargs: None; "
    "from moto.server import main; main(sys.argv[1:])"
)


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def marked_pids(run_id: str) -> list[int]:
    """PIDs of live processes whose environment carries ``MARKER=run_id``."""
    return process_groups.marked_pids(MARKER, run_id)


def demo_module() -> ModuleType:
    """``scripts/demo.py``: the bucket and dataset prefix of ``make demo`` (which the flagship example reads), the
    buckets every example defaults to and how the local S3 is seeded with them."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import demo

    return demo


def demo_dataset() -> tuple[str, str]:
    """The bucket and dataset prefix of ``make demo`` (scripts/demo.py), which the flagship example reads."""
    demo = demo_module()
    return demo.DEMO_BUCKET, demo.DATASET_PREFIX


class LocalAirflow:
    """A local Airflow (SQLite, LocalExecutor) with the provider, the examples, the simulator and moto S3.

    :param root: where everything lives (``.airflow-local/`` of the checkout by default).
    :param port: the api-server's port on 127.0.0.1 (UI and REST API).
    :param deploy_seconds: the simulator's DEPLOYING -> RUNNING time: long enough that readiness waits really
        defer to the triggerer (visible as ``deferred`` in the UI) and that a trigger never fires before the
        scheduler has processed the deferring worker's exit (Airflow 3.3.2 fails a task resumed before that with
        "finished with state success, but the task instance's state attribute is queued": apache/airflow#67287,
        #72716; seen here with 20 s on a loaded machine), short enough for a smoke test.
    :param log_level: Airflow's ``[logging] logging_level`` for the components and tasks.
    :param say: where progress messages go.
    """

    def __init__(
        self,
        root: Path = DEFAULT_ROOT,
        *,
        port: int = 8080,
        deploy_seconds: float = 40.0,
        log_level: str = "INFO",
        say: Callable[[str], object] = print,
    ) -> None:
        self.root = Path(root).absolute()
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.deploy_seconds = deploy_seconds
        self.log_level = log_level
        self.say = say
        self.run_id = uuid.uuid4().hex[:12]
        self.airflow_home = self.root / "airflow"
        self.home = self.root / "home"
        self.logs = self.root / "logs"
        self.sim_root = self.root / "brev-sim"
        self.env_file = self.root / "env.sh"
        self.bin = Path(sys.executable).parent
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.sim: BrevSimulator | None = None
        self.env: dict[str, str] = {}
        self.s3_url = ""
        self.lepton_port = 0
        self.lepton_token = "lep-local-" + secrets.token_hex(12)
        self.bucket, self.dataset_prefix = demo_dataset()
        self.seeded_objects = 0
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------------------------------- start
    def start(self) -> LocalAirflow:
        """Prepare ``root``, start moto and seed it, migrate the database, start the four components."""
        if port_in_use(self.port):
            raise RuntimeError(f"port {self.port} on 127.0.0.1 is in use: choose another, e.g. PORT=8081 make airflow")
        t0 = time.monotonic()
        for d in (self.root, self.airflow_home, self.home, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        self._prepare_simulator()
        self.s3_url = f"http://127.0.0.1:{free_port()}"
        self.lepton_port = free_port()
        self.env = self._environment()
        self._write_env_file()
        self._start_s3()
        others = ", ".join(b for b in demo_module().EXAMPLE_BUCKETS if b != self.bucket)
        self.say(
            f"moto S3 on {self.s3_url}: s3://{self.bucket}/{self.dataset_prefix} ({self.seeded_objects} objects);"
            f" the examples' other bucket(s): {others}"
        )
        self._start_lepton()
        self._migrate()
        self.say(f"airflow db migrate (SQLite): {self.timings['db_migrate_seconds']} s")
        for name in COMPONENTS:
            argv = [str(self.bin / "airflow"), name]
            if name == "api-server":
                argv += ["--host", "127.0.0.1", "--port", str(self.port)]
            elif name in ("scheduler", "triggerer"):
                argv.append("--skip-serve-logs")  # one machine: the api-server reads the log files directly
            self.say(f"started {name} (pid {self._spawn(name, argv).pid})")
        self.timings["start_seconds"] = round(time.monotonic() - t0, 1)
        return self

    def _prepare_simulator(self) -> None:
        from airflow_provider_brev.testing import BrevSimulator

        # a fresh simulator per start: instances of an earlier start lost their sandbox processes with it
        shutil.rmtree(self.sim_root, ignore_errors=True)
        self.sim = BrevSimulator(
            self.sim_root, profile="released", deploy_seconds=self.deploy_seconds, build_seconds=1.0, ssh_seconds=1.0
        ).install()

    def _secrets(self) -> dict[str, str]:
        """Fernet key (connections added in the UI are encrypted with it) and the api-server's signing secrets,
        generated once per ``root`` and kept (mode 0600) so that a restart still reads what was saved."""
        path = self.root / "secrets.json"
        if path.exists():
            return dict(json.loads(path.read_text()))
        from cryptography.fernet import Fernet

        values = {
            "fernet_key": Fernet.generate_key().decode(),
            "api_secret_key": secrets.token_hex(16),
            "jwt_secret": secrets.token_hex(32),
        }
        path.touch(mode=0o600)
        path.write_text(json.dumps(values))
        return values

    def _environment(self) -> dict[str, str]:
        assert self.sim is not None
        keys = self._secrets()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_", "BREV_", "FAKE_BREV"))}
        sim_env = self.sim.env()
        token = self.sim.make_token(TOKEN_SECONDS)
        env.update(
            {
                MARKER: self.run_id,
                "PATH": f"{self.sim.bin_dir}{os.pathsep}{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                "FAKE_BREV_STATE": sim_env["FAKE_BREV_STATE"],
                "HOME": str(self.home),  # ~/.brev of every component and task: never the user's own
                "AIRFLOW_HOME": str(self.airflow_home),
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": "4",
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
                "AIRFLOW__CORE__FERNET_KEY": keys["fernet_key"],
                "AIRFLOW__CORE__AUTH_MANAGER": (
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                # `airflow connections test` (and the UI's Test button) refuse to run while this is Disabled
                "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
                # the workers' calls to the api-server: 5 s by default, too short on a busy laptop
                "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.airflow_home / 'airflow.db'}",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__BASE_URL": self.url,
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API__SECRET_KEY": keys["api_secret_key"],
                "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt_secret"],
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
                "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
                "AIRFLOW__LOGGING__LOGGING_LEVEL": self.log_level,
                "AIRFLOW_CONN_BREV_DEFAULT": self.sim.connection_json(token=token),
                "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(
                    {
                        "conn_type": "aws",
                        "login": S3_LOGIN,
                        "password": S3_SECRET,
                        "extra": {"endpoint_url": self.s3_url, "region_name": "us-east-1"},
                    }
                ),
                "AIRFLOW_CONN_NGC_DEFAULT": json.dumps({"conn_type": "generic", "password": "demo-ngc-api-key"}),
                "AIRFLOW_CONN_LEPTON_DEFAULT": json.dumps(
                    {
                        "conn_type": "lepton",
                        "login": LEPTON_WORKSPACE,
                        "password": self.lepton_token,
                        "host": f"http://127.0.0.1:{self.lepton_port}/api/v2/workspaces/{LEPTON_WORKSPACE}",
                    }
                ),
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": "/dev/null",
                "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
                "TAO_VCN_BUCKET": self.bucket,
                "TAO_VCN_DATASET_PREFIX": self.dataset_prefix,
            }
        )
        return env

    def _write_env_file(self) -> None:
        """``.airflow-local/env.sh``: the environment of the components, for the ``airflow`` CLI in a (sub)shell.

        It sets HOME too, as the simulator's own ``install`` does: a ``brev`` command in that shell (the simulator's,
        first on PATH) must not touch the user's ``~/.brev``. The marker variable is left out (:meth:`stop` kills
        what carries it)."""
        keys = sorted(k for k in self.env if k.startswith(("AIRFLOW", "AWS_", "TAO_VCN_")) or k == "FAKE_BREV_STATE")
        lines = [f"export {k}={shlex.quote(self.env[k])}" for k in keys]
        lines.append(f"export PATH={shlex.quote(self.env['PATH'])}")
        lines.append(f"export HOME={shlex.quote(self.env['HOME'])}")
        self.env_file.touch(mode=0o600)
        self.env_file.write_text(
            "# written by scripts/airflow_local.py; valid while it runs\n" + "\n".join(lines) + "\n"
        )

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("ab") as fh:
            proc = subprocess.Popen(
                argv,
                cwd=self.root,
                env={**self.env, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group (and out of reach of the terminal's Ctrl-C)
            )
        self.procs[name] = proc
        return proc

    def _start_s3(self) -> None:
        import boto3

        port = self.s3_url.rsplit(":", 1)[1]
        self._spawn("moto", [sys.executable, "-c", MOTO_QUIET, "-H", "127.0.0.1", "-p", port])
        client = boto3.client(
            "s3",
            endpoint_url=self.s3_url,
            region_name="us-east-1",
            aws_access_key_id=S3_LOGIN,
            aws_secret_access_key=S3_SECRET,
        )
        deadline = time.monotonic() + 60
        while not port_in_use(int(port)):
            self.assert_running()
            if time.monotonic() > deadline:
                raise TimeoutError(f"moto did not listen on {self.s3_url} within 60 s (see {self.logs}/moto.log)")
            time.sleep(0.2)
        self.seeded_objects = demo_module().seed_local_s3(client)  # the dataset, and every example's bucket

    def _start_lepton(self) -> None:
        """The fake DGX Cloud Lepton workspace (``lepton_default``), with the example's nvcr.io registry secret."""
        root = self.root / "lepton"
        shutil.rmtree(root, ignore_errors=True)  # its jobs' containers ended with the previous start
        argv = [sys.executable, "-m", "airflow_provider_brev.testing.fake_lepton", "--root", str(root)]
        argv += ["--port", str(self.lepton_port), "--workspace", LEPTON_WORKSPACE, "--pull-secret", "nvcr-ngc"]
        self._spawn("lepton", argv, env={TOKEN_ENV: self.lepton_token})  # not on its command line
        deadline = time.monotonic() + 60
        while not port_in_use(self.lepton_port):
            self.assert_running()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the fake Lepton API did not listen within 60 s (see {self.logs}/lepton.log)")
            time.sleep(0.2)
        self.say(f"fake DGX Cloud Lepton workspace {LEPTON_WORKSPACE} on http://127.0.0.1:{self.lepton_port}")

    def _migrate(self) -> None:
        t0 = time.monotonic()
        with (self.logs / "db-migrate.log").open("ab") as fh:
            res = subprocess.run(
                [str(self.bin / "airflow"), "db", "migrate"],
                cwd=self.root,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=600,
                check=False,
            )
        if res.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed ({res.returncode}): see {self.logs / 'db-migrate.log'}")
        self.timings["db_migrate_seconds"] = round(time.monotonic() - t0, 1)

    # ------------------------------------------------------------------------------------------ health
    def assert_running(self) -> None:
        """Raise when a component exited (with the end of its log)."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{name} exited with {proc.returncode}; end of {self.logs}/{name}.log:\n{tail}")

    def health(self) -> dict[str, str]:
        """Each component's status from ``/api/v2/monitor/health`` (official client; the endpoint needs no login)."""
        import airflow_client.client as af

        with af.ApiClient(af.Configuration(host=self.url)) as client:
            info = af.MonitorApi(client).get_health(_request_timeout=5)
        return {name: str(getattr(getattr(info, name, None), "status", None)) for name in HEALTH_COMPONENTS}

    def _warm_up_execution_api(self) -> None:
        """The api-server builds its execution API (the one task processes call) on the first request to it, in
        its event loop: tens of seconds on a busy machine, with every other request (UI, REST) waiting meanwhile.
        One request here moves that before "healthy" instead of into the first task's start."""
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/execution/health", timeout=300) as resp:
            resp.read()

    def wait_healthy(self, timeout: float = 180.0) -> dict[str, str]:
        """Until metadatabase, scheduler, triggerer and dag-processor report ``healthy``; fails fast when a
        component exits."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        statuses: dict[str, str] = {}
        while True:
            self.assert_running()
            with contextlib.suppress(Exception):  # not listening yet, or still starting up
                statuses = self.health()
                if all(status == "healthy" for status in statuses.values()):
                    self._warm_up_execution_api()
                    self.timings["healthy_after_seconds"] = round(time.monotonic() - t0, 1)
                    return statuses
            if time.monotonic() > deadline:
                raise TimeoutError(f"not healthy within {timeout:.0f} s: {statuses or 'api-server not answering'}")
            time.sleep(1)

    def banner(self) -> str:
        rel = self.root.relative_to(ROOT) if self.root.is_relative_to(ROOT) else self.root
        return "\n".join(
            [
                f"Airflow is up: {self.url}",
                "  Log in: nothing to type (simple auth manager, every user is admin; local use only).",
                f"  DAGs: {DAGS_FOLDER.relative_to(ROOT)}/ (a new DAG starts paused: nothing runs until you unpause it).",
                f"  Connections (environment variables, not listed on the Connections page): brev_default -> the Brev"
                f" simulator (token valid {TOKEN_SECONDS // 86400} days), aws_default -> moto S3 {self.s3_url}"
                f" (s3://{self.bucket}/{self.dataset_prefix}: {self.seeded_objects} objects), ngc_default,"
                f" lepton_default -> the fake Lepton workspace on port {self.lepton_port}.",
                f"  State and logs: {rel}/ (component logs in {rel}/logs/).",
                f"  CLI in another shell: (source {rel}/env.sh && airflow connections test brev_default)",
                "  Ctrl-C stops everything.",
            ]
        )

    # -------------------------------------------------------------------------------------------- stop
    def stop(self, grace: float = 20.0) -> list[str]:
        """SIGTERM every process group, SIGKILL what is left after ``grace`` seconds, then kill whatever still
        carries this run's marker (sandboxes of the simulator, task processes). Returns what had to be killed."""
        killed = process_groups.stop_groups(self.procs, graces=(grace,))
        if self.sim is not None:
            self.sim.kill_all()
        for _ in range(20):
            pids = marked_pids(self.run_id)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    killed.append(f"pid {pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()[:120]!r}")
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        self.env_file.unlink(missing_ok=True)
        return killed

    def left_running(self) -> list[int]:
        """Processes of this run still alive (after :meth:`stop`: must be none)."""
        return marked_pids(self.run_id)

    def __enter__(self) -> LocalAirflow:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class _Stop(BaseException):
    """Raised by the SIGINT/SIGTERM handler of :func:`main` (not an Exception: no ``except Exception`` eats it)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 8080))
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="state directory (default .airflow-local/)")
    parser.add_argument("--fresh", action="store_true", help="delete the state directory first (database too)")
    args = parser.parse_args(argv)
    if args.fresh:
        shutil.rmtree(args.root, ignore_errors=True)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    local = LocalAirflow(args.root, port=args.port)
    code = 0
    try:
        print(f"Starting a local Airflow on {local.url} (a minute or two) ...", flush=True)
        local.start()
        local.wait_healthy()
        print(local.banner(), flush=True)
        while True:
            local.assert_running()
            time.sleep(1)
    except _Stop as stop:
        print(f"\n{stop}: stopping ...", flush=True)
    except Exception as err:
        print(f"make airflow failed: {err}", file=sys.stderr, flush=True)
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the clean-up
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        killed = local.stop()
        left = local.left_running()
        print(f"Stopped; {len(killed)} process(es) needed SIGKILL; {len(left)} left running.", flush=True)
        if left:
            code = 1
    return code


if __name__ == "__main__":
    sys.exit(main())
