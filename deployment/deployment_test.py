"""``make deployment-test``: the provider in a real distributed Airflow 3.3 deployment.

PostgreSQL metadata database, CeleryExecutor with Redis as broker, and scheduler, dag-processor, triggerer,
api-server and two Celery workers as separate processes, with the provider installed from its wheel into a
venv of its own. The Brev simulator and a moto S3 server stand in for Brev and S3. See deployment/README.md.

Two stages in one file:

* ``bootstrap`` (default; any Python 3.11 with the standard library): skips loudly when PostgreSQL or Redis is
  unreachable, builds the wheel, creates the deployment venv from uv.lock's ``deploy`` group plus the wheel, runs
  the ``run`` stage with that venv's Python, and afterwards kills anything left behind and drops the database.
* ``run`` (inside the deployment venv): starts everything, runs the checks, stops everything, prints a summary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ARTIFACTS = ROOT / "artifacts" / "deployment"
MARKER = "BREV_DEPLOYMENT_TEST_ID"  # every process this test starts carries it in its environment
PG_HOST, PG_PORT, PG_USER = "127.0.0.1", 5432, "postgres"
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
DAGS = {
    "lifecycle": "example_brev_lifecycle",
    "flagship": "tao_visual_changenet_retrain",
    "worker_kill": "deploy_brev_worker_kill",
    "secret": "deploy_brev_secret_printed",
}
#: A secret the deploy_brev_secret_printed DAG's commands print (connection ``wandb``): it must be redacted.
PRINTED_SECRET = "wandb-deploy-" + "9c3a" * 6
# tasks that defer (their waits must go through the triggerer)
DEFERRABLE_TASKS = {
    "example_brev_lifecycle": ["wait_until_ready"],
    "tao_visual_changenet_retrain": ["create_instance", "gap_analysis", "train", "evaluate"],
}
BRC_FIELDS = ("api_key", "org_id", "org", "cli_path", "cloud_cred_id", "workspace_group_id", "name_prefix")
NGC_KEY = "ngc-deploy-" + "5e1f" * 6
DATASET_PREFIX = "datasets/vcn-aoi/"
RUN_TIMEOUT = 420.0


def log(msg: str) -> None:
    print(f"[deployment-test {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def banner(lines: list[str], char: str = "!") -> None:
    width = max(len(line) for line in lines) + 4
    print(char * width, flush=True)
    for line in lines:
        print(f"{char} {line.ljust(width - 4)} {char}", flush=True)
    print(char * width, flush=True)


# ============================================================================================== bootstrap
def _tcp_ok(host: str, port: int, payload: bytes | None = None, expect: bytes | None = None) -> bool:
    try:
        with socket.create_connection((host, port), timeout=3) as sock:
            if payload is None:
                return True
            sock.sendall(payload)
            sock.settimeout(3)
            return expect is None or sock.recv(64).startswith(expect)
    except OSError:
        return False


def services_missing() -> list[str]:
    missing = []
    if not _tcp_ok(PG_HOST, PG_PORT):
        missing.append(f"PostgreSQL on {PG_HOST}:{PG_PORT}")
    if not _tcp_ok(REDIS_HOST, REDIS_PORT, b"PING\r\n", b"+PONG"):
        missing.append(f"Redis on {REDIS_HOST}:{REDIS_PORT}")
    return missing


def marked_pids(test_id: str) -> list[int]:
    """PIDs of live processes whose environment carries this run's marker (Linux /proc)."""
    needle = f"{MARKER}={test_id}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    with open(f"/proc/{entry}/stat", "rb") as st:
                        if st.read().split(b")")[-1].split()[0] == b"Z":
                            continue  # a zombie waiting for its parent is not running anything
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def kill_marked(test_id: str) -> list[str]:
    """SIGKILL every process of this run that is still alive; returns descriptions of what was killed."""
    killed = []
    for _ in range(5):
        pids = marked_pids(test_id)
        if not pids:
            break
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")[:160]
                os.kill(pid, signal.SIGKILL)
                killed.append(f"{pid} {cmd}")
            except OSError:
                pass
        time.sleep(0.5)
    return killed


def drop_database_cli(name: str) -> None:
    psql = shutil.which("psql")
    if psql and name:
        subprocess.run(
            [
                psql,
                "-h",
                PG_HOST,
                "-U",
                PG_USER,
                "-d",
                "postgres",
                "-qAt",
                "-c",
                f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )


def start_chromium_install(logfile: Path) -> subprocess.Popen | None:
    """Install Debian's chromium in the background when it is missing (root only); None when not needed."""
    if any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        log("chromium is missing and cannot be installed here (needs root and apt-get): the screenshot check will fail")
        return None
    log("installing Debian's chromium in the background (apt-get)")
    script = (
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium"
    )
    fh = logfile.open("wb")
    return subprocess.Popen(["bash", "-c", script], stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT)


def bootstrap(args: argparse.Namespace) -> int:
    started = time.monotonic()
    missing = services_missing()
    if missing:
        banner(
            [
                "DEPLOYMENT TEST SKIPPED",
                f"Not reachable: {', '.join(missing)}.",
                "It needs PostgreSQL (trust auth for user postgres) and Redis on 127.0.0.1.",
                "On the python-svc machine they are started before each session and before CI.",
                "Nothing was tested.",
            ]
        )
        print("deployment-test: 0 passed, 0 failed, 1 skipped", flush=True)
        return 0
    uv = str(Path(args.uv).resolve())

    def on_signal(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    workdir = Path(tempfile.mkdtemp(prefix="brev-deploy-"))
    test_id = secrets.token_hex(6)
    rc = 1
    (ARTIFACTS / "logs").mkdir()
    apt = start_chromium_install(ARTIFACTS / "logs" / "apt-chromium.log")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "UV_PROJECT"))}
        env["UV_LINK_MODE"] = "copy"
        t0 = time.monotonic()
        log("building the provider wheel")
        dist = workdir / "dist"
        subprocess.run([uv, "build", "--wheel", "--quiet", "-o", str(dist)], cwd=ROOT, env=env, check=True)
        wheels = sorted(dist.glob("airflow_provider_brev-*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"expected one wheel in {dist}, found {wheels}")
        wheel = wheels[0]
        requirements = workdir / "requirements-deploy.txt"
        subprocess.run(
            [
                uv, "export", "--frozen", "--quiet", "--no-default-groups", "--group", "deploy",
                "--no-emit-project", "--no-hashes", "--format", "requirements.txt", "-o", str(requirements),
            ],
            cwd=ROOT, env=env, check=True,
        )  # fmt: skip
        venv = workdir / "venv"
        log(f"creating the deployment venv ({wheel.name} + uv.lock's deploy group)")
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], cwd=workdir, env=env, check=True)
        py = venv / "bin" / "python"
        subprocess.run(
            [uv, "pip", "install", "--quiet", "--python", str(py), "-r", str(requirements), str(wheel)],
            cwd=workdir, env=env, check=True,
        )  # fmt: skip
        install_seconds = time.monotonic() - t0
        log(f"wheel built and venv installed in {install_seconds:.1f} s")
        if apt is not None:
            t1 = time.monotonic()
            apt_rc = apt.wait()
            log(f"chromium install finished (exit code {apt_rc}, waited {time.monotonic() - t1:.0f} s more)")
        child_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("VIRTUAL_ENV", "PYTHON", "AIRFLOW", "AWS_", "BREV_", "FAKE_BREV", "UV_"))
        }
        child_env[MARKER] = test_id
        child_env["PATH"] = f"{venv / 'bin'}{os.pathsep}{child_env.get('PATH', '')}"
        cmd = [
            str(py), str(Path(__file__).resolve()), "run",
            "--workdir", str(workdir), "--wheel", str(wheel), "--test-id", test_id,
            "--install-seconds", f"{install_seconds:.1f}", "--started-at", str(time.time() - (time.monotonic() - started)),
        ]  # fmt: skip
        if args.keep_running:
            cmd.append("--keep-running")
        proc = subprocess.Popen(cmd, cwd=workdir, env=child_env, start_new_session=True)
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                rc = proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                rc = 1
            rc = rc or 130
    except subprocess.CalledProcessError as err:
        log(f"bootstrap failed: {err}")
        rc = 1
    finally:
        if apt is not None and apt.poll() is None:
            apt.wait()  # never leave dpkg half-done
        t1 = time.monotonic()
        killed = kill_marked(test_id)
        log(f"leftover process sweep ({time.monotonic() - t1:.1f} s)")
        if killed:
            log(f"FAILED: {len(killed)} process(es) of this run were still alive and had to be killed:")
            for line in killed:
                print(f"    {line}")
            (ARTIFACTS / "leftover-processes.txt").write_text("\n".join(killed) + "\n")
            rc = rc or 1
        state_file = workdir / "state.json"
        if state_file.exists():
            state = json.loads(state_file.read_text())
            if state.get("database") and not state.get("database_dropped"):
                drop_database_cli(state["database"])
            if state.get("redis_db") is not None and not state.get("redis_flushed"):
                _tcp_ok(REDIS_HOST, REDIS_PORT, f"SELECT {int(state['redis_db'])}\r\nFLUSHDB\r\n".encode(), b"+OK")
        if not args.keep_workdir:
            t1 = time.monotonic()
            shutil.rmtree(workdir, ignore_errors=True)
            log(f"work directory removed ({time.monotonic() - t1:.0f} s)")
        else:
            log(f"work directory kept: {workdir}")
    log(f"total {time.monotonic() - started:.0f} s, exit code {rc}; artifacts in {ARTIFACTS.relative_to(ROOT)}/")
    passed = failed = 0
    with contextlib.suppress(OSError, ValueError):
        results = json.loads((ARTIFACTS / "summary.json").read_text())["checks"]
        passed = sum(1 for r in results if r["ok"])
        failed = len(results) - passed
    if rc and not failed:
        failed = 1  # the run stage never got to its checks, or something was left running
    print(f"deployment-test: {passed} passed, {failed} failed", flush=True)
    return rc


# ============================================================================================== run stage
class Checks:
    """Named checks with a pass/fail outcome and details, printed at the end."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, name: str, ok: bool, detail: str = "") -> bool:
        with self._lock:
            self.results.append({"check": name, "ok": bool(ok), "detail": detail})
        log(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""))
        return ok

    def run(self, name: str, fn: Any, *args: Any) -> Any:
        try:
            detail = fn(*args)
        except Exception as err:
            self.record(name, False, f"{type(err).__name__}: {err}")
            traceback.print_exc()
            return None
        self.record(name, True, detail if isinstance(detail, str) else "")
        return detail

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.results if not r["ok"]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Deployment:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(args.workdir)
        self.test_id = args.test_id
        self.logs = ARTIFACTS / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self._log_files: list[Any] = []
        self.state: dict[str, Any] = {}
        self.checks = Checks()
        self.timings: dict[str, float] = {"install_seconds": float(args.install_seconds)}
        self.api_port = _free_port()
        self.moto_port = _free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.s3_url = f"http://127.0.0.1:{self.moto_port}"
        self.bucket = f"brev-deploy-{self.test_id}"
        self.database = f"airflow_deploy_{self.test_id}"
        self.redis_db: int | None = None
        self.sim: Any = None
        self.env: dict[str, str] = {}
        self.observed: dict[str, dict[str, set[str]]] = {}  # dag_id -> task_id -> states seen while polling
        self.worker_pids: dict[str, int] = {}
        self.lost_workers: set[str] = set()

    # ---------------------------------------------------------------------------------------- plumbing
    def save_state(self) -> None:
        (self.workdir / "state.json").write_text(json.dumps(self.state))

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        fh = (self.logs / f"{name}.log").open("ab")
        self._log_files.append(fh)
        proc = subprocess.Popen(
            argv,
            cwd=self.workdir,
            env=env or self.env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole
        )
        self.procs[name] = proc
        log(f"started {name} (pid {proc.pid})")
        return proc

    def assert_running(self) -> None:
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        if dead:
            raise RuntimeError(f"component(s) exited early: {dead} (see {self.logs.relative_to(ROOT)}/)")

    def airflow(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(Path(sys.executable).parent / "airflow"), *argv],
            cwd=self.workdir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    # ------------------------------------------------------------------------------------------- setup
    def create_database(self) -> None:
        import psycopg2

        conn = psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{self.database}"')
        conn.close()
        self.state["database"] = self.database
        self.save_state()

    def drop_database(self) -> None:
        import psycopg2

        conn = psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,))
            left = cur.fetchone()
        conn.close()
        if left:
            raise RuntimeError(f"database {self.database} still exists")
        self.state["database_dropped"] = True
        self.save_state()

    def pick_redis_db(self) -> None:
        import redis

        for n in sorted(range(1, 16), key=lambda _: secrets.randbelow(1000)):
            client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=n)
            # claim an empty one with a key, so that another run of this test sees it in use
            if client.dbsize() == 0 and client.set(f"brev-deployment-test:{self.test_id}", "1", nx=True):
                self.redis_db = n
                self.state["redis_db"] = n
                self.save_state()
                return
        raise RuntimeError("no empty Redis database among 1..15")

    def flush_redis_db(self) -> None:
        import redis

        if self.redis_db is not None:
            redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=self.redis_db).flushdb()
            self.state["redis_flushed"] = True
            self.save_state()

    def prepare(self) -> None:
        from cryptography.fernet import Fernet

        from airflow_provider_brev.testing import BrevSimulator

        home = self.workdir / "airflow"
        dags = self.workdir / "dags"
        worker_home = self.workdir / "worker-home"
        for d in (home, dags, worker_home):
            d.mkdir(parents=True, exist_ok=True)
        for src in sorted((ROOT / "dags_examples").glob("*.py")) + sorted((HERE / "dags").glob("*.py")):
            shutil.copy(src, dags / src.name)
        # Slow enough deploys that readiness waits really defer even on a loaded CI machine (the sensor checks once
        # before deferring: an instance ready by then is not waited for), fast enough for CI.
        self.sim = BrevSimulator(
            self.workdir / "brev-sim", profile="released", deploy_seconds=15.0, build_seconds=1.0, ssh_seconds=1.0
        ).install()
        sim_env = self.sim.env()
        db_url = f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{self.database}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_"))}
        env.update(
            {
                MARKER: self.test_id,
                "PATH": sim_env["PATH"],
                "FAKE_BREV_STATE": sim_env["FAKE_BREV_STATE"],
                "HOME": str(worker_home),  # shared by every component: ~/.brev credentials
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
                "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api_url}/execution/",
                "AIRFLOW__CORE__PARALLELISM": "16",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.api_port),
                "AIRFLOW__API__BASE_URL": self.api_url,
                "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
                "AIRFLOW__CELERY__BROKER_URL": f"redis://{REDIS_HOST}:{REDIS_PORT}/{self.redis_db}",
                "AIRFLOW__CELERY__RESULT_BACKEND": f"db+postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{self.database}",
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": "4",
                "AIRFLOW__CELERY__SYNC_PARALLELISM": "1",
                # a lost task process is noticed within ~30 s (default 300 s)
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
                "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
                "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
                # connections: Brev simulator, moto S3 and an NGC key, as environment variables on every component
                "AIRFLOW_CONN_BREV_DEFAULT": self.sim.connection_json(),
                "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(
                    {
                        "conn_type": "aws",
                        "login": "AKIADEPLOYMENTTEST42",
                        "password": "deploymentTestSecretAccessKey42",
                        "extra": {"endpoint_url": self.s3_url, "region_name": "us-east-1"},
                    }
                ),
                "AIRFLOW_CONN_NGC_DEFAULT": json.dumps({"conn_type": "generic", "password": NGC_KEY}),
                "AIRFLOW_CONN_WANDB": json.dumps({"conn_type": "generic", "password": PRINTED_SECRET}),
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": "/dev/null",
                "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
                "TAO_VCN_BUCKET": self.bucket,
                "TAO_VCN_DATASET_PREFIX": DATASET_PREFIX,
            }
        )
        self.env = env

    def start_s3(self) -> None:
        import boto3

        from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset

        self.start(
            "moto", [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(self.moto_port)]
        )
        client = boto3.client(
            "s3",
            endpoint_url=self.s3_url,
            region_name="us-east-1",
            aws_access_key_id="AKIADEPLOYMENTTEST42",
            aws_secret_access_key="deploymentTestSecretAccessKey42",
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                client.create_bucket(Bucket=self.bucket)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        count = upload_synthetic_vcn_dataset(client, self.bucket, DATASET_PREFIX)
        self.s3 = client
        log(f"moto S3 on {self.s3_url}: s3://{self.bucket}/{DATASET_PREFIX} seeded with {count} objects")

    def start_airflow(self) -> None:
        t0 = time.monotonic()
        res = self.airflow("db", "migrate", timeout=600)
        (self.logs / "db-migrate.log").write_text(res.stdout + res.stderr)
        if res.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed ({res.returncode}): {res.stderr[-3000:]}")
        self.timings["db_migrate_seconds"] = round(time.monotonic() - t0, 1)
        log(f"airflow db migrate on PostgreSQL: {self.timings['db_migrate_seconds']} s")
        airflow = str(Path(sys.executable).parent / "airflow")
        t0 = time.monotonic()
        self.start("api-server", [airflow, "api-server", "--host", "127.0.0.1", "--port", str(self.api_port)])
        self.start("scheduler", [airflow, "scheduler"])
        self.start("dag-processor", [airflow, "dag-processor"])
        self.start("triggerer", [airflow, "triggerer", "--skip-serve-logs"])
        for n in (1, 2):
            proc = self.start(
                f"worker{n}",
                [airflow, "celery", "worker", "--celery-hostname", f"worker{n}@%h", "--skip-serve-logs"],
            )
            self.worker_pids[f"worker{n}"] = proc.pid
        from client import AirflowClient

        self.client = AirflowClient(self.api_url)
        self.client.wait_until_up(timeout=240)
        self.assert_running()
        # every component reports in
        deadline = time.monotonic() + 240
        while True:
            self.assert_running()
            health = self.client.health()
            statuses = {
                name: (health.get(name) or {}).get("status")
                for name in ("metadatabase", "scheduler", "triggerer", "dag_processor")
            }
            workers_ready = [n for n in ("worker1", "worker2") if f"{n}@" in self._ready_line(n)]
            if all(s == "healthy" for s in statuses.values()) and len(workers_ready) == 2:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"components not healthy: {statuses}, celery workers ready: {workers_ready}")
            time.sleep(1)
        self.timings["startup_seconds"] = round(time.monotonic() - t0, 1)
        (ARTIFACTS / "health.json").write_text(json.dumps(health, indent=1))
        log(f"all components up in {self.timings['startup_seconds']} s: {statuses}, celery workers: {workers_ready}")
        self.client.wait_for_dags(list(DAGS.values()), timeout=240)
        log("DAGs parsed: " + ", ".join(DAGS.values()))

    def _ready_line(self, worker: str) -> str:
        """Celery's "<name>@<host> ready." line from a worker's log ('' until it is there)."""
        text = (self.logs / f"{worker}.log").read_text(errors="replace")
        return next((line for line in text.splitlines() if line.rstrip().endswith(" ready.") or " ready. " in line), "")

    # ------------------------------------------------------------------------------------------ checks
    def check_wheel(self) -> str:
        import importlib.metadata

        import airflow_provider_brev

        location = Path(airflow_provider_brev.__file__).resolve()
        venv = Path(sys.prefix).resolve()
        if not str(location).startswith(str(venv)):
            raise AssertionError(f"airflow_provider_brev imported from {location}, not from the venv {venv}")
        dist = importlib.metadata.distribution("airflow-provider-brev")
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        if direct.get("dir_info", {}).get("editable") or not direct.get("url", "").endswith(".whl"):
            raise AssertionError(f"not installed from a wheel: {direct}")
        providers = {p["package_name"]: p for p in self.client.providers()}
        brev = providers.get("airflow-provider-brev")
        if not brev:
            raise AssertionError(f"the API server does not list the provider: {sorted(providers)}")
        return f"{Path(direct['url']).name} in site-packages; API server lists {brev['package_name']} {brev['version']}"

    def check_hook_meta(self) -> str:
        meta = self.client.hook_meta()
        (ARTIFACTS / "hook_meta.json").write_text(json.dumps(meta, indent=1))
        brev = next((m for m in meta if m.get("connection_type") == "brev"), None)
        if brev is None:
            raise AssertionError(
                f"connection type brev missing from hook_meta: {[m.get('connection_type') for m in meta]}"
            )
        (ARTIFACTS / "hook_meta_brev.json").write_text(json.dumps(brev, indent=1))
        extra = brev.get("extra_fields") or {}
        missing = [f for f in BRC_FIELDS if f not in extra]
        if missing:
            raise AssertionError(f"brev extra fields missing: {missing}; got {sorted(extra)}")
        std = brev.get("standard_fields") or {}
        password = std.get("password") or {}
        if password.get("title") != "Brev API token":
            raise AssertionError(f"password field not relabelled: {password}")
        hidden = sorted(k for k, v in std.items() if isinstance(v, dict) and v.get("hidden"))
        return f"{brev.get('hook_name')!r}: extra fields {sorted(extra)}; hidden {hidden}"

    def check_screenshot(self) -> str:
        from cdp import Browser, find_chromium

        exe = find_chromium()
        if exe is None:
            raise AssertionError("chromium is not installed (make deployment-test installs Debian's chromium)")
        shot = ARTIFACTS / "brev-connection-form.png"
        browser = Browser(
            exe,
            self.workdir / "chromium-profile",
            self.logs / "chromium.log",
            env={**os.environ, MARKER: self.test_id, "HOME": str(self.workdir / "chromium-home")},
        )
        try:
            return self._drive_connection_form(browser, shot)
        except Exception:
            with contextlib.suppress(Exception):
                browser.screenshot(ARTIFACTS / "connection-form-failure.png")
            raise
        finally:
            browser.close()

    def _drive_connection_form(self, browser: Any, shot: Path) -> str:
        # with all-admins simple auth the UI still wants its token cookie: this endpoint sets it and redirects
        browser.navigate(f"{self.api_url}/auth/token/login?next={self.api_url}/connections")
        browser.wait_for(
            "[...document.querySelectorAll('button')].some(b => /add connection/i.test(b.innerText))",
            timeout=90,
            what="the Connections page with its Add Connection button",
        )
        browser.evaluate(
            "[...document.querySelectorAll('button')].find(b => /add connection/i.test(b.innerText)).click()"
        )
        browser.wait_for("!!document.querySelector('[role=dialog]')", timeout=30, what="the add-connection dialog")
        # The connection type is a searchable select: click its input, type, pick the option with Enter. The
        # dialog animates in and the type list is fetched (hook_meta), so retry until the option shows up.
        find_select = """(() => {
             const d = document.querySelector('[role=dialog]');
             const el = d && (d.querySelector('input[role=combobox]') || d.querySelector('[role=combobox]'));
             if (!el) return null;
             const r = el.getBoundingClientRect();
             return {x: r.x + r.width / 2, y: r.y + r.height / 2};
           })()"""
        option_shown = "[...document.querySelectorAll('[role=option]')].some(o => /NVIDIA Brev/.test(o.innerText))"
        for attempt in range(1, 7):
            rect = browser.wait_for(find_select, timeout=30, what="the connection type select")
            time.sleep(0.5)
            again = browser.evaluate(find_select)
            if again != rect:  # still moving: try again once it settled
                continue
            browser.click_at(rect["x"], rect["y"])
            time.sleep(0.3)
            browser.evaluate(
                "(() => { const d = document.querySelector('[role=dialog]');"
                " const el = d.querySelector('input[role=combobox]'); if (el && document.activeElement !== el) el.focus(); })()"
            )
            browser.insert_text("NVIDIA Brev")
            try:
                browser.wait_for(option_shown, timeout=8, what="the 'NVIDIA Brev' option")
                break
            except TimeoutError:
                log(f"connection form: no 'NVIDIA Brev' option after attempt {attempt}; retrying")
                browser.evaluate(
                    "(() => { const el = document.querySelector('[role=dialog] input[role=combobox]');"
                    " if (el) { const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;"
                    " set.call(el, ''); el.dispatchEvent(new Event('input', {bubbles: true})); el.blur(); } })()"
                )
                time.sleep(1)
        else:
            raise AssertionError("the connection type select never offered 'NVIDIA Brev'")
        browser.press("Enter", "Enter", 13)
        browser.wait_for(
            "/Brev API token/.test(document.querySelector('[role=dialog]').innerText)",
            timeout=30,
            what="the brev standard fields (password relabelled 'Brev API token')",
        )
        # connection id, so the pictures read like a real form being filled in
        browser.evaluate(
            """(() => {
                 const d = document.querySelector('[role=dialog]');
                 const input = d.querySelector('input[name=connection_id]') || d.querySelector('input');
                 const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
                 setter.call(input, 'brev_default');
                 input.dispatchEvent(new Event('input', {bubbles: true}));
               })()"""
        )
        time.sleep(0.5)
        standard = browser.evaluate("document.querySelector('[role=dialog]').innerText")
        shown = [label for label in ("Host", "Login", "Port", "Schema") if f"\n{label}\n" in f"\n{standard}\n"]
        if shown:
            raise AssertionError(f"fields the provider hides are shown: {shown}")
        browser.screenshot(ARTIFACTS / "brev-connection-form-standard.png")
        # the provider's own fields sit in the collapsed "Extra Fields" accordion item: open it with a real click
        rect = browser.evaluate(
            """(() => {
                 const d = document.querySelector('[role=dialog]');
                 const b = [...d.querySelectorAll('button')].find(b => b.innerText.trim() === 'Extra Fields');
                 if (!b) return null;
                 b.scrollIntoView({block: 'center'});
                 const r = b.getBoundingClientRect();
                 return {x: r.x + r.width / 2, y: r.y + r.height / 2};
               })()"""
        )
        if not rect:
            raise AssertionError("no 'Extra Fields' section in the form")
        browser.click_at(rect["x"], rect["y"])
        expected = ["API key", "Org id", "Org name", "brev CLI path", "Cloud credential id", "Workspace group id"]
        browser.wait_for(
            "(() => { const t = document.querySelector('[role=dialog]').innerText; return "
            + " && ".join(f"t.includes({json.dumps(label)})" for label in expected)
            + "; })()",
            timeout=30,
            what=f"the brev extra fields {expected}",
        )
        # make the viewport tall enough for the whole dialog (once the accordion finished opening), then the picture
        time.sleep(1.5)
        height = browser.evaluate(
            "(() => { const r = document.querySelector('[role=dialog]').getBoundingClientRect();"
            " return Math.ceil(r.height + 2 * Math.max(r.top, 40)); })()"
        )
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            width=browser.width,
            height=max(browser.height, int(height or 0)),
            deviceScaleFactor=1,
            mobile=False,
        )
        browser.evaluate("window.scrollTo(0, 0)")
        time.sleep(1.0)
        text = browser.evaluate("document.querySelector('[role=dialog]').innerText")
        (ARTIFACTS / "brev-connection-form.txt").write_text(standard + "\n----- Extra Fields opened -----\n" + text)
        browser.screenshot(shot)
        expected = ["Brev API token", *expected]
        size = shot.stat().st_size
        if size < 10_000:
            raise AssertionError(f"screenshot suspiciously small ({size} bytes)")
        return f"{shot.relative_to(ROOT)} ({size // 1024} KiB); form shows {', '.join(expected)}"

    # ------------------------------------------------------------------------------------------ DAG runs
    def _observer(self, dag_id: str):
        seen = self.observed.setdefault(dag_id, {})

        def on_poll(run: dict[str, Any], tis: list[dict[str, Any]]) -> None:
            for ti in tis:
                seen.setdefault(ti["task_id"], set()).add(str(ti.get("state")))

        return on_poll

    def run_and_wait(self, key: str, conf: dict[str, Any] | None = None) -> dict[str, Any]:
        dag_id = DAGS[key]
        from client import AirflowClient

        client = AirflowClient(self.api_url)
        client.unpause(dag_id)
        run = client.trigger(dag_id, conf=conf)
        run_id = run["dag_run_id"]
        log(f"triggered {dag_id} via REST: {run_id}")
        t0 = time.monotonic()
        final = client.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT, on_poll=self._observer(dag_id))
        elapsed = time.monotonic() - t0
        self.timings[f"{key}_run_seconds"] = round(elapsed, 1)
        tis = client.task_instances(dag_id, run_id)
        states = {ti["task_id"]: ti["state"] for ti in tis}
        self.save_task_logs(client, dag_id, run_id, tis)
        # Runs the scheduler made on its own once the DAG was unpaused (the flagship's weekly timetable runs its
        # latest slot): wait for them too, nothing may still be creating instances when the deployment stops.
        others = []
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            others = [r for r in client.dag_runs(dag_id) if r["dag_run_id"] != run_id]
            if all(r["state"] in ("success", "failed") for r in others) or time.monotonic() > deadline:
                break
            time.sleep(1)
        for other in others:
            self.save_task_logs(client, dag_id, other["dag_run_id"], client.task_instances(dag_id, other["dag_run_id"]))
        return {
            "dag_id": dag_id,
            "run_id": run_id,
            "state": final["state"],
            "states": states,
            "tis": tis,
            "seconds": elapsed,
            "others": [(r["dag_run_id"], r.get("run_type"), r["state"]) for r in others],
        }

    def save_task_logs(self, client: Any, dag_id: str, run_id: str, tis: list[dict[str, Any]]) -> None:
        out = ARTIFACTS / "task-logs" / dag_id
        out.mkdir(parents=True, exist_ok=True)
        for ti in tis:
            for try_number in range(1, int(ti.get("try_number") or 0) + 1):
                try:
                    text = client.task_log(dag_id, run_id, ti["task_id"], try_number)
                except Exception as err:
                    text = f"<could not fetch: {err}>"
                (out / f"{ti['task_id']}.try{try_number}.log").write_text(text)

    def check_lifecycle(self, result: dict[str, Any]) -> str:
        if result["state"] != "success":
            raise AssertionError(f"run {result['state']}: {result['states']}")
        bad = {t: s for t, s in result["states"].items() if s != "success"}
        if bad:
            raise AssertionError(f"tasks not successful: {bad}")
        if any(o[2] != "success" for o in result["others"]):
            raise AssertionError(f"other runs: {result['others']}")
        return f"success in {result['seconds']:.0f} s: {result['states']}"

    def check_flagship(self, result: dict[str, Any]) -> str:
        if result["state"] != "success":
            raise AssertionError(f"run {result['state']}: {result['states']}")
        bad = [o for o in result["others"] if o[2] != "success"]
        if bad:
            raise AssertionError(f"other runs of the DAG did not succeed: {bad}")
        if result["states"].get("promote") != "success":
            raise AssertionError(f"promote {result['states'].get('promote')}")
        keys = [o["Key"] for o in self.s3.list_objects_v2(Bucket=self.bucket, Prefix="runs/").get("Contents", [])]
        if not any(k.endswith("/train/status.json") for k in keys):
            raise AssertionError(f"no train/status.json uploaded under s3://{self.bucket}/runs/: {keys[:20]}")
        others = "".join(f"; also {o[0]} ({o[1]}): {o[2]}" for o in result["others"])
        return (
            f"success in {result['seconds']:.0f} s: {len(result['states'])} tasks; {len(keys)} result objects in "
            f"s3://{self.bucket}/runs/{others}"
        )

    def check_secret_printed(self, result: dict[str, Any]) -> str:
        """A secret printed by the remote commands is in no task log, trigger log file or XCom; ``key=***`` is."""
        from client import AirflowClient

        if result["state"] != "success":
            raise AssertionError(f"run {result['state']}: {result['states']}")
        client = AirflowClient(self.api_url)
        dag_id, run_id = result["dag_id"], result["run_id"]
        folder = self.workdir / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
        trigger_logs = sorted(folder.glob("task_id=deferred/attempt=*.log.trigger.*.log"))
        if not trigger_logs:
            raise AssertionError("the deferred task left no trigger log file")
        texts = {f"{p.parent.name}/{p.name}": p.read_text(errors="replace") for p in trigger_logs}
        for task_id in ("detached", "foreground", "deferred"):
            texts[f"{task_id} task log"] = client.task_log(dag_id, run_id, task_id, 1)
            value = client.get(
                f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
            )
            texts[f"{task_id} XCom"] = json.dumps(value)
            if "key=***" not in texts[f"{task_id} XCom"]:
                raise AssertionError(f"{task_id}: the XCom lacks the redacted line: {value}")
        leaked = [name for name, text in texts.items() if PRINTED_SECRET in text]
        if leaked:
            raise AssertionError(f"the printed secret appears in {leaked}")
        if not any("key=***" in text for name, text in texts.items() if "trigger" in name):
            raise AssertionError("the trigger log does not show the redacted line")
        return f"secret in none of {len(texts)} logs/XComs (task logs, {len(trigger_logs)} trigger log file(s))"

    def check_deferred(self, results: list[dict[str, Any]]) -> str:
        """Every deferrable task deferred on its worker and its trigger ran in our triggerer process."""
        from client import AirflowClient

        client = AirflowClient(self.api_url)
        triggerer_jobs = {int(j["id"]) for j in client.get("/api/v2/jobs", params={"job_type": "TriggererJob"})["jobs"]}
        if not triggerer_jobs:
            raise AssertionError("no TriggererJob in the database")
        if len(results) < 2:
            raise AssertionError("the lifecycle and flagship runs did not both finish")
        notes = []
        for result in results:
            dag_id, run_id = result["dag_id"], result["run_id"]
            for task_id in DEFERRABLE_TASKS.get(dag_id, []):
                ti = next(t for t in result["tis"] if t["task_id"] == task_id)
                try_number = int(ti["try_number"])
                text = client.task_log(dag_id, run_id, task_id, try_number)
                needed = [
                    "Pausing task as DEFERRED",
                    f"{task_id}/-1/{try_number} (ID",
                    "Trigger fired event",
                    "trigger completed",
                ]
                missing = [n for n in needed if n not in text]
                if missing:
                    raise AssertionError(f"{dag_id}.{task_id}: the task log lacks {missing}")
                folder = (
                    self.workdir / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
                )
                trigger_logs = sorted(folder.glob(f"attempt={try_number}.log.trigger.*.log"))
                jobs = {int(p.name.rsplit(".", 2)[-2]) for p in trigger_logs}
                if not jobs or not jobs <= triggerer_jobs:
                    raise AssertionError(
                        f"{dag_id}.{task_id}: trigger log files {[p.name for p in trigger_logs]} do not name the "
                        f"triggerer job(s) {sorted(triggerer_jobs)}"
                    )
                seen = self.observed.get(dag_id, {}).get(task_id, set())
                notes.append(f"{task_id}" + (" (deferred seen via REST)" if "deferred" in seen else ""))
        return (
            f"{len(notes)} tasks deferred on a worker, their triggers ran in TriggererJob {sorted(triggerer_jobs)} "
            f"(trigger log files) and fired: {', '.join(notes)}"
        )

    # ------------------------------------------------------------------------------- SIGKILL on a worker
    def _task_process(self, ti_id: str) -> Any:
        import psutil

        title = f"airflow worker -- {ti_id}"
        for proc in psutil.process_iter(["pid", "cmdline"]):
            cmd = " ".join(proc.info.get("cmdline") or [])
            if title in cmd:
                return proc
        return None

    def _worker_of(self, proc: Any) -> str:
        for parent in proc.parents():
            for name, pid in self.worker_pids.items():
                if parent.pid == pid:
                    return name
        return "?"

    def _kill_run(self, label: str) -> dict[str, Any]:
        """Trigger ``deploy_brev_worker_kill`` and return helpers bound to that run and its instance."""
        from client import AirflowClient

        dag_id = DAGS["worker_kill"]
        client = AirflowClient(self.api_url)
        gate = self.workdir / f"worker-kill-{label}.gate"
        known = {i["id"] for i in self.sim.instances()}
        client.unpause(dag_id)
        run_id = client.trigger(dag_id, conf={"gate": str(gate)})["dag_run_id"]
        log(f"[{label}] triggered {dag_id} via REST: {run_id}")
        observe = self._observer(dag_id)
        instance: dict[str, str] = {}  # this run's instance (other runs have instances of their own)

        def launches() -> list[dict[str, Any]]:
            if not instance:
                for inst in self.sim.instances():
                    if inst["name"].startswith("afbrev-deploy-brev-worker-kill-") and inst["id"] not in known:
                        instance.update(name=inst["name"], id=inst["id"])
            if not instance:
                return []
            return [r for r in self.sim.runs(instance["id"]) if "BREV_JOB_LAUNCHED" in r.get("command", "")]

        def counter_text() -> str:
            launches()
            if not instance:
                return ""
            path = self.sim.root / "instances" / instance["id"] / "home" / "counter"
            return path.read_text() if path.exists() else ""

        def wait_for_try(try_number: int, timeout: float) -> tuple[dict[str, Any], Any]:
            """Until try ``try_number`` runs, its task process exists and the remote job is running."""
            deadline = time.monotonic() + timeout
            while True:
                ti = client.task_instance(dag_id, run_id, "long_job")
                observe(client.dag_run(dag_id, run_id), client.task_instances(dag_id, run_id))
                if (
                    int(ti["try_number"]) == try_number
                    and ti["state"] == "running"
                    and counter_text() == "started\n"
                    and len(launches()) == 1
                ):
                    proc = self._task_process(ti["id"])
                    if proc is not None:
                        return ti, proc
                if ti["state"] in ("failed", "upstream_failed", "success") or int(ti["try_number"]) > try_number:
                    raise AssertionError(
                        f"long_job is {ti['state']} at try {ti['try_number']}, expected try {try_number} running"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"try {try_number} of long_job not running with its job (state {ti['state']}, "
                        f"try {ti['try_number']})"
                    )
                time.sleep(0.5)

        def finish(t0: float, kills: list[dict[str, Any]]) -> dict[str, Any]:
            time.sleep(3)  # the last try follows the still-running job for a while...
            gate.touch()  # ...then the job finishes
            final = client.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT, on_poll=observe)
            tis = client.task_instances(dag_id, run_id)
            self.save_task_logs(client, dag_id, run_id, tis)
            tries = client.tries(dag_id, run_id, "long_job")
            last_try = max(int(t["try_number"]) for t in tries)
            self.timings[f"worker_kill_{label}_run_seconds"] = round(time.monotonic() - t0, 1)
            return {
                "label": label,
                "dag_id": dag_id,
                "run_id": run_id,
                "state": final["state"],
                "states": {t["task_id"]: t["state"] for t in tis},
                "tries": [(t["try_number"], t["state"]) for t in tries],
                "kills": kills,
                "counter": counter_text(),
                "launches": len(launches()),
                "logs": {n: client.task_log(dag_id, run_id, "long_job", n) for n in range(2, last_try + 1)},
            }

        return {"wait_for_try": wait_for_try, "finish": finish}

    def worker_kill_scenario(self) -> dict[str, Any]:
        """SIGKILL ``long_job`` twice on its worker while the remote job runs, then let the job finish.

        Kill 1: the task process alone (its supervisor in the Celery pool process sees exit -9 and reports it).
        Kill 2: the next try's supervisor (the Celery pool process) and task process together, as the OOM killer
        would: Celery reports the lost pool process (WorkerLostError) and the scheduler fails the try.
        Each retry must re-attach to the remote job that is still running: one launch, one ``started`` line.
        """
        import psutil

        t0 = time.monotonic()
        run = self._kill_run("task")
        kills = []
        _, proc = run["wait_for_try"](1, 240)
        time.sleep(2)  # a few polls of the job in the task log
        worker = self._worker_of(proc)
        log(f"[task] kill 1: SIGKILL task process {proc.pid} of try 1 on {worker}")
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        _, proc = run["wait_for_try"](2, 180)
        kills.append(
            {"try": 1, "what": "task process", "worker": worker, "next_try_after": time.monotonic() - killed_at,
             "next_worker": self._worker_of(proc)}
        )  # fmt: skip
        log(f"[task] try 2 running on {kills[-1]['next_worker']} {kills[-1]['next_try_after']:.0f} s after kill 1")
        time.sleep(2)
        supervisor = proc.parent()
        worker = self._worker_of(proc)
        log(
            f"[task] kill 2: SIGKILL supervisor {supervisor.pid} ({' '.join(supervisor.cmdline())[:40]}...) and task "
            f"process {proc.pid} of try 2 on {worker}"
        )
        for victim in (supervisor, proc):
            with contextlib.suppress(psutil.NoSuchProcess):
                victim.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        _, proc = run["wait_for_try"](3, 240)
        kills.append(
            {"try": 2, "what": "supervisor + task process", "worker": worker,
             "next_try_after": time.monotonic() - killed_at, "next_worker": self._worker_of(proc)}
        )  # fmt: skip
        log(f"[task] try 3 running on {kills[-1]['next_worker']} {kills[-1]['next_try_after']:.0f} s after kill 2")
        return run["finish"](t0, kills)

    def worker_lost_scenario(self) -> dict[str, Any]:
        """SIGKILL a whole Celery worker (main process, pool, supervisor, task) while ``long_job`` runs on it.

        Nothing is left to report the try: the scheduler finds it by its missing heartbeats
        (``[scheduler] task_instance_heartbeat_timeout``, 30 s here) and the retry runs on the other worker,
        re-attaching to the remote job. Run after the other DAGs finished: it takes their tasks on that worker down.
        """
        import psutil

        t0 = time.monotonic()
        run = self._kill_run("worker")
        _, proc = run["wait_for_try"](1, 240)
        time.sleep(2)
        worker = self._worker_of(proc)
        main = psutil.Process(self.worker_pids[worker])
        victims = [main, *main.children(recursive=True)]
        log(
            f"[worker] SIGKILL {worker}: {len(victims)} processes (celery main {main.pid}, pool, supervisor, task {proc.pid})"
        )
        for victim in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                victim.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        self.procs[worker].wait(timeout=10)
        self.lost_workers.add(worker)
        _, proc = run["wait_for_try"](2, 90 + float(self.env["AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT"]))
        kills = [
            {"try": 1, "what": f"whole worker {worker}", "worker": worker, "next_try_after": time.monotonic() - killed_at,
             "next_worker": self._worker_of(proc)}
        ]  # fmt: skip
        log(f"[worker] try 2 running on {kills[-1]['next_worker']} {kills[-1]['next_try_after']:.0f} s after the kill")
        result = run["finish"](t0, kills)
        scheduler_log = (self.logs / "scheduler.log").read_text(errors="replace")
        result["heartbeat_lines"] = [
            line[:300]
            for line in scheduler_log.splitlines()
            if "without a heartbeat" in line and "long_job" in line and result["run_id"] in line
        ]
        return result

    def check_worker_kill(self, result: dict[str, Any], expected_tries: int) -> str:
        if result["state"] != "success":
            raise AssertionError(f"run {result['state']}: {result['states']}, tries {result['tries']}")
        if [t[0] for t in result["tries"]] != list(range(1, expected_tries + 1)):
            raise AssertionError(f"expected tries 1..{expected_tries}: {result['tries']}")
        if result["counter"] != "started\n":
            raise AssertionError(f"the remote command ran {result['counter'].count('started')} times")
        if result["launches"] != 1:
            raise AssertionError(f"{result['launches']} job launches")
        for try_number, text in result["logs"].items():
            if "Launched job" in text:
                raise AssertionError(f"try {try_number} launched the job again")
            if "Re-attaching to job" not in text:
                raise AssertionError(f"try {try_number}'s log does not show it re-attached to the running job")
        if "job-done" not in result["logs"][expected_tries]:
            raise AssertionError("the job's output did not reach the last try's log")
        if result["label"] == "worker" and not result.get("heartbeat_lines"):
            raise AssertionError("the scheduler log does not show the lost try detected by its missing heartbeats")
        for kill in result["kills"]:
            if kill["next_worker"] in self.lost_workers:
                raise AssertionError(f"the retry ran on a worker that was killed: {kill}")
        kills = "; ".join(
            f"{k['what']} of try {k['try']} killed on {k['worker']} -> try {k['try'] + 1} on {k['next_worker']} "
            f"{k['next_try_after']:.0f} s later"
            for k in result["kills"]
        )
        how = "; the scheduler found it by its missing heartbeats" if result.get("heartbeat_lines") else ""
        return f"{kills}{how}; every retry re-attached; 1 launch, the command ran once; tries {result['tries']}"

    def check_no_instances(self) -> str:
        deadline = time.monotonic() + 60
        while self.sim.instances() and time.monotonic() < deadline:
            time.sleep(0.5)
        left = self.sim.instances()
        if left:
            raise AssertionError(f"{len(left)} instance(s) left: {[i['name'] for i in left]}")
        from client import AirflowClient

        client = AirflowClient(self.api_url)
        runs = sum(len(client.dag_runs(dag_id)) for dag_id in DAGS.values())
        calls = self.sim.calls()
        names = [
            c["argv"][1]
            for c in calls
            if c.get("argv", [])[:1] == ["create"] and len(c["argv"]) > 1 and not c["argv"][1].startswith("-")
        ]
        if len(names) != runs or len(set(names)) != len(names):  # one instance per DAG run, never a second one
            raise AssertionError(f"{len(names)} brev create calls for {runs} DAG runs: {names}")
        return f"0 instances left; {len(names)} brev create calls for {runs} DAG runs, {len(calls)} brev invocations in all"

    def workers_used(self) -> dict[str, int]:
        """Task workloads each Celery worker executed (from its log)."""
        used = {}
        for n in ("worker1", "worker2"):
            text = (self.logs / f"{n}.log").read_text(errors="replace")
            used[n] = text.count("Executing workload in Celery")
        return used

    # ------------------------------------------------------------------------------------------ teardown
    def stop_all(self) -> list[str]:
        """SIGTERM every component's process group, then SIGKILL what is left; returns stragglers."""
        # a second SIGTERM for stragglers: once the dag-processor went on parsing after the first one
        for grace in (15, 10):
            for proc in self.procs.values():
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            for proc in self.procs.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        stragglers = []
        for name, proc in self.procs.items():
            if proc.poll() is None:
                stragglers.append(name)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # also reaches forked children left in the group
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        if self.sim is not None:
            self.sim.kill_all()
        for fh in self._log_files:
            fh.close()
        return stragglers


def run_stage(args: argparse.Namespace) -> int:
    dep = Deployment(args)
    checks = dep.checks
    interrupted = False

    def on_signal(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    try:
        dep.pick_redis_db()
        dep.create_database()
        log(f"PostgreSQL database {dep.database}, Redis db {dep.redis_db}, API on {dep.api_url}")
        dep.prepare()
        dep.start_s3()
        dep.start_airflow()
        checks.run("provider installed from the wheel", dep.check_wheel)
        checks.run("connection form metadata lists brev", dep.check_hook_meta)

        results: dict[str, Any] = {}

        def scenario(key: str, fn: Any, *a: Any) -> None:
            try:
                results[key] = fn(*a)
            except Exception as err:
                results[key] = err
                traceback.print_exc()

        t0 = time.monotonic()
        threads = [
            threading.Thread(target=scenario, args=("lifecycle", dep.run_and_wait, "lifecycle")),
            threading.Thread(
                target=scenario,
                args=(
                    "flagship",
                    dep.run_and_wait,
                    "flagship",
                    {"bucket": dep.bucket, "dataset_prefix": DATASET_PREFIX},
                ),
            ),
            threading.Thread(target=scenario, args=("worker_kill", dep.worker_kill_scenario)),
            threading.Thread(target=scenario, args=("secret", dep.run_and_wait, "secret")),
        ]
        for t in threads:
            t.start()
        checks.run("headless Chromium screenshot of the brev add-connection form", dep.check_screenshot)
        for t in threads:
            t.join()
        dep.timings["dag_runs_wall_seconds"] = round(time.monotonic() - t0, 1)

        def from_result(key: str, check: Any) -> Any:
            value = results.get(key)
            if isinstance(value, Exception) or value is None:
                raise AssertionError(f"{type(value).__name__}: {value}")
            return check(value)

        checks.run("lifecycle DAG triggered via REST succeeds", from_result, "lifecycle", dep.check_lifecycle)
        checks.run("flagship DAG triggered via REST succeeds", from_result, "flagship", dep.check_flagship)
        checks.run(
            "a printed secret_env value is redacted in task logs, trigger logs and XCom",
            from_result,
            "secret",
            dep.check_secret_printed,
        )
        ok_runs = [results[k] for k in ("lifecycle", "flagship") if isinstance(results.get(k), dict)]
        checks.run("deferrable tasks went through the triggerer", dep.check_deferred, ok_runs)
        checks.run(
            "task SIGKILLed on a worker is retried and finishes without a second launch",
            from_result,
            "worker_kill",
            lambda r: dep.check_worker_kill(r, 3),
        )
        # last: it takes a whole worker down
        scenario("worker_lost", dep.worker_lost_scenario)
        checks.run(
            "whole worker SIGKILLed: heartbeat timeout, retried on the other worker, no second launch",
            from_result,
            "worker_lost",
            lambda r: dep.check_worker_kill(r, 2),
        )
        checks.run("0 instances left", dep.check_no_instances)
        used = dep.workers_used()
        dep.timings["workloads_per_worker"] = used  # type: ignore[assignment]
        log(f"task workloads executed per Celery worker: {used}")
        if args.keep_running:
            log(f"--keep-running: API at {dep.api_url}; Ctrl-C to stop")
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
    except KeyboardInterrupt as err:
        interrupted = True
        checks.record("deployment test finished", False, f"interrupted ({err})")
    except Exception as err:
        checks.record("deployment set-up", False, f"{type(err).__name__}: {err}")
        traceback.print_exc()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        t0 = time.monotonic()
        stragglers = dep.stop_all()
        time.sleep(1)
        left = marked_pids(dep.test_id)
        described = []
        for pid in left:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")[:120]
                described.append(f"{pid} {cmdline}")
            except OSError:
                continue
        checks.record(
            "every process stopped",
            not described,
            f"{len(dep.procs)} components stopped in {time.monotonic() - t0:.0f} s"
            + (f" (SIGKILL needed for {stragglers})" if stragglers else "")
            + (f"; still running: {described}" if described else ""),
        )
        # keep Airflow's own task logs with the artifacts
        logs_dir = dep.workdir / "airflow" / "logs"
        if logs_dir.exists():
            shutil.copytree(logs_dir, ARTIFACTS / "airflow-logs", dirs_exist_ok=True)
        if dep.state.get("database"):
            try:
                dep.drop_database()
                checks.record("database dropped", True, dep.database)
            except Exception as err:
                checks.record("database dropped", False, str(err))
        with contextlib.suppress(Exception):
            dep.flush_redis_db()
    dep.timings["total_seconds"] = round(time.time() - float(args.started_at), 1)
    summary = {"checks": checks.results, "timings": dep.timings, "api_url": dep.api_url, "database": dep.database}
    (ARTIFACTS / "summary.json").write_text(json.dumps(summary, indent=1))
    passed = sum(1 for r in checks.results if r["ok"])
    failed = len(checks.failed)
    print()
    banner(
        [f"{'PASS' if r['ok'] else 'FAIL'}  {r['check']}" for r in checks.results]
        + [""]
        + [f"{k}: {v}" for k, v in dep.timings.items()],
        char="=",
    )
    print(f"checks: {passed} passed, {failed} failed", flush=True)
    return 130 if interrupted else (1 if failed else 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="stage")
    boot = sub.add_parser("bootstrap")
    for p in (parser, boot):
        p.add_argument("--uv", default=str(ROOT / ".tools" / "bin" / "uv"))
        p.add_argument("--keep-workdir", action="store_true", help="do not delete the temporary work directory")
        p.add_argument("--keep-running", action="store_true", help="after the checks, keep the deployment up")
    run = sub.add_parser("run")
    run.add_argument("--workdir", required=True)
    run.add_argument("--wheel", required=True)
    run.add_argument("--test-id", required=True)
    run.add_argument("--install-seconds", default="0")
    run.add_argument("--started-at", default=str(time.time()))
    run.add_argument("--keep-running", action="store_true")
    args = parser.parse_args(argv)
    if args.stage == "run":
        return run_stage(args)
    return bootstrap(args)


if __name__ == "__main__":
    sys.exit(main())
