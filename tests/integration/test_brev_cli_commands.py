"""``airflow brev instances`` and ``airflow brev sweep``: the real ``airflow`` CLI in a subprocess, against the
simulator and the suite's metadata database (airflow_provider_brev/cli/)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import (
    WARM_LEGACY_VARIABLE,
    WARM_RECORD_PREFIX,
    clear_warm_records,
    cli_calls,
    connection_in_metadata_db,
    run_state,
    task_states,
    warm_variable_keys,
    write_warm_record,
)

from airflow_provider_brev.core.protocol.names import managed_instance_name


def _has_provider_cli() -> bool:
    """Provider CLI commands (the ``cli`` entry of provider info) exist since Airflow 3.2."""
    from airflow.providers_manager import ProvidersManager

    return hasattr(ProvidersManager, "cli_command_functions")


pytestmark = pytest.mark.skipif(not _has_provider_cli(), reason="provider CLI commands need Airflow 3.2+")

NOW = datetime.now(UTC)


def managed(task_id: str, *, expires_in: timedelta, prefix: str = "afbrev") -> str:
    return managed_instance_name(
        dag_id="cli_dag", run_id="manual__1", task_id=task_id, expires_at=NOW + expires_in, prefix=prefix
    )


EXPIRED = managed("expired", expires_in=-timedelta(hours=2))
FRESH = managed("fresh", expires_in=timedelta(hours=6))
DELETING = managed("deleting", expires_in=-timedelta(hours=3))
OTHER_OWNER = managed("other", expires_in=-timedelta(hours=4), prefix="team2")
FOREIGN = "my-notebook"


def airflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``airflow`` CLI of this venv, with this process's environment (AIRFLOW_HOME, the simulator)."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), *args],
        capture_output=True,
        text=True,
        env=env if env is not None else dict(os.environ),
        timeout=180,
        check=False,
    )


def rows(done: subprocess.CompletedProcess[str]) -> dict[str, dict]:
    assert done.returncode == 0, done.stderr[-3000:]
    return {row["name"]: row for row in json.loads(done.stdout)}


@pytest.fixture
def account(airflow_db, brev_sim, run_dag, monkeypatch):
    """The simulator's account with one instance of each kind: one kept for warm reuse by a real run (its record in
    a Variable, its creation in that run's XCom), and a hand-made one a hand-written record claims."""
    from airflow.models.variable import Variable

    clear_warm_records()
    when = datetime.now(UTC)
    conf = {"key": "nightly", "type": "g6e.xlarge", "release": "stop", "max_idle": 3600, "bucket": "b"}
    kept = run_dag("brev_reuse_lifecycle", conf=conf, logical_date=when, run_after=when)
    assert run_state(kept) == "success", task_states(kept)
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    brev_sim.set_timings(delete_seconds=3600)  # a deleted instance stays DELETING while the test looks, however slow
    for name in (EXPIRED, FRESH, OTHER_OWNER):
        brev_sim.create_instance_directly(name)
    foreign = brev_sim.create_instance_directly(FOREIGN)["id"]
    brev_sim.create_instance_directly(DELETING, status="DELETING")
    # a record naming the hand-made instance, in use by a run that died days ago: it proves nothing
    days_ago = NOW.timestamp() - 3 * 24 * 3600
    handmade = {"key": "nightly", "id": foreign, "name": FOREIGN, "state": "in_use", "since": days_ago}
    write_warm_record(handmade, legacy=True)
    # records of instances deleted long ago, which nothing reads any more: one written through the connection the
    # sweep uses, one through another (its instance may be in an account that connection does not list)
    write_warm_record({**handmade, "id": "i-gone", "name": "afbrev-gone", "conn_id": "brev_cli_db"})
    write_warm_record({**handmade, "id": "i-elsewhere", "name": "afbrev-elsewhere", "conn_id": "other_account"})
    for _ in range(200):  # the simulated clock on until the teardown's stop is done (no wall-clock wait)
        if {i["status"] for i in brev_sim.instances() if i["name"] == warm_name(brev_sim)} == {"STOPPED"}:
            break
        brev_sim.advance(0.2)
    yield brev_sim
    clear_warm_records()
    Variable.delete(WARM_LEGACY_VARIABLE)


def warm_name(sim) -> str:
    """The instance the fixture's run kept for warm reuse."""
    [name] = [i["name"] for i in sim.instances() if "brev-reuse-lifecycle" in i["name"]]
    return name


def test_instances_shows_owned_expiry_and_price(account):
    WARM = warm_name(account)
    listed = rows(airflow("brev", "instances", "-o", "json"))
    assert set(listed) == {EXPIRED, FRESH, DELETING, OTHER_OWNER, WARM, FOREIGN}
    ids = {i["name"]: i["id"] for i in account.instances()}
    assert {name: row["id"] for name, row in listed.items()} == ids
    assert {name for name, row in listed.items() if row["owned"] == "yes"} == {EXPIRED, FRESH, DELETING, WARM}
    assert listed[FOREIGN]["expires_at"] == "" and listed[OTHER_OWNER]["owned"] == "no"
    assert listed[FOREIGN]["reuse_key"] == ""  # its hand-written record proves nothing
    assert (
        datetime.fromisoformat(listed[FRESH]["expires_at"])
        > NOW
        > datetime.fromisoformat(listed[EXPIRED]["expires_at"])
    )
    assert listed[WARM]["reuse_key"] == "nightly" and listed[WARM]["status"] == "STOPPED"
    assert datetime.fromisoformat(listed[WARM]["expires_at"]) > NOW
    search = {offer["type"]: offer for offer in json.loads(airflow_search(account))}
    assert listed[FRESH]["type"] == "g6e.xlarge"
    assert float(listed[FRESH]["price_per_hour"]) == pytest.approx(search["g6e.xlarge"]["price_per_hour"])
    assert listed[FRESH]["billed"] == "instance"
    # the stopped warm instance bills its disk alone: its size at the catalog's $ per GB-month (730 h)
    row = search[listed[WARM]["type"]]
    disk_gb = row.get("target_disk_gb") or max(min(500, row["disk_max_gb"]), row["disk_min_gb"])
    disk = disk_gb * float(row["disk_price_per_gb_mo"]) / 730
    assert listed[WARM]["billed"] == "disk" and 0 < float(listed[WARM]["price_per_hour"]) < 0.1 * float(
        row["price_per_hour"]
    )
    assert float(listed[WARM]["price_per_hour"]) == pytest.approx(disk, rel=1e-3)
    assert cli_calls(account, "delete") == []


def airflow_search(sim) -> str:
    """What ``brev search --json`` of the simulator prices (the catalog the command read)."""
    done = subprocess.run([str(sim.brev_path), "search", "--json"], capture_output=True, text=True, check=True)
    return done.stdout


def test_sweep_dry_run_shows_what_the_janitor_would_delete_and_why(account):
    WARM = warm_name(account)
    decided = rows(airflow("brev", "sweep", "--dry-run", "-o", "json"))
    assert {name: row["decision"] for name, row in decided.items()} == {
        EXPIRED: "would delete",
        FRESH: "keep",
        DELETING: "already deleting",
        WARM: "keep",
        OTHER_OWNER: "ignore",
        FOREIGN: "ignore",
    }
    assert decided[EXPIRED]["reason"].startswith("expired ")
    assert decided[WARM]["reason"].startswith("reuse key 'nightly', stopped, until ")
    assert decided[FOREIGN]["reason"] == (
        "not a managed name with prefix 'afbrev'; its reuse record is ignored: my-notebook is not a name this "
        "provider makes"
    )
    assert len(warm_variable_keys(WARM_RECORD_PREFIX)) == 4  # a dry run removes no record
    assert cli_calls(account, "delete") == []
    assert {i["name"]: i["status"] for i in account.instances()}[EXPIRED] == "RUNNING"


@pytest.fixture
def connection_in_the_db(account):
    """The simulator's connection stored in the metadata database (not in the environment), as ``airflow
    connections add`` would store it."""
    with connection_in_metadata_db("brev_cli_db", **_connection_fields(account.connection_json())) as conn_id:
        yield conn_id


def _connection_fields(conn_json: str) -> dict:
    fields = json.loads(conn_json)
    return {"conn_type": fields["conn_type"], "password": fields["password"], "extra": json.dumps(fields["extra"])}


def test_sweep_deletes_only_owned_expired_instances_by_id(account, connection_in_the_db):
    WARM = warm_name(account)
    done = airflow("brev", "sweep", "--conn-id", connection_in_the_db)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Janitor summary: 1 deleted" in done.stdout
    expired_id = next(i["id"] for i in account.instances() if i["name"] == EXPIRED)
    targets = [a for call in cli_calls(account, "delete") for a in call["argv"][1:] if not a.startswith("-")]
    assert targets == [expired_id]  # by id, and nothing else
    after = {i["name"]: i["status"] for i in account.instances()}
    assert after[EXPIRED] == "DELETING"
    assert after[WARM] == "STOPPED" and after[FRESH] == after[OTHER_OWNER] == after[FOREIGN] == "RUNNING"
    ids = {i["name"]: i["id"] for i in account.instances()}
    # the record this connection wrote of an instance no longer listed is removed; the others stay (the
    # hand-written one is never acted on; another connection's is that connection's to remove)
    kept = [WARM_RECORD_PREFIX + i for i in (ids[WARM], ids[FOREIGN], "i-elsewhere")]
    assert warm_variable_keys(WARM_RECORD_PREFIX) == sorted(kept)


def test_help_needs_no_connection_and_start_up_imports_nothing_heavy(airflow_db):
    """What every ``airflow`` command loads: the provider's command definitions, none of the code behind them; and
    ``airflow brev sweep --help`` (Airflow's own parser, as the ``airflow`` entry point runs it) needs no connection."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    probe = (
        "import contextlib, io, sys\n"
        "from airflow.cli import cli_parser\n"
        "assert 'brev' in {c.name for c in cli_parser.airflow_commands}\n"
        "assert 'airflow_provider_brev.cli.definition' in sys.modules\n"
        "heavy = ['airflow_provider_brev.cli.brev_command', 'airflow_provider_brev.hooks.brev', 'boto3']\n"
        "loaded = [m for m in heavy if m in sys.modules]\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        cli_parser.get_parser().parse_args(['brev', 'sweep', '--help'])\n"
        "    except SystemExit as done:\n"
        "        assert done.code == 0, done.code\n"
        "print(loaded)\n"
        "print(out.getvalue())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    first, _, help_text = done.stdout.partition("\n")
    assert first == "[]"
    assert "--dry-run" in help_text and "--conn-id" in help_text and "janitor" in help_text


def test_the_provider_info_names_the_command_group():
    from airflow_provider_brev.get_provider_info import get_provider_info

    [path] = get_provider_info()["cli"]
    module, _, function = path.rpartition(".")
    [group] = getattr(importlib.import_module(module), function)()
    assert group.name == "brev"
    assert [c.name for c in group.subcommands] == ["instances", "sweep"]
