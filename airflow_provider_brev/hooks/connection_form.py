"""The connection form of the provider's hooks, from one source: the ``connection-types`` of
:func:`~airflow_provider_brev.get_provider_info.get_provider_info`.

Airflow 3.2+ builds the form from that declarative metadata (``ui-field-behaviour`` and ``conn-fields``); older
versions call the hook's ``get_ui_field_behaviour()`` and ``get_connection_form_widgets()``. Both are derived here
from the metadata, so the hidden fields, labels and placeholders, and the extra fields with their labels, are the
same whichever Airflow draws the form.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_brev.get_provider_info import get_provider_info


def connection_type_info(conn_type: str) -> dict[str, Any]:
    """The ``connection-types`` entry of ``conn_type``."""
    for entry in get_provider_info()["connection-types"]:
        if entry["connection-type"] == conn_type:
            return dict(entry)
    raise KeyError(f"No connection type {conn_type!r} in get_provider_info()")


def ui_field_behaviour(conn_type: str) -> dict[str, Any]:
    """``get_ui_field_behaviour()`` of ``conn_type``: the metadata's ``ui-field-behaviour`` with the hook API's
    key names (``hidden_fields``, ``relabeling``, ``placeholders``)."""
    behaviour = connection_type_info(conn_type).get("ui-field-behaviour", {})
    return {
        "hidden_fields": list(behaviour.get("hidden-fields", [])),
        "relabeling": dict(behaviour.get("relabeling", {})),
        "placeholders": dict(behaviour.get("placeholders", {})),
    }


def form_widgets(conn_type: str) -> dict[str, Any]:
    """``get_connection_form_widgets()`` of ``conn_type``: one wtforms field per ``conn-fields`` entry (a password
    field where the schema says ``format: password``), labelled and described as there; ``{}`` where Flask
    AppBuilder is not installed (Airflow 3.2+ reads the metadata itself)."""
    try:
        from flask_appbuilder.fieldwidgets import BS3PasswordFieldWidget, BS3TextFieldWidget
        from flask_babel import lazy_gettext
        from wtforms import PasswordField, StringField
    except ImportError:
        return {}
    widgets: dict[str, Any] = {}
    for name, field in connection_type_info(conn_type).get("conn-fields", {}).items():
        secret = field.get("schema", {}).get("format") == "password"
        kind, widget = (PasswordField, BS3PasswordFieldWidget) if secret else (StringField, BS3TextFieldWidget)
        widgets[name] = kind(
            lazy_gettext(field["label"]), description=lazy_gettext(field.get("description", "")), widget=widget()
        )
    return widgets


__all__ = ["connection_type_info", "form_widgets", "ui_field_behaviour"]
