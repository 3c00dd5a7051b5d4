"""What the Brev page reads: the provider's records in Airflow's metadata database, and ``brev ls`` (I/O only).

:func:`read_facts` reads, for the DAGs a user may read, the provider's XCom values (``brev_instance``, ``brev_cost``,
``brev_lifetime_cost``, ``brev_run_cost``), their DAG runs, the states of the task instances that recorded an
instance, and every warm-reuse record (the Variables ``brev_warm_instance.<id>``); :class:`LiveListing` runs
``brev ls`` through the connection ``[brev] ui_conn_id``, at most once per :data:`LIVE_SECONDS`. Nothing here
writes anything. What the page makes of it is :mod:`airflow_provider_brev.core.ui`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.instances.warm_pool import ReuseEntry
from airflow_provider_brev.core.instances.warm_pool_records import RECORD_PREFIX
from airflow_provider_brev.core.ui.facts import PageFacts, Pushed, RunFacts
from airflow_provider_brev.core.ui.history import XCOM_RUN_COST

if TYPE_CHECKING:
    from collections.abc import Collection

    from airflow_provider_brev.core.protocol.output import BrevInstance

log = logging.getLogger(__name__)

#: The XCom keys the page reads.
PAGE_KEYS = ("brev_instance", "brev_cost", "brev_lifetime_cost", XCOM_RUN_COST)
#: How long one ``brev ls`` answers for (seconds): reloading the page does not run it again before that.
LIVE_SECONDS = 30.0


def _epoch(value: Any) -> float | None:
    return value.timestamp() if value is not None and hasattr(value, "timestamp") else None


def read_pushed(session: Any, readable: Collection[str] | None) -> list[Pushed]:
    """The provider's XCom values of the DAGs in ``readable`` (``None``: every DAG)."""
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    query = select(XComModel).where(XComModel.key.in_(PAGE_KEYS))
    if readable is not None:
        query = query.where(XComModel.dag_id.in_(sorted(readable)))
    pushed = []
    for row in session.scalars(query.order_by(XComModel.timestamp)):
        try:
            value = XComModel.deserialize_value(row)
        except Exception:  # a value the page cannot read is left out, never fatal
            continue
        pushed.append(Pushed(row.dag_id, row.run_id, row.task_id, row.map_index, row.key, value))
    return pushed


def read_runs(session: Any, dag_ids: Collection[str]) -> dict[tuple[str, str], RunFacts]:
    """The runs of ``dag_ids``: state and when each ran."""
    from airflow.models.dagrun import DagRun
    from sqlalchemy import select

    if not dag_ids:
        return {}
    query = select(DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.start_date, DagRun.run_after)
    runs = {}
    for dag_id, run_id, state, start, after in session.execute(query.where(DagRun.dag_id.in_(sorted(dag_ids)))):
        at = _epoch(start) or _epoch(after) or 0.0
        runs[(dag_id, run_id)] = RunFacts(dag_id, run_id, str(state or ""), at)
    return runs


def read_task_states(
    session: Any, tasks: Collection[tuple[str, str, str, int]]
) -> dict[tuple[str, str, str, int], str]:
    """The state of each task instance in ``tasks`` (``(dag_id, run_id, task_id, map_index)``)."""
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    wanted = set(tasks)
    if not wanted:
        return {}
    query = select(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index)
    # by DAG and task id (a few of each), not by run: a list of every run id could pass a database's bind limit
    query = query.add_columns(TaskInstance.state).where(
        TaskInstance.dag_id.in_(sorted({t[0] for t in wanted})),
        TaskInstance.task_id.in_(sorted({t[2] for t in wanted})),
    )
    return {(d, r, t, m): str(state or "") for d, r, t, m, state in session.execute(query) if (d, r, t, m) in wanted}


def read_warm(session: Any) -> list[ReuseEntry]:
    """Every warm-reuse record (one Variable per instance); a Variable that is not one is left out."""
    from airflow.models.variable import Variable
    from sqlalchemy import select

    entries = []
    for variable in session.scalars(select(Variable).where(Variable.key.startswith(RECORD_PREFIX, autoescape=True))):
        try:
            entry = ReuseEntry.from_dict(json.loads(variable.val or "null"))
        except (ValueError, TypeError):
            continue
        if entry is not None:
            entries.append(entry)
    return entries


def read_facts(readable: Collection[str] | None, *, live: dict[str, BrevInstance] | None, live_note: str) -> PageFacts:
    """Everything the page is shaped from, for the DAGs in ``readable`` (``None``: every DAG).

    :param readable: the DAG ids the user may read.
    :param live: what ``brev ls`` lists, by id (``None``: not available).
    :param live_note: where the live state comes from, or why there is none.
    """
    from airflow.utils.session import create_session

    with create_session() as session:
        pushed = read_pushed(session, readable)
        runs = read_runs(session, {item.dag_id for item in pushed})
        recorded = {(p.dag_id, p.run_id, p.task_id, p.map_index) for p in pushed if p.key == "brev_instance"}
        states = read_task_states(session, recorded)
        warm = read_warm(session)
    return PageFacts(pushed, runs, states, warm, live, live_note, time.time())


class LiveListing:
    """``brev ls`` as the API server runs it for the page: at most once per :data:`LIVE_SECONDS`, never raising.

    :param conn_id: the Brev connection (``""``: no live state).
    """

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._value: tuple[dict[str, BrevInstance] | None, str] = (None, "")

    def get(self) -> tuple[dict[str, BrevInstance] | None, str]:
        """The instances ``brev ls`` lists by id (``None`` when it could not run) and a note saying which."""
        if not self.conn_id:
            return None, "not shown ([brev] ui_conn_id is empty): the states are what the records say."
        with self._lock:  # one `brev ls` at a time; the others wait for its answer
            if time.monotonic() - self._at >= LIVE_SECONDS:
                self._value = self._list()
                self._at = time.monotonic()
            return self._value

    def _list(self) -> tuple[dict[str, BrevInstance] | None, str]:
        # Connections in the metadata database too, as `airflow brev instances` reads them: outside a task the Task
        # SDK's lookup reads only environment variables and secrets backends otherwise.
        os.environ.setdefault("_AIRFLOW_PROCESS_CONTEXT", "server")
        try:
            from airflow_provider_brev.hooks.brev import BrevHook

            listed = BrevHook(brev_conn_id=self.conn_id, log_cli_output=False).list_instances()
        except Exception as err:  # the page without live state is still worth showing
            log.info("The Brev page could not list the instances through %s: %s", self.conn_id, err)
            return None, (
                f"not available: the API server could not run `brev ls` through the connection {self.conn_id} "
                f"({type(err).__name__}); the states are what the records say."
            )
        when = time.strftime("%H:%M:%S UTC", time.gmtime())
        return {i.id: i for i in listed if i.id}, f"`brev ls` through {self.conn_id} at {when}."
