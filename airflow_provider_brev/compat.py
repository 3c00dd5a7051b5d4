"""Version-portable imports for DAG files: one place that works on every Airflow 3.x this provider supports.

Some names DAG authors need moved between Airflow 3.0 and 3.1 (3.0 kept the timetables in core's
``airflow.timetables.*`` and the task exceptions in ``airflow.exceptions``; 3.1+ exports them from the Task SDK).
Import them from here and the DAG file parses unchanged on both::

    from airflow_provider_brev.compat import AirflowSkipException, AssetOrTimeSchedule, CronTriggerTimetable

``dags_examples/tao_visual_changenet_retrain.py`` does. The timetables resolve on first access, so importing this
module does not load them.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_brev import _compat
from airflow_provider_brev._compat import AirflowFailException, AirflowSkipException

#: Names resolved lazily by :mod:`airflow_provider_brev._compat` (first Airflow location that has them wins).
_LAZY = ("AssetOrTimeSchedule", "CronTriggerTimetable")


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_compat, name)
    globals()[name] = value
    return value


__all__ = ["AirflowFailException", "AirflowSkipException", *_LAZY]
