"""1 GiB of remote output through the exec path: peak RSS growth and throughput of the following process.

Runs in its own fresh interpreter (``run.py`` starts it) so the RSS baseline is clean. A detached job on a
ready simulated instance prints exactly 1 GiB of 100-character lines; this process follows it the way
``BrevExecOperator`` does (``BrevHook.poll_job`` chunks of the default size, fed to a ``LogLineAssembler``,
the next poll at once while more log is waiting, ``--poll-interval`` only when the job has produced nothing
new). Lines are counted, never stored. RSS is sampled every 10 ms with psutil and cross-checked with
``ru_maxrss``; growth is measured from the RSS right before the launch (hook imported, CLI capabilities and
login already done by a warm-up call).

    python benchmarks/bench_log_stream.py --out result.json [--bytes 1073741824]
"""

from __future__ import annotations

import argparse
import gc
import resource
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import WORK_DIR, progress, quiet_provider_logs, use_simulator, write_json

GIB = 1024**3
LINE = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-brev-airflow-log-stream-benchmark-xxx"
assert len(LINE) == 100, len(LINE)


class RssSampler(threading.Thread):
    def __init__(self, interval: float = 0.01) -> None:
        super().__init__(daemon=True, name="rss-sampler")
        import psutil

        self.proc = psutil.Process()
        self.interval = interval
        self.peak = self.proc.memory_info().rss
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            self._stop_event.wait(self.interval)

    def stop(self) -> int:
        self._stop_event.set()
        self.join(timeout=5)
        self.peak = max(self.peak, self.proc.memory_info().rss)
        return self.peak


def maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--bytes", type=int, default=GIB)
    parser.add_argument("--poll-interval", type=float, default=0.5)
    args = parser.parse_args()
    total = args.bytes

    from airflow_provider_brev.testing.simulator import BrevSimulator

    base = WORK_DIR / "log-stream"
    shutil.rmtree(base, ignore_errors=True)
    sim = BrevSimulator(base / "sim").install()
    use_simulator(sim, base / "home")
    quiet_provider_logs()

    import psutil

    from airflow_provider_brev.core.jobs.remote import DEFAULT_MAX_BYTES, LogLineAssembler, RemoteJob
    from airflow_provider_brev.hooks.brev import BrevHook

    name = "bench-logs"
    sim.create_instance_directly(name, ready=True)
    hook = BrevHook(log_cli_output=False)
    hook.run_command(name, "true", log_output=False)  # warm-up: capabilities, login, first exec
    job = RemoteJob(job_id="bench-log-stream-1gib")
    command = f"yes {LINE} 2>/dev/null | head -c {total}"

    gc.collect()
    rss_before = psutil.Process().memory_info().rss
    maxrss_before = maxrss_bytes()
    sampler = RssSampler()
    sampler.start()
    progress(f"log stream: streaming {total / 2**20:.0f} MiB in chunks of {DEFAULT_MAX_BYTES / 2**20:.0f} MiB")

    t_launch = time.monotonic()
    launch = hook.launch_job(name, job, command)
    t_first_poll = time.monotonic()
    assembler = LogLineAssembler()
    offset = 0
    polls = 0
    chunk_bytes = 0
    lines = 0
    line_bytes = 0
    last_report = time.monotonic()
    poll: Any = None
    while True:
        poll = hook.poll_job(name, job, offset=offset)
        polls += 1
        chunk_bytes += len(poll.chunk)
        for line in assembler.feed(poll.chunk):
            lines += 1
            line_bytes += len(line.encode("utf-8")) + 1
        offset = poll.next_offset
        if poll.complete:
            tail = assembler.flush()
            lines += len(tail)
            line_bytes += sum(len(line.encode("utf-8")) for line in tail)  # the last line has no newline
            break
        if offset >= poll.log_size:
            time.sleep(args.poll_interval)
        if time.monotonic() - last_report > 10:
            last_report = time.monotonic()
            progress(f"log stream: {offset / 2**20:.0f} MiB read after {last_report - t_launch:.0f} s")
    t_done = time.monotonic()
    peak_sampled = sampler.stop()
    maxrss_after = maxrss_bytes()
    peak = max(peak_sampled, maxrss_after if maxrss_after > maxrss_before else 0)

    expected_full_lines, expected_tail = divmod(total, len(LINE) + 1)
    result = {
        "bytes_requested": total,
        "bytes_received": chunk_bytes,
        "log_size_reported": poll.log_size,
        "bytes_exact": chunk_bytes == total and poll.log_size == total and line_bytes == total,
        "line_bytes": line_bytes,
        "lines": lines,
        "lines_expected": expected_full_lines + (1 if expected_tail else 0),
        "job_state": poll.state,
        "job_exit_code": poll.exit_code,
        "launched": launch.launched,
        "polls": polls,
        "chunk_bytes_max": DEFAULT_MAX_BYTES,
        "poll_interval_when_idle_s": args.poll_interval,
        "seconds": round(t_done - t_launch, 2),
        "seconds_first_poll_to_done": round(t_done - t_first_poll, 2),
        "throughput_mb_s": round(total / 2**20 / (t_done - t_launch), 1),
        "rss_before_mb": round(rss_before / 2**20, 1),
        "peak_rss_mb": round(peak / 2**20, 1),
        "peak_rss_growth_mb": round((peak - rss_before) / 2**20, 1),
        "maxrss_before_mb": round(maxrss_before / 2**20, 1),
        "maxrss_after_mb": round(maxrss_after / 2**20, 1),
        "units": "MB = MiB (2**20 bytes)",
    }
    hook.cleanup_job(name, job)
    sim.kill_all()
    shutil.rmtree(base, ignore_errors=True)
    write_json(Path(args.out), result)
    progress(
        f"log stream: {result['throughput_mb_s']} MB/s, peak RSS growth {result['peak_rss_growth_mb']} MB, "
        f"exact bytes: {result['bytes_exact']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
