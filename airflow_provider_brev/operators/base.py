"""The bases of this provider's operators: the kill's cleanup every operator shares, and the Brev connection."""

from __future__ import annotations

import threading

from airflow_provider_brev._compat import BaseOperator
from airflow_provider_brev.utils.mixins import BrevConnectionParams

#: How long Airflow's SIGTERM handler waits for the kill cleanup before the interrupted code resumes: long enough
#: for a whole cleanup (a CLI call is bounded to 4 s), so the interrupted code normally sees everything done (as
#: when ``on_kill`` ran the cleanup itself); only a cleanup stuck behind the interrupted code's log lock waits it out.
ON_KILL_HANDLER_WAIT = 6.0
#: How long the end of ``execute`` waits for it (Airflow SIGKILLs a killed task about 5 s after SIGTERM).
ON_KILL_CLEANUP_WAIT = 10.0


class ProviderBaseOperator(BaseOperator):
    """What every operator of this provider shares, on any platform: a kill's cleanup in a thread of its own.

    No connection: a Brev operator adds ``brev_conn_id`` (:class:`BrevBaseOperator`), a Lepton step
    ``lepton_conn_id`` (:class:`~airflow_provider_brev.operators.lepton.LeptonStepOperator`).
    """

    ui_color = "#76b900"  # NVIDIA green

    #: The thread running :meth:`_cleanup_on_kill` once the task was killed.
    _kill_cleanup: threading.Thread | None = None
    #: Set (on the task's main thread) as soon as the task is killed: the still-running execute must not recover
    #: (re-create) anything, nor launch.
    _killed: bool = False

    def on_kill(self) -> None:
        """Undo what killing this task leaves behind (:meth:`_cleanup_on_kill`), in a thread of its own.

        Airflow calls ``on_kill`` from its SIGTERM handler, on the task's main thread, which the signal may have
        interrupted in the middle of writing a log line, holding the log handler's lock (structlog's is not
        reentrant). A log line written by the handler itself would then wait for that lock forever and the task
        would hang until it is SIGKILLed, its cleanup never done. So the handler only starts the cleanup thread
        and waits for it (up to :data:`ON_KILL_HANDLER_WAIT`); the interrupted code resumes (releasing the lock)
        and waits for the rest before the task ends (:meth:`wait_for_kill_cleanup`, called by ``execute``).
        """
        self._killed = True
        if self._kill_cleanup is not None:
            return
        self._kill_cleanup = threading.Thread(
            target=self._cleanup_on_kill_logged, name=f"on_kill {self.task_id}", daemon=True
        )
        self._kill_cleanup.start()
        self._kill_cleanup.join(ON_KILL_HANDLER_WAIT)

    def _cleanup_on_kill(self) -> None:
        """What killing this task must undo (subclasses; the default is nothing). Runs in its own thread."""

    def _cleanup_on_kill_logged(self) -> None:
        try:
            self._cleanup_on_kill()
        except Exception:
            self.log.exception("Cleaning up after the kill failed.")

    def wait_for_kill_cleanup(self) -> None:
        """Wait (bounded) for the cleanup the kill started: the task process ends with ``os._exit``, which would
        cut the thread short. A no-op unless the task was killed."""
        thread = self._kill_cleanup
        if thread is not None and thread is not threading.current_thread():
            thread.join(ON_KILL_CLEANUP_WAIT)


class BrevBaseOperator(BrevConnectionParams, ProviderBaseOperator):
    """Base of every Brev operator: the Brev connection (:class:`~airflow_provider_brev.utils.mixins.BrevConnectionParams`:
    ``brev_conn_id``, templated, and a lazily built ``hook``) and the kill's cleanup."""
