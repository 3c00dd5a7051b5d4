"""Processes, markers, PostgreSQL and Redis for ``make deployment-test`` (see deployment/README.md).

Importable with the standard library alone (the bootstrap stage runs it with the machine's ``python3``);
psycopg2, redis, boto3 and the provider are imported inside the methods that run in the deployment venv.

:class:`Deployment` owns what the run stage starts: a PostgreSQL database, a Redis database number, the moto S3
server, the Brev simulator and the seven Airflow processes (each in its own process group, all carrying the
run's marker environment variable), and stops all of it again. The API server's auth manager has two users:
``admin`` and ``outsider``, who may not read the flagship's DAG (:mod:`airflow_provider_brev.testing.page_auth`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import process_groups

if TYPE_CHECKING:
    import argparse

    from airflow_api import AirflowApi

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
    "billing": "brev_page_billing",
}
#: DAG files the deployment runs besides dags_examples/ and deployment/dags/ (``brev_page_billing``: an instance
#: left billing, for the Brev page's fleet)
EXTRA_DAG_FILES = (ROOT / "tests" / "integration" / "dags" / "brev_page_cases.py",)
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


def tcp_ok(host: str, port: int, payload: bytes | None = None, expect: bytes | None = None) -> bool:
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
    if not tcp_ok(PG_HOST, PG_PORT):
        missing.append(f"PostgreSQL on {PG_HOST}:{PG_PORT}")
    if not tcp_ok(REDIS_HOST, REDIS_PORT, b"PING\r\n", b"+PONG"):
        missing.append(f"Redis on {REDIS_HOST}:{REDIS_PORT}")
    return missing


def marked_pids(test_id: str) -> list[int]:
    """PIDs of live processes whose environment carries this run's marker (Linux /proc)."""
    return process_groups.marked_pids(MARKER, test_id)


def describe_pid(pid: int) -> str | None:
    """``"<pid> <command line>"``, None once the process is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return f"{pid} " + fh.read().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return None


def kill_marked(test_id: str) -> list[str]:
    """SIGKILL every process of this run that is still alive; returns descriptions of what was killed."""
    killed = []
    for _ in range(5):
        pids = marked_pids(test_id)
        if not pids:
            break
        for pid in pids:
            described = describe_pid(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
            killed.append(described or str(pid))
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Deployment:
    """Everything one run of the deployment test starts, and how to stop it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(args.workdir)
        self.test_id = args.test_id
        self.logs = ARTIFACTS / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self._log_files: list[Any] = []
        self.state: dict[str, Any] = {}
        self.timings: dict[str, float] = {"install_seconds": float(args.install_seconds)}
        self.api_port = free_port()
        self.moto_port = free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.s3_url = f"http://127.0.0.1:{self.moto_port}"
        self.bucket = f"brev-deploy-{self.test_id}"
        self.database = f"airflow_deploy_{self.test_id}"
        self.redis_db: int | None = None
        self.sim: Any = None
        self.env: dict[str, str] = {}
        self.worker_pids: dict[str, int] = {}
        self.lost_workers: set[str] = set()
        self.s3: Any = None
        self.api: AirflowApi | None = None
        #: the simple auth manager's users (airflow_provider_brev.testing.page_auth): an admin, and ``outsider``,
        #: who may not read the flagship's DAG
        self.passwords = {"admin": secrets.token_hex(12), "outsider": secrets.token_hex(12)}
        self.admin = ("admin", self.passwords["admin"])
        self.dataset_objects = 0

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
        from warm_run import IMAGE_BYTES

        from airflow_provider_brev.testing import BrevSimulator
        from airflow_provider_brev.testing.page_auth import auth_environment

        home = self.workdir / "airflow"
        dags = self.workdir / "dags"
        worker_home = self.workdir / "worker-home"
        for d in (home, dags, worker_home):
            d.mkdir(parents=True, exist_ok=True)
        for src in [
            *sorted((ROOT / "dags_examples").glob("*.py")),
            *sorted((HERE / "dags").glob("*.py")),
            *EXTRA_DAG_FILES,
        ]:
            shutil.copy(src, dags / src.name)
        # Slow enough deploys that readiness waits really defer even on a loaded CI machine (the sensor checks once
        # before deferring: an instance ready by then is not waited for), fast enough for CI.
        self.sim = BrevSimulator(
            self.workdir / "brev-sim", profile="released", deploy_seconds=15.0, build_seconds=1.0, ssh_seconds=1.0
        ).install()
        self.sim.set_docker(image_bytes=IMAGE_BYTES)  # what a warm run of the flagship saves
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
                # on a loaded machine the api-server can take longer than the default 5 s to start a task; a
                # timed-out "start" that the server did carry out makes the retried call fail the task (HTTP 400)
                "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
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
        # users and passwords, no all-admins mode: a request without credentials is refused
        env.update(auth_environment(self.workdir / "passwords.json", self.passwords, [DAGS["flagship"]]))
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
        count = self.dataset_objects = upload_synthetic_vcn_dataset(client, self.bucket, DATASET_PREFIX)
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
        from airflow_api import AirflowApi

        api = self.api = AirflowApi(self.api_url, user=self.admin)
        api.wait_healthy(timeout=240)
        self.assert_running()
        # every component reports in
        deadline = time.monotonic() + 240
        while True:
            self.assert_running()
            health = api.health()
            statuses = {
                name: getattr(getattr(health, name), "status", None)
                for name in ("metadatabase", "scheduler", "triggerer", "dag_processor")
            }
            workers_ready = [n for n in ("worker1", "worker2") if f"{n}@" in self._ready_line(n)]
            if all(s == "healthy" for s in statuses.values()) and len(workers_ready) == 2:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"components not healthy: {statuses}, celery workers ready: {workers_ready}")
            time.sleep(1)
        self.timings["startup_seconds"] = round(time.monotonic() - t0, 1)
        (ARTIFACTS / "health.json").write_text(health.to_json())
        log(f"all components up in {self.timings['startup_seconds']} s: {statuses}, celery workers: {workers_ready}")
        parse_deadline = time.monotonic() + 240
        for dag_id in DAGS.values():
            api.wait_dag(dag_id, timeout=max(1.0, parse_deadline - time.monotonic()))
        log("DAGs parsed: " + ", ".join(DAGS.values()))

    def _ready_line(self, worker: str) -> str:
        """Celery's "<name>@<host> ready." line from a worker's log ('' until it is there)."""
        text = (self.logs / f"{worker}.log").read_text(errors="replace")
        return next((line for line in text.splitlines() if line.rstrip().endswith(" ready.") or " ready. " in line), "")

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
        stragglers = process_groups.stop_groups(self.procs, graces=(15, 10))
        if self.sim is not None:
            self.sim.kill_all()
        for fh in self._log_files:
            fh.close()
        return stragglers
