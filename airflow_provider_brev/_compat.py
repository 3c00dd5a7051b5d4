"""The few Airflow imports whose location differs between Airflow 3.x releases, in one place."""

from __future__ import annotations

from typing import Any

import airflow

# Airflow 3.0+ Task SDK (Airflow < 3 is not supported, see pyproject)
from airflow.sdk import BaseOperator, BaseOperatorLink, BaseSensorOperator

from airflow_provider_brev.core.secrets import secret_fragments

try:  # Airflow 3.1+: the hook base class moved into the Task SDK
    from airflow.sdk import BaseHook
except ImportError:  # pragma: no cover - Airflow 3.0 kept it in core
    from airflow.hooks.base import BaseHook  # type: ignore[no-redef,assignment,attr-defined]

try:
    from airflow.sdk.exceptions import AirflowNotFoundException
except ImportError:  # pragma: no cover
    from airflow.exceptions import AirflowNotFoundException  # type: ignore[no-redef]

try:
    from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException, AirflowSkipException
except ImportError:  # pragma: no cover - 3.0 kept them in airflow.exceptions
    from airflow.exceptions import (  # type: ignore[no-redef]
        AirflowFailException,
        AirflowRescheduleException,
        AirflowSkipException,
    )


def _parse_version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


AIRFLOW_VERSION = _parse_version(airflow.__version__)
AIRFLOW_V_3_1_PLUS = AIRFLOW_VERSION >= (3, 1, 0)
AIRFLOW_V_3_3_PLUS = AIRFLOW_VERSION >= (3, 3, 0)


def mask_secret(value: str | None) -> None:
    """Register ``value`` with Airflow's secrets masker (no-op for empty values), and each line of a multi-line
    value that the instance-side filter redacts too
    (:func:`~airflow_provider_brev.core.secrets.secret_fragments`): log lines carry one line of it at a time."""
    if not value:
        return
    masker: Any
    try:
        from airflow.sdk.log import mask_secret as sdk_masker

        masker = sdk_masker
    except ImportError:  # pragma: no cover - older 3.0 layouts
        from airflow.sdk.execution_time.secrets_masker import mask_secret as legacy_masker

        masker = legacy_masker
    for secret in dict.fromkeys([value, *secret_fragments(value)]):
        masker(secret)


try:  # Airflow's configuration (already loaded by airflow.sdk)
    from airflow.sdk.configuration import conf
except ImportError:  # pragma: no cover - Airflow 3.0 layouts without it
    from airflow.configuration import conf  # type: ignore[no-redef]


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` setting."""
    return bool(conf.getboolean("operators", "default_deferrable", fallback=False))


#: Default of ``[brev] deferral_settle_seconds``.
DEFAULT_DEFERRAL_SETTLE_SECONDS = 10.0


def deferral_settle_seconds() -> float:
    """``[brev] deferral_settle_seconds``: the least time between a deferral and the trigger's event (see
    :class:`~airflow_provider_brev.triggers.base.ProviderBaseTrigger`); never negative."""
    value = conf.getfloat("brev", "deferral_settle_seconds", fallback=DEFAULT_DEFERRAL_SETTLE_SECONDS)
    return max(0.0, float(value))


def triggerer_max_processes() -> int:
    """``[brev] triggerer_max_processes``: concurrent ``brev`` processes one triggerer event loop starts at most (the
    triggers of this provider share them; ``0``: no cap); never negative."""
    from airflow_provider_brev.core.jobs.shared_polls import DEFAULT_MAX_PROCESSES

    return max(0, conf.getint("brev", "triggerer_max_processes", fallback=DEFAULT_MAX_PROCESSES))


# Names only DAG files need, resolved on first access so importing this module (every hook, operator and
# trigger does) does not pay for the timetable modules. First location that has the name wins.
_LAZY_IMPORTS: dict[str, tuple[str, ...]] = {
    # Airflow 3.1+: airflow.sdk; Airflow 3.0: core's airflow.timetables.*
    "AssetOrTimeSchedule": ("airflow.sdk", "airflow.timetables.assets"),
    "CronTriggerTimetable": ("airflow.sdk", "airflow.timetables.trigger"),
}


def __getattr__(name: str) -> Any:
    locations = _LAZY_IMPORTS.get(name)
    if locations is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    for module_name in locations:
        value = getattr(importlib.import_module(module_name), name, None)
        if value is not None:
            globals()[name] = value
            return value
    raise ImportError(f"{name} is not available in Airflow {airflow.__version__} (looked in {', '.join(locations)})")


__all__ = [  # plus the lazy names in _LAZY_IMPORTS
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowRescheduleException",
    "AirflowSkipException",
    "BaseHook",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "conf",
    "default_deferrable",
    "deferral_settle_seconds",
    "mask_secret",
]
