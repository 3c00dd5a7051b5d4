"""The rules of following many jobs in one triggerer at bounded cost (sans I/O).

A triggerer may follow a hundred jobs at once (a mapped sweep); each followed on its own would keep one ``brev exec``
alive and start a new one every few seconds. Instead, in one event loop:

* **one poll per instance**: the triggers following jobs on the same instance share one ``brev exec`` that reports
  every one of them (:func:`~airflow_provider_brev.core.jobs.scripts.build_poll_many_command`); :func:`plan_shared_poll`
  decides how long it waits on the instance, and how many log bytes each job gets of the poll's
  :data:`SHARED_POLL_BYTES` (a job with more log waiting polls again at once);
* **a cap on concurrent processes** (``[brev] triggerer_max_processes``, default :data:`DEFAULT_MAX_PROCESSES`):
  a poll that waits on its instance holds one of those processes, so polls wait there only while the instances
  polled leave a quarter of the cap free (:func:`may_hold`); beyond, they wait on the event loop and run as short
  calls (an end is then seen up to one poll interval late);
* **spread first polls**: a trigger's first poll waits :func:`first_poll_delay`, a share of the poll interval, so a
  hundred triggers created at once do not start a hundred processes at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_brev.core.jobs.handle import DEFAULT_MAX_BYTES

if TYPE_CHECKING:
    from collections.abc import Sequence

#: Concurrent ``brev`` processes one triggerer's event loop starts at most, by default.
DEFAULT_MAX_PROCESSES = 16
#: Processes of the cap that polls waiting on their instance leave free, at least.
RESERVED_PROCESSES = 2
#: Log bytes one shared poll fetches for all its jobs together.
SHARED_POLL_BYTES = DEFAULT_MAX_BYTES
#: Each job of a shared poll gets at least this many log bytes.
MIN_JOB_BYTES = 64 * 1024
#: The longest a first poll is put off, in seconds, whatever the poll interval.
MAX_FIRST_POLL_DELAY = 10.0


@dataclass(frozen=True)
class SharedPoll:
    """How one shared poll of an instance runs.

    :param hold: seconds the poll waits on the instance for one of its jobs to end.
    :param sleep_first: seconds to wait on the event loop before the poll starts (when it may not hold a process).
    :param max_bytes: the log bytes each job gets, in the order of the requests.
    """

    hold: float
    sleep_first: float
    max_bytes: tuple[int, ...]


def may_hold(instances_polling: int, process_cap: int) -> bool:
    """Whether a poll may wait on its instance (holding one process): while the instances being polled leave a quarter
    of the cap (at least :data:`RESERVED_PROCESSES`) free for everything else -- launches, kills, readiness checks
    (``process_cap`` 0: no cap)."""
    return process_cap <= 0 or instances_polling <= process_cap - max(RESERVED_PROCESSES, process_cap // 4)


def plan_shared_poll(
    waits: Sequence[float], max_bytes: Sequence[int], *, instances_polling: int, process_cap: int
) -> SharedPoll:
    """The plan of one shared poll for the requests of its jobs.

    :param waits: how long each job's follower asked the poll to wait for its job's end (the shortest wins: a
        follower with more log waiting asks for none).
    :param max_bytes: the log bytes each follower asked for.
    :param instances_polling: instances with a shared poll in this event loop now (this one included).
    :param process_cap: the loop's cap on concurrent processes (0: none).
    :raises ValueError: no request, or the two sequences differ in length.
    """
    if not waits or len(waits) != len(max_bytes):
        raise ValueError("plan_shared_poll needs one wait and one size per request")
    wait = max(0.0, min(float(value) for value in waits))
    share = max(MIN_JOB_BYTES, SHARED_POLL_BYTES // len(waits))
    sizes = tuple(max(1, min(int(size), share)) for size in max_bytes)
    if may_hold(instances_polling, process_cap):
        return SharedPoll(hold=wait, sleep_first=0.0, max_bytes=sizes)
    return SharedPoll(hold=0.0, sleep_first=wait, max_bytes=sizes)


def first_poll_delay(poll_interval: float, fraction: float, *, until_deadline: float | None = None) -> float:
    """How long a trigger puts off its first poll: ``fraction`` (drawn uniformly from [0, 1) by the caller) of the
    poll interval, at most :data:`MAX_FIRST_POLL_DELAY`, and never past the deadline.

    :param until_deadline: seconds left until the job's deadline (``None``: no deadline).
    """
    delay = min(max(0.0, float(poll_interval)), MAX_FIRST_POLL_DELAY) * min(max(float(fraction), 0.0), 1.0)
    if until_deadline is not None:
        delay = min(delay, max(0.0, until_deadline))
    return delay
