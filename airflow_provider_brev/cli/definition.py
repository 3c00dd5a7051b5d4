"""The ``airflow brev`` command group, as Airflow 3.2+ loads provider CLI commands.

Airflow calls :func:`get_brev_cli_commands` (listed under ``cli`` in
:func:`~airflow_provider_brev.get_provider_info.get_provider_info`) while it builds its parser, for **every**
``airflow`` command, as it does the Celery provider's ``get_celery_cli_commands``: this module imports only
``airflow.cli.cli_config`` (already loaded by then), and each command's code is loaded by ``lazy_load_command``
when that command runs (:mod:`airflow_provider_brev.cli.brev_command`). ``--help`` needs no connection.
"""

from __future__ import annotations

from airflow.cli.cli_config import ARG_OUTPUT, ARG_VERBOSE, ActionCommand, Arg, GroupCommand, lazy_load_command

COMMAND_MODULE = "airflow_provider_brev.cli.brev_command"

ARG_CONN_ID = Arg(
    ("--conn-id",),
    help="The Airflow connection of type brev (default: brev_default)",
    default="brev_default",
)
ARG_PREFIX = Arg(
    ("--prefix",),
    help="Owner prefix of the managed names (default: the connection extra name_prefix, else afbrev)",
    default=None,
)
ARG_NO_PRICES = Arg(
    ("--no-prices",),
    help="Do not look prices up (one `brev search`, no login needed)",
    action="store_true",
    default=False,
)
ARG_DRY_RUN = Arg(
    ("--dry-run",),
    help="Only show what would be deleted, and why; delete nothing",
    action="store_true",
    default=False,
)
ARG_GRACE = Arg(
    ("--grace-period",),
    help="Seconds after an instance's expiry before it is deleted (default: 0)",
    type=float,
    default=0.0,
)
ARG_WAIT = Arg(
    ("--wait",),
    help="After the deletes, wait until `brev ls` no longer lists them (up to --timeout seconds)",
    action="store_true",
    default=False,
)
ARG_TIMEOUT = Arg(
    ("--timeout",),
    help="Seconds to wait for the deletions with --wait (default: 600)",
    type=float,
    default=600.0,
)

BREV_COMMANDS = (
    ActionCommand(
        name="instances",
        help="List the Brev instances of the account: owned by this provider or not, expiry, price per hour",
        description=(
            "Lists every instance `brev ls` shows with its id, status and type; whether it is owned by this "
            "provider (a managed name with the owner prefix, or a warm-reuse record), when the janitor may "
            "delete it, and what it bills per hour from `brev search`: its type's price, or for a STOPPED instance its "
            "disk alone (billed: disk)."
        ),
        func=lazy_load_command(f"{COMMAND_MODULE}.instances"),
        args=(ARG_CONN_ID, ARG_PREFIX, ARG_NO_PRICES, ARG_OUTPUT, ARG_VERBOSE),
    ),
    ActionCommand(
        name="sweep",
        help="Delete expired instances this provider owns, as the janitor does (--dry-run: only show them)",
        description=(
            "Runs the janitor's sweep (the decisions of BrevSweepInstancesOperator): an instance is deleted, by "
            "its id, only when it is owned by this provider and expired; every other instance is kept or "
            "ignored. Each decision is printed with its reason. Exits 1 when a delete failed."
        ),
        func=lazy_load_command(f"{COMMAND_MODULE}.sweep"),
        args=(ARG_CONN_ID, ARG_PREFIX, ARG_DRY_RUN, ARG_GRACE, ARG_WAIT, ARG_TIMEOUT, ARG_OUTPUT, ARG_VERBOSE),
    ),
)

BREV_CLI_COMMANDS = [
    GroupCommand(
        name="brev",
        help="NVIDIA Brev instances of this provider (airflow-provider-brev)",
        subcommands=BREV_COMMANDS,
    ),
]


def get_brev_cli_commands() -> list[GroupCommand]:
    """The ``airflow brev`` commands (what Airflow 3.2+ reads through the provider info's ``cli`` entry)."""
    return BREV_CLI_COMMANDS
