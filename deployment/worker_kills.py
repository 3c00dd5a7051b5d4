"""The SIGKILL scenarios of ``make deployment-test`` (see deployment/README.md).

``deploy_brev_worker_kill`` (deployment/dags/deploy_worker_kill.py) runs a detached ``BrevExecOperator`` that waits
for a gate file; these scenarios kill the task process, its supervisor or a whole Celery worker while the remote
job runs and check that every retry re-attaches to that one job.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any

from airflow_api import state_of
from processes import DAGS, RUN_TIMEOUT, log
from scenarios import Scenarios


class KillScenarios(Scenarios):
    """:class:`scenarios.Scenarios` plus the worker-kill runs."""

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
            for name, pid in self.dep.worker_pids.items():
                if parent.pid == pid:
                    return name
        return "?"

    def _kill_run(self, label: str) -> dict[str, Any]:
        """Trigger ``deploy_brev_worker_kill`` and return helpers bound to that run and its instance."""
        dag_id = DAGS["worker_kill"]
        api = self.api()
        gate = self.dep.workdir / f"worker-kill-{label}.gate"
        known = {i["id"] for i in self.dep.sim.instances()}
        api.unpause(dag_id)
        run_id = api.trigger(dag_id, conf={"gate": str(gate)})
        log(f"[{label}] triggered {dag_id} via REST: {run_id}")
        observe = self.observer(dag_id)
        instance: dict[str, str] = {}  # this run's instance (other runs have instances of their own)

        def launches() -> list[dict[str, Any]]:
            if not instance:
                for inst in self.dep.sim.instances():
                    if inst["name"].startswith("afbrev-deploy-brev-worker-kill-") and inst["id"] not in known:
                        instance.update(name=inst["name"], id=inst["id"])
            if not instance:
                return []
            return [r for r in self.dep.sim.runs(instance["id"]) if "BREV_JOB_LAUNCHED" in r.get("command", "")]

        def counter_text() -> str:
            launches()
            if not instance:
                return ""
            path = self.dep.sim.root / "instances" / instance["id"] / "home" / "counter"
            return path.read_text() if path.exists() else ""

        def wait_for_try(try_number: int, timeout: float) -> tuple[Any, Any]:
            """Until try ``try_number`` runs, its task process exists and it follows the one running remote job.

            "Following" is read from the try's own log file: "Launched job" for try 1, "Re-attaching to job" for
            a retry. Killing a retry before it re-attached would test nothing.
            """
            log_file = self.task_log_file(dag_id, run_id, "long_job") / f"attempt={try_number}.log"
            following = "Launched job" if try_number == 1 else "Re-attaching to job"
            deadline = time.monotonic() + timeout
            while True:
                ti = api.task_instance(dag_id, run_id, "long_job")
                observe(api.dag_run(dag_id, run_id), api.task_instances(dag_id, run_id))
                state = state_of(ti)
                if (
                    int(ti.try_number) == try_number
                    and state == "running"
                    and counter_text() == "started\n"
                    and len(launches()) == 1
                    and log_file.exists()
                    and following in log_file.read_text(errors="replace")
                ):
                    proc = self._task_process(str(ti.id))
                    if proc is not None:
                        return ti, proc
                if state in ("failed", "upstream_failed", "success") or int(ti.try_number) > try_number:
                    raise AssertionError(
                        f"long_job is {state} at try {ti.try_number}, expected try {try_number} running"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"try {try_number} of long_job not running with its job (state {state}, try {ti.try_number})"
                    )
                time.sleep(0.5)

        def finish(t0: float, kills: list[dict[str, Any]]) -> dict[str, Any]:
            gate.touch()  # the last try follows the still-running job: now let the job finish
            final = api.wait_run(dag_id, run_id, timeout=RUN_TIMEOUT, on_poll=observe)
            tis = api.task_instances(dag_id, run_id)
            self.save_task_logs(api, dag_id, run_id, tis)
            tries = api.tries(dag_id, run_id, "long_job")
            last_try = max(int(t.try_number) for t in tries)
            self.dep.timings[f"worker_kill_{label}_run_seconds"] = round(time.monotonic() - t0, 1)
            return {
                "label": label,
                "dag_id": dag_id,
                "run_id": run_id,
                "state": final,
                "states": {t.task_id: state_of(t) for t in tis},
                "tries": [(t.try_number, state_of(t)) for t in tries],
                "kills": kills,
                "counter": counter_text(),
                "launches": len(launches()),
                "logs": {n: api.task_log(dag_id, run_id, "long_job", n) for n in range(2, last_try + 1)},
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
        worker = self._worker_of(proc)
        main = psutil.Process(self.dep.worker_pids[worker])
        victims = [main, *main.children(recursive=True)]
        log(
            f"[worker] SIGKILL {worker}: {len(victims)} processes (celery main {main.pid}, pool, supervisor, task {proc.pid})"
        )
        for victim in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                victim.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        self.dep.procs[worker].wait(timeout=10)
        self.dep.lost_workers.add(worker)
        _, proc = run["wait_for_try"](
            2, 90 + float(self.dep.env["AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT"])
        )
        kills = [
            {"try": 1, "what": f"whole worker {worker}", "worker": worker, "next_try_after": time.monotonic() - killed_at,
             "next_worker": self._worker_of(proc)}
        ]  # fmt: skip
        log(f"[worker] try 2 running on {kills[-1]['next_worker']} {kills[-1]['next_try_after']:.0f} s after the kill")
        result = run["finish"](t0, kills)
        scheduler_log = (self.dep.logs / "scheduler.log").read_text(errors="replace")
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
            if kill["next_worker"] in self.dep.lost_workers:
                raise AssertionError(f"the retry ran on a worker that was killed: {kill}")
        kills = "; ".join(
            f"{k['what']} of try {k['try']} killed on {k['worker']} -> try {k['try'] + 1} on {k['next_worker']} "
            f"{k['next_try_after']:.0f} s later"
            for k in result["kills"]
        )
        how = "; the scheduler found it by its missing heartbeats" if result.get("heartbeat_lines") else ""
        return f"{kills}{how}; every retry re-attached; 1 launch, the command ran once; tries {result['tries']}"
