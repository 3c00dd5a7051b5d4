"""Validation of trigger events handed back to ``execute_complete``."""

from __future__ import annotations

from typing import Any

from airflow_provider_brev.exceptions import BrevError, error_from_event

EVENT_SUCCESS = "success"
EVENT_FAILED = "failed"
EVENT_TIMEOUT = "timeout"
EVENT_ERROR = "error"


def validate_event(event: dict[str, Any] | None, *required: str) -> dict[str, Any]:
    """Return ``event`` if it is a dict with ``status``, ``message`` and ``required`` keys, else raise."""
    if not isinstance(event, dict):
        raise BrevError(f"The trigger returned no usable event ({event!r}); the deferral was lost or timed out.")
    missing = [key for key in ("status", "message", *required) if key not in event]
    if missing:
        raise BrevError(f"The trigger event lacks {', '.join(missing)}: {event!r}")
    return event


def raise_for_error_event(event: dict[str, Any], what: str) -> None:
    """Raise the trigger's typed error for an ``error`` event (the retry rule then applies as in the triggerer)."""
    if event.get("status") == EVENT_ERROR:
        raise error_from_event(f"{what}: {event.get('message')}", event.get("error_type"))
