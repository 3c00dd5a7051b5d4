"""Provider registration: the entry point, Airflow's schema, and what `airflow providers ...` shows."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
import types
from importlib.metadata import distribution, entry_points
from pathlib import Path

import jsonschema
import pytest

from airflow_provider_brev.get_provider_info import get_provider_info


def _provider_entry_point():
    (ep,) = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("airflow_provider_brev")]
    return ep


def test_entry_point_returns_the_dict():
    assert _provider_entry_point().load()() == get_provider_info()


def test_provider_info_validates_against_airflows_schema():
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_package_name_equals_distribution_name():
    assert get_provider_info()["package-name"] == distribution("airflow-provider-brev").metadata["Name"]


def test_every_listed_module_and_class_imports():
    info = get_provider_info()
    modules = [
        m
        for kind in ("hooks", "operators", "sensors", "triggers")
        for entry in info[kind]
        for m in entry["python-modules"]
    ]
    for module in modules:
        importlib.import_module(module)
    for transfer in info["transfers"]:
        importlib.import_module(transfer["python-module"])
    for conn in info["connection-types"]:
        module, _, cls = conn["hook-class-name"].rpartition(".")
        hook = getattr(importlib.import_module(module), cls)
        assert hook.conn_type == conn["connection-type"] in ("brev", "lepton")
        assert hook.default_conn_name == f"{hook.conn_type}_default"
    assert [conn["connection-type"] for conn in info["connection-types"]] == ["brev", "lepton"]
    for link in info.get("extra-links", []):
        module, _, cls = link.rpartition(".")
        getattr(importlib.import_module(module), cls)


def test_get_provider_info_module_has_no_imports():
    source = Path(sys.modules["airflow_provider_brev.get_provider_info"].__file__).read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert imports == ["from __future__ import annotations"]


def _airflow(*args: str) -> str:
    env = {**os.environ, "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING"}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_airflow_cli_lists_the_provider_and_connection_type():
    provider = _airflow("providers", "get", "airflow-provider-brev", "-o", "json")
    assert "airflow-provider-brev" in provider
    hooks = _airflow("providers", "hooks", "-o", "json")
    entries = {row["connection_type"]: row for row in json.loads(hooks)}
    assert entries["brev"]["class"] == "airflow_provider_brev.hooks.brev.BrevHook"


# --- conventions of Airflow's own provider checks, adapted to this package --------------------------------------
def _package_modules(kind: str) -> set[str]:
    """Every public module of ``airflow_provider_brev.<kind>`` (from the files on disk, not from the metadata)."""
    package = importlib.import_module(f"airflow_provider_brev.{kind}")
    return {
        f"{package.__name__}.{module.name}"
        for module in pkgutil.iter_modules(package.__path__)
        if not module.name.startswith("_") and not module.ispkg
    }


@pytest.mark.parametrize("kind", ["hooks", "operators", "sensors", "triggers"])
def test_every_module_of_a_kind_is_listed(kind):
    listed = {module for entry in get_provider_info()[kind] for module in entry["python-modules"]}
    assert listed == _package_modules(kind)


def test_every_transfer_module_is_listed():
    listed = {entry["python-module"] for entry in get_provider_info()["transfers"]}
    assert listed == _package_modules("transfers")


def _connection(conn_type: str) -> dict:
    (entry,) = [c for c in get_provider_info()["connection-types"] if c["connection-type"] == conn_type]
    return entry


def _hook(conn_type: str):
    module, _, cls = _connection(conn_type)["hook-class-name"].rpartition(".")
    return getattr(importlib.import_module(module), cls)


@pytest.mark.parametrize("conn_type", ["brev", "lepton"])
def test_ui_field_behaviour_is_the_metadata(conn_type):
    behaviour = _connection(conn_type)["ui-field-behaviour"]
    assert _hook(conn_type).get_ui_field_behaviour() == {
        "hidden_fields": behaviour["hidden-fields"],
        "relabeling": behaviour["relabeling"],
        "placeholders": behaviour["placeholders"],
    }


def test_brev_placeholders_of_password_and_extra_are_the_metadatas():
    placeholders = _hook("brev").get_ui_field_behaviour()["placeholders"]
    metadata = _connection("brev")["ui-field-behaviour"]["placeholders"]
    assert set(placeholders) == {"password", "extra"}
    assert placeholders["password"] == metadata["password"]
    assert placeholders["extra"] == metadata["extra"]
    json.loads(placeholders["extra"])  # what the user would paste is valid JSON


class _Field:
    def __init__(self, label, description="", widget=None):
        self.label, self.description, self.widget = str(label), str(description), widget


class _PasswordField(_Field):
    pass


def _fake_wtforms(monkeypatch) -> None:
    """Flask AppBuilder, flask-babel and wtforms as the connection form imports them (Airflow < 3.2 ships them;
    this environment does not)."""
    fieldwidgets = types.ModuleType("flask_appbuilder.fieldwidgets")
    fieldwidgets.BS3TextFieldWidget = type("BS3TextFieldWidget", (), {})
    fieldwidgets.BS3PasswordFieldWidget = type("BS3PasswordFieldWidget", (), {})
    babel = types.ModuleType("flask_babel")
    babel.lazy_gettext = str
    wtforms = types.ModuleType("wtforms")
    wtforms.StringField, wtforms.PasswordField = _Field, _PasswordField
    for name, module in {
        "flask_appbuilder": types.ModuleType("flask_appbuilder"),
        "flask_appbuilder.fieldwidgets": fieldwidgets,
        "flask_babel": babel,
        "wtforms": wtforms,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)


def test_connection_form_widgets_are_the_metadatas_conn_fields(monkeypatch):
    _fake_wtforms(monkeypatch)
    fields = _connection("brev")["conn-fields"]
    widgets = _hook("brev").get_connection_form_widgets()
    assert set(widgets) == set(fields)
    assert "name_prefix" in widgets
    for name, field in fields.items():
        secret = field["schema"].get("format") == "password"
        assert isinstance(widgets[name], _PasswordField) is secret, name
        assert type(widgets[name].widget).__name__ == ("BS3PasswordFieldWidget" if secret else "BS3TextFieldWidget")
        assert (widgets[name].label, widgets[name].description) == (field["label"], field["description"])


def test_connection_form_widgets_without_flask_appbuilder_are_empty(monkeypatch):
    monkeypatch.setitem(sys.modules, "flask_appbuilder", None)
    monkeypatch.setitem(sys.modules, "flask_appbuilder.fieldwidgets", None)
    assert _hook("brev").get_connection_form_widgets() == {}


def test_s3_staging_hook_follows_the_amazon_conventions():
    from airflow_provider_brev.hooks.s3_staging import S3StagingHook

    assert S3StagingHook.conn_name_attr == "aws_conn_id"
    assert S3StagingHook.default_conn_name == "aws_default"
    assert S3StagingHook.conn_type == "aws"
    assert S3StagingHook.hook_name
    assert S3StagingHook(bucket="b").aws_conn_id == S3StagingHook.default_conn_name
