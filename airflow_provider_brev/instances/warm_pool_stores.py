"""Where the warm pool's records are read and written: Airflow Variables and the creators' XCom, as a task reaches them
(the Execution API: :class:`TaskVariables`, :class:`TaskXComs`) and as the ``airflow brev`` commands do (the metadata
database: :class:`MetadataVariables`, :class:`MetadataXComs`). :class:`~airflow_provider_brev.instances.warm_pool.
ReuseRegistry` takes one of each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.instances.records import XCOM_INSTANCE_RECORD

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_provider_brev.core.instances.warm_pool_records import TaskRef


class TaskVariables:
    """Airflow Variables as a task reads and writes them (``airflow.sdk.Variable``, through the Execution API)."""

    def get_json(self, key: str) -> Any:
        from airflow.sdk import Variable  # task-side only

        return Variable.get(key, default=None, deserialize_json=True)

    def set_json(self, key: str, value: Any, description: str) -> None:
        from airflow.sdk import Variable

        Variable.set(key, value, description=description, serialize_json=True)

    def delete(self, key: str) -> None:
        from airflow.sdk import Variable

        Variable.delete(key)

    def keys(self, prefix: str) -> list[str] | None:
        """The keys starting with ``prefix`` (Airflow 3.3+); ``None`` where a task cannot list Variables."""
        from airflow.sdk import Variable

        listing = getattr(Variable, "keys", None)
        return list(listing(prefix=prefix)) if callable(listing) else None


#: How long a write to a locked SQLite metadata database is retried (another process holds its write lock).
SQLITE_LOCKED_RETRY_SECONDS = 60.0


def _sqlite_locked(error: BaseException) -> bool:
    return "database is locked" in str(error)


def retry_while_locked(write: Callable[[], object]) -> None:
    """Run ``write``, again while SQLite says the database is locked: a development metadata database has one writer
    at a time, and some Airflow versions (3.0 on SQLAlchemy 1.4) fail the second at once instead of waiting, which
    would lose a record. Any other error, and one that outlasts :data:`SQLITE_LOCKED_RETRY_SECONDS`, is raised."""
    from sqlalchemy.exc import OperationalError
    from tenacity import retry, retry_if_exception, stop_after_delay, wait_random_exponential

    locked = retry_if_exception(lambda error: isinstance(error, OperationalError) and _sqlite_locked(error))
    waiting = wait_random_exponential(multiplier=0.05, max=1.0)
    retry(retry=locked, wait=waiting, stop=stop_after_delay(SQLITE_LOCKED_RETRY_SECONDS), reraise=True)(write)()


class MetadataVariables:
    """Airflow Variables read and written in the metadata database (its model, ``airflow.models.variable``), for
    code that is not a task: the provider's ``airflow brev`` commands, like Airflow's own ``airflow variables``.
    A write that meets a locked SQLite database is retried (:func:`retry_while_locked`)."""

    def get_json(self, key: str) -> Any:
        from airflow.models.variable import Variable

        return Variable.get(key, default_var=None, deserialize_json=True)

    def set_json(self, key: str, value: Any, description: str) -> None:
        from airflow.models.variable import Variable

        retry_while_locked(lambda: Variable.set(key, value, description=description, serialize_json=True))

    def delete(self, key: str) -> None:
        from airflow.models.variable import Variable

        retry_while_locked(lambda: Variable.delete(key))

    def keys(self, prefix: str) -> list[str] | None:
        from airflow.models.variable import Variable as Stored  # the table (``airflow variables list`` reads it)
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            return list(session.scalars(select(Stored.key).where(Stored.key.startswith(prefix, autoescape=True))))


class TaskXComs:
    """What a task pushed to XCom ``brev_instance``, read as a task reads another DAG run's XCom (the Execution API).

    :param ti: the reading task's instance (default: the running task's, ``get_current_context()``).
    """

    def __init__(self, ti: Any = None) -> None:
        self.ti = ti

    def value(self, task: TaskRef) -> Any:
        ti = self.ti
        if ti is None:
            from airflow.sdk import get_current_context

            ti = get_current_context()["ti"]
        return ti.xcom_pull(
            task_ids=task.task_id,
            dag_id=task.dag_id,
            run_id=task.run_id,
            key=XCOM_INSTANCE_RECORD,
            map_indexes=task.map_index,
        )


class MetadataXComs:
    """What a task pushed to XCom ``brev_instance``, read from the metadata database (the ``airflow brev`` commands)."""

    def value(self, task: TaskRef) -> Any:
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        query = select(XComModel).where(
            XComModel.dag_id == task.dag_id,
            XComModel.run_id == task.run_id,
            XComModel.task_id == task.task_id,
            XComModel.map_index == task.map_index,
            XComModel.key == XCOM_INSTANCE_RECORD,
        )
        with create_session() as session:
            row = session.scalars(query).first()
            return XComModel.deserialize_value(row) if row is not None else None
