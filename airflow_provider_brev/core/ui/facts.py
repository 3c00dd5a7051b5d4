"""What the Brev page is shaped from: plain values read from Airflow's metadata database (no Airflow types).

The I/O half (:mod:`airflow_provider_brev.ui.sources`) turns XCom rows, DAG runs, task instances and the warm-pool
Variables into these; everything the page decides is made from them by :mod:`.fleet` and :mod:`.history`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_brev.core.instances.warm_pool import ReuseEntry
    from airflow_provider_brev.core.protocol.output import BrevInstance

#: Task instance states after which a task's own (ephemeral) instance has been released by its end.
FINISHED_TASK_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
#: DAG run states after which nothing of the run runs any more.
FINISHED_RUN_STATES = frozenset({"success", "failed"})


@dataclass(frozen=True)
class Pushed:
    """One XCom value a task pushed.

    :param dag_id: its DAG.
    :param run_id: its DAG run.
    :param task_id: the task.
    :param map_index: its map index (``-1``: not mapped).
    :param key: the XCom key.
    :param value: the value (JSON).
    """

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    key: str
    value: Any


@dataclass(frozen=True)
class RunFacts:
    """A DAG run, as the page needs it.

    :param dag_id: its DAG.
    :param run_id: the run.
    :param state: its state (``running``, ``success`` ...).
    :param at: when it ran (its start, else its ``run_after``; epoch seconds).
    """

    dag_id: str
    run_id: str
    state: str
    at: float


@dataclass(frozen=True)
class PageFacts:
    """Everything the page is shaped from.

    :param pushed: the provider's XCom values (``brev_instance``, ``brev_cost``, ``brev_lifetime_cost``,
        ``brev_run_cost``) of the DAGs the user may read.
    :param runs: those DAG runs, by ``(dag_id, run_id)``.
    :param task_states: the state of each task instance that recorded an instance, by
        ``(dag_id, run_id, task_id, map_index)``.
    :param warm: every warm-reuse record (:class:`~airflow_provider_brev.core.instances.warm_pool.ReuseEntry`).
    :param live: what ``brev ls`` lists, by id (``None``: the API server could not run it; :attr:`live_note` says
        why).
    :param live_note: where the live state comes from, or why there is none.
    :param now: when the page is made (epoch seconds).
    """

    pushed: list[Pushed]
    runs: dict[tuple[str, str], RunFacts]
    task_states: dict[tuple[str, str, str, int], str]
    warm: list[ReuseEntry]
    live: dict[str, BrevInstance] | None
    live_note: str
    now: float
