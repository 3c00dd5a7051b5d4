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


def test_each_transfer_direction_is_listed_once():
    """Airflow's check ``check_duplicates_in_list_of_transfers``: one entry per (source, target) integration pair."""
    pairs = [(t["source-integration-name"], t["target-integration-name"]) for t in get_provider_info()["transfers"]]
    assert sorted(pairs) == sorted(set(pairs))


def test_integration_names_of_every_entry_are_registered():
    """Airflow's ``check_invalid_integration``: each entry names an integration that a provider (this one, or the
    Amazon provider it depends on) registers."""
    from airflow.providers.amazon.get_provider_info import get_provider_info as amazon_info

    info = get_provider_info()
    known = {i["integration-name"] for source in (info, amazon_info()) for i in source["integrations"]}
    named = {e["integration-name"] for kind in ("hooks", "operators", "sensors", "triggers") for e in info[kind]}
    named |= {t[end] for t in info["transfers"] for end in ("source-integration-name", "target-integration-name")}
    assert named <= known, sorted(named - known)


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
    """A wtforms field as a hook declares it: its class's ``widget`` has the input type (what Airflow < 3.2 reads
    to tell a secret field), the instance the label, description and the Flask AppBuilder widget."""

    widget = types.SimpleNamespace(input_type="text")

    def __init__(self, label, description="", widget=None):
        self.label, self.description, self.widget = str(label), str(description), widget

    @property
    def field_class(self) -> type:
        return type(self)


class _PasswordField(_Field):
    widget = types.SimpleNamespace(input_type="password")


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
    wtforms.BooleanField, wtforms.IntegerField = (
        type("BooleanField", (_Field,), {}),
        type("IntegerField", (_Field,), {}),
    )
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


def _forms_drawn_by_airflow(*, declarative: bool) -> tuple[dict, dict]:
    """The connection forms Airflow's own ``ProvidersManager`` draws for this provider: its extra fields (by
    prefixed name) and its field behaviours (by connection type).

    ``declarative``: as Airflow 3.2+ does, from ``conn-fields`` and ``ui-field-behaviour`` without importing the
    hooks. Otherwise as Airflow 3.0 and 3.1 do, which ignore those keys: from the registered hook class's own
    ``get_connection_form_widgets()`` / ``get_ui_field_behaviour()`` -- only where the class defines them itself
    (``ProvidersManager`` reads ``hook_class.__dict__``, so that a hierarchy adds its fields once).
    """
    from airflow import providers_manager
    from airflow.providers_manager import ProviderInfo, ProvidersManager

    class FormsOnly(ProvidersManager):
        """A manager of its own (``ProvidersManager`` is a process-wide singleton) with what drawing forms needs."""

        def __new__(cls):
            return object.__new__(cls)

        def __init__(self) -> None:
            self._provider_dict: dict = {}
            self._connection_form_widgets: dict = {}
            self._field_behaviours: dict = {}
            self._hook_name_dict: dict = {}
            validator = providers_manager._create_customized_form_field_behaviours_schema_validator()
            self._customized_form_fields_schema_validator = validator

    info = get_provider_info()
    package = info["package-name"]
    manager = FormsOnly()
    if declarative:
        manager._provider_dict = {package: ProviderInfo(info["versions"][0], info)}
        manager._load_ui_metadata()
    else:
        declared = ("conn-fields", "ui-field-behaviour")
        stripped = {
            **info,
            "connection-types": [{k: v for k, v in c.items() if k not in declared} for c in info["connection-types"]],
        }
        for conn in stripped["connection-types"]:
            hook = manager._import_hook(
                connection_type=None,
                provider_info=ProviderInfo(info["versions"][0], stripped),
                hook_class_name=conn["hook-class-name"],
                package_name=package,
            )
            assert hook is not None and hook.connection_type == conn["connection-type"]
    return manager._connection_form_widgets, manager._field_behaviours


def _field_view(widget) -> tuple[str, str, bool]:
    """(label, description, secret) of a form field, whichever way Airflow registered it."""
    field = widget.field
    if isinstance(field, dict):  # declarative: the field's JSON schema, its label as the title
        return field["schema"]["title"], field["description"], widget.is_sensitive
    return field.label, field.description, widget.is_sensitive


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_every_airflow_draws_the_connection_forms_of_the_metadata(monkeypatch):
    """Airflow 3.0/3.1 (the hook's methods) and 3.2+ (``conn-fields``, ``ui-field-behaviour``) show the same form,
    for every connection type the provider declares: same extra fields, labels, descriptions and secrecy, same
    hidden and relabelled fields and placeholders."""
    from airflow.providers_manager import ProvidersManager

    if not hasattr(ProvidersManager, "_load_ui_metadata"):  # the floor venv: this Airflow draws the hook's form only
        pytest.skip("this Airflow (before 3.2) does not draw forms from conn-fields: nothing to compare with")
    _fake_wtforms(monkeypatch)
    declared_fields, declared_behaviours = _forms_drawn_by_airflow(declarative=True)
    hook_fields, hook_behaviours = _forms_drawn_by_airflow(declarative=False)
    conn_types = [conn["connection-type"] for conn in get_provider_info()["connection-types"]]
    assert set(declared_behaviours) == set(hook_behaviours) == set(conn_types)
    for conn_type in conn_types:
        assert hook_behaviours[conn_type] == declared_behaviours[conn_type], conn_type
    assert sorted(hook_fields) == sorted(declared_fields)
    assert {name.split("__")[1] for name in declared_fields} == {"brev"}  # only brev has extra fields
    for name, widget in declared_fields.items():
        assert _field_view(hook_fields[name]) == _field_view(widget), name


def test_conn_fields_are_extras_the_hook_reads():
    """Every extra field of the form sets the connection setting of its name (a field the hook ignored would be a
    form that does nothing)."""
    from airflow_provider_brev.core.protocol.config import BrevConnectionConfig

    default = BrevConnectionConfig.from_extras("c", None, {})
    for name in _connection("brev")["conn-fields"]:
        value = "bak-1" if name == "api_key" else "value-1"
        assert (
            getattr(BrevConnectionConfig.from_extras("c", None, {name: value}), name) == value != getattr(default, name)
        ), name


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
