"""The provider's agent in a Lepton job's container (standard library only; run as ``python3 -c <this file>``).

It reads its plan from the environment variable ``AIRFLOW_LEPTON_PLAN`` (zlib-compressed JSON in base64, from a
workspace secret: the presigned URLs and secret values in it never appear in the job spec), then:

1. downloads every input object (presigned GETs) to its path below the working directory, checking its size;
2. writes the workload's files (a TAO spec) and runs the command (``bash -c``) in its own session, its output on
   stdout -- the job's log -- and in a local file, each line with the plan's ``redact`` fragments replaced by ``***``
   (in bytes, in the plan's order: the fragments of the secret values that
   ``airflow_provider_brev.core.secrets.redaction_fragments`` computed on the worker, the rule of Brev steps);
3. uploads the files of every output directory that are new or changed (presigned POST policies limited to the
   output's key prefix) every ``sync_interval`` seconds while the command runs, and once more when it ended;
4. runs the workload's report script (TAO: what the action left behind) and prints one result line,
   ``AIRFLOW_LEPTON_RESULT <base64 JSON>`` (core/lepton/report.py reads it), then exits with the command's code.

A SIGTERM (the job was stopped) is passed on to the command; its outputs are still uploaded. No URL is ever printed.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
import zlib

RESULT_MARKER = "AIRFLOW_LEPTON_RESULT "
PLAN_ENV = "AIRFLOW_LEPTON_PLAN"
STATE_DIR = ".airflow-lepton"


def say(message: str) -> None:
    print(f"[airflow-lepton] {message}", flush=True)


def fetch(url: str, path: str, size: int, attempts: int = 3) -> None:
    """Download ``url`` to ``path`` (through a temporary file), checking its size; retries."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    for attempt in range(1, attempts + 1):
        part = f"{path}.part"
        try:
            with urllib.request.urlopen(url, timeout=300) as answer, open(part, "wb") as out:
                while chunk := answer.read(1 << 20):
                    out.write(chunk)
            if os.path.getsize(part) != size:
                raise OSError(f"got {os.path.getsize(part)} bytes, expected {size}")
            os.replace(part, path)
            return
        except OSError as err:
            if attempt == attempts:
                raise OSError(f"download of {path} failed: {type(err).__name__}: {getattr(err, 'code', '')}") from None
            time.sleep(attempt)


def post(form: dict, key: str, path: str) -> None:
    """Upload ``path`` as ``key`` with a presigned POST policy (multipart/form-data)."""
    boundary = uuid.uuid4().hex
    fields = {**form["fields"], "key": key}
    head = "".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in fields.items()
    )
    name = os.path.basename(path).replace('"', "_")
    head += f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
    head += "Content-Type: application/octet-stream\r\n\r\n"
    with open(path, "rb") as handle:
        data = head.encode() + handle.read() + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(form["url"], data=data, method="POST")
    request.add_header("Content-Type", f"multipart/form-data; boundary={boundary}")
    with urllib.request.urlopen(request, timeout=600) as answer:
        if answer.status >= 300:
            raise OSError(f"HTTP {answer.status}")


class Outputs:
    """The output directories: which files changed since they were uploaded, and their upload."""

    def __init__(self, outputs: list) -> None:
        self.outputs = outputs
        self.sent: dict = {}
        self.uploaded = 0
        self.failures: list = []
        self.lock = threading.Lock()

    def sync(self) -> None:
        with self.lock:
            failures = []
            for output in self.outputs:
                top = output["dir"]
                for folder, dirs, files in os.walk(top):
                    dirs[:] = [d for d in dirs if not d.startswith(".airflow")]
                    for file in sorted(files):
                        path = os.path.join(folder, file)
                        if os.path.islink(path) or not os.path.isfile(path) or file.endswith(".part"):
                            continue
                        stat = os.stat(path)
                        stamp = (stat.st_size, stat.st_mtime_ns)
                        if self.sent.get(path) == stamp:
                            continue
                        rel = os.path.relpath(path, top).replace(os.sep, "/")
                        try:
                            post(output["post"], output["prefix"] + rel, path)
                        except OSError as err:
                            failures.append(rel)
                            say(f"upload of {rel} failed ({type(err).__name__} {getattr(err, 'code', '')})")
                            continue
                        self.sent[path] = stamp
                        self.uploaded += 1
            self.failures = failures


def main() -> int:
    plan = json.loads(zlib.decompress(base64.b64decode(os.environ.pop(PLAN_ENV))))
    secrets = dict(plan.get("secret_env") or {})
    hidden = [fragment.encode("utf-8") for fragment in plan.get("redact") or []]  # in the order to replace them

    def redact(raw: bytes) -> bytes:
        for fragment in hidden:
            raw = raw.replace(fragment, b"***")
        return raw

    os.makedirs(STATE_DIR, exist_ok=True)
    inputs = plan.get("inputs") or []
    started = time.time()
    for item in inputs:
        fetch(item["url"], item["path"], int(item["size"]))
    if inputs:
        say(f"downloaded {len(inputs)} input file(s) in {time.time() - started:.1f} s")
    for path, text in (plan.get("files") or {}).items():
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    for output in plan.get("outputs") or []:
        os.makedirs(output["dir"], exist_ok=True)
    outputs = Outputs(plan.get("outputs") or [])
    env = {**os.environ, **(plan.get("env") or {}), **secrets}
    log_path = os.path.join(STATE_DIR, "job.log")
    proc = subprocess.Popen(
        ["bash", "-c", plan["command"]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )

    def stop(signum: int, _frame: object) -> None:
        say("stopping: the job was stopped")
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    done = threading.Event()
    interval = float(plan.get("sync_interval") or 0)

    def periodic() -> None:
        while interval > 0 and not done.wait(interval):
            outputs.sync()

    syncer = threading.Thread(target=periodic, daemon=True)
    syncer.start()
    assert proc.stdout is not None
    with open(log_path, "w", encoding="utf-8") as log:
        for raw in iter(proc.stdout.readline, b""):
            line = redact(raw.rstrip(b"\n")).decode("utf-8", "replace")
            print(line, flush=True)
            log.write(line + "\n")
    code = proc.wait()
    code = code if code >= 0 else 128 - code
    done.set()
    syncer.join()
    outputs.sync()
    report = []
    if plan.get("report"):
        ran = subprocess.run(
            ["bash", "-c", plan["report"]],
            capture_output=True,
            env={**os.environ, "HOME": os.getcwd(), "AIRFLOW_LEPTON_LOG": log_path},
            check=False,
        )
        report = [redact(raw).decode("utf-8", "replace") for raw in ran.stdout.splitlines()]
    result = {
        "exit_code": code,
        "downloaded": len(inputs),
        "uploaded": outputs.uploaded,
        "upload_failures": outputs.failures,
        "report": report,
    }
    print(RESULT_MARKER + base64.b64encode(json.dumps(result).encode()).decode(), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
