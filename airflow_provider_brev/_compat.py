"""The few Airflow imports whose location differs between Airflow 3.x releases, in one place."""

from __future__ import annotations

from typing import Any

import airflow

try:  # Airflow 3.x Task SDK
    from airflow.sdk import BaseHook, BaseOperator, BaseOperatorLink, BaseSensorOperator
except ImportError:  # pragma: no cover - Airflow < 3 is not supported (see pyproject)
    raise

try:
    from airflow.sdk.exceptions import AirflowNotFoundException
except ImportError:  # pragma: no cover
    from airflow.exceptions import AirflowNotFoundException  # type: ignore[no-redef]

try:
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
except ImportError:  # pragma: no cover - 3.0 kept them in airflow.exceptions
    from airflow.exceptions import AirflowFailException, AirflowSkipException  # type: ignore[no-redef]


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
    """Register ``value`` with Airflow's secrets masker (no-op for empty values)."""
    if not value:
        return
    masker: Any
    try:
        from airflow.sdk.log import mask_secret as sdk_masker

        masker = sdk_masker
    except ImportError:  # pragma: no cover - older 3.0 layouts
        from airflow.sdk.execution_time.secrets_masker import mask_secret as legacy_masker

        masker = legacy_masker
    masker(value)


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` setting."""
    try:
        from airflow.sdk.configuration import conf
    except ImportError:  # pragma: no cover
        from airflow.configuration import conf  # type: ignore[no-redef]
    return conf.getboolean("operators", "default_deferrable", fallback=False)


__all__ = [
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowSkipException",
    "BaseHook",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "default_deferrable",
    "mask_secret",
]
