"""The command table of the fake ``brev`` (flags, help texts, handlers) and its help output."""

from __future__ import annotations

from airflow_provider_brev.testing.fake_brev.cmd_auth import (
    cmd_healthcheck,
    cmd_login,
    cmd_logout,
    cmd_org,
    cmd_orgs,
    cmd_set,
    cmd_status,
)
from airflow_provider_brev.testing.fake_brev.cmd_copy import cmd_copy
from airflow_provider_brev.testing.fake_brev.cmd_create import cmd_create
from airflow_provider_brev.testing.fake_brev.cmd_exec import cmd_exec
from airflow_provider_brev.testing.fake_brev.cmd_lifecycle import cmd_delete, cmd_start, cmd_stop
from airflow_provider_brev.testing.fake_brev.cmd_ls import cmd_ls
from airflow_provider_brev.testing.fake_brev.cmd_search import cmd_search
from airflow_provider_brev.testing.fake_brev.flags import GLOBAL_FLAGS, CliError, Flag, flag_usages
from airflow_provider_brev.testing.fake_brev.ssh import cmd_refresh

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from airflow_provider_brev.testing.fake_brev.context import Ctx


ROOT_LONG = "brev client for managing workspaces\n\nRead the docs at https://docs.nvidia.com/brev/"


def root_help(ctx: Ctx) -> str:
    lines = [ROOT_LONG, "", "Usage:", "  brev [command]", "", "Available Commands:"]
    names = sorted(n for n, spec in COMMANDS.items() if not spec.get("documented_only") or ctx.documented)
    width = max(len(n) for n in names)
    for n in names:
        lines.append(f"  {n.ljust(width)}  {COMMANDS[n]['short']}")
    lines += [
        "",
        "Flags:",
        flag_usages(GLOBAL_FLAGS).rstrip("\n"),
        "",
        'Use "brev [command] --help" for more information about a command.',
        "",
    ]
    return "\n".join(lines)


def command_help(ctx: Ctx, name: str, spec: dict) -> str:
    flags = spec["flags"](ctx)
    parts = [spec.get("long") or spec["short"], "", "Usage:", f"  brev {spec.get('use', name)}"]
    if spec.get("aliases"):
        parts += ["", "Aliases:", "  " + ", ".join([name, *spec["aliases"]])]
    if spec.get("example"):
        parts += ["", "Examples:", spec["example"].rstrip("\n")]
    if flags:
        parts += ["", "Flags:", flag_usages(flags).rstrip("\n")]
    parts += ["", "Global Flags:", flag_usages(GLOBAL_FLAGS).rstrip("\n"), ""]
    return "\n".join(parts)


def cmd_unsimulated(name: str) -> Any:
    def handler(_ctx: Ctx, _v: dict, _pos: list[str]) -> int:
        raise CliError(f"simulator: `brev {name}` is interactive or not simulated; use exec/copy instead")

    return handler


# --------------------------------------------------------------------------------------------------
# command table
# --------------------------------------------------------------------------------------------------
def _create_flags(ctx: Ctx) -> list[Flag]:
    flags = [
        Flag("name", "n", "str", "", "Base name for the instances (or pass as first argument)"),
        Flag("type", "t", "str", "", "Comma-separated list of instance types to try"),
        Flag("count", "c", "int", 1, "Number of instances to create"),
        Flag("parallel", "p", "int", 1, "Number of parallel creation attempts"),
        Flag("detached", "d", "bool", False, "Don't wait for instances to be ready"),
        Flag("timeout", "", "int", 300, "Timeout in seconds for each instance to become ready"),
        Flag("startup-script", "s", "str", "", "Startup script to run on instance (string or @filepath)"),
        Flag("dry-run", "", "bool", False, "Show matching instance types without creating anything"),
        Flag("mode", "m", "str", "vm", "Build mode: vm (default), k8s, container, compose"),
        Flag("jupyter", "", "bool", True, "Install Jupyter (default true for vm/k8s modes)"),
        Flag("container-image", "", "str", "", "Container image URL (required for container mode)"),
        Flag("compose-file", "", "str", "", "Docker compose file path or URL (required for compose mode)"),
        Flag("launchable", "l", "str", "", "Launchable ID or URL to deploy (e.g., env-XXX or console URL)"),
        Flag("gpu-name", "g", "str", "", "Filter by GPU name (e.g., A100, H100)"),
        Flag("provider", "", "str", "", "Filter by provider/cloud (e.g., aws, gcp)"),
        Flag("min-vram", "v", "float", 0.0, "Minimum VRAM per GPU in GB"),
        Flag("min-total-vram", "", "float", 0.0, "Minimum total VRAM in GB"),
        Flag("min-capability", "", "float", 0.0, "Minimum GPU compute capability (e.g., 8.0)"),
        Flag("min-disk", "", "float", 0.0, "Minimum disk size in GB"),
        Flag("max-boot-time", "", "int", 0, "Maximum boot time in minutes"),
        Flag("stoppable", "", "bool", False, "Only use instances that can be stopped/restarted"),
        Flag("rebootable", "", "bool", False, "Only use instances that can be rebooted"),
        Flag("flex-ports", "", "bool", False, "Only use instances with configurable firewall rules"),
        Flag("sort", "", "str", "price", "Sort instance preference by: price, vram, boot-time, etc."),
        Flag("desc", "", "bool", False, "Sort in descending order"),
    ]
    if ctx.documented:
        flags += [
            Flag("gpu", "", "str", "", "GPU to provision as NAME:COUNT (e.g., L40S:1)"),
            Flag("cloud-cred-id", "", "str", "", "Cloud credential to place the instance with (see brev orgs --json)"),
            Flag("workspace-group-id", "", "str", "", "Workspace group to place the instance in"),
        ]
    return flags


def _search_flags(ctx: Ctx, cpu: bool = False) -> list[Flag]:
    del ctx
    flags = [
        Flag("provider", "p", "str", "", "Filter by provider/cloud (case-insensitive, partial match)"),
        Flag("arch", "", "str", "", "Filter by architecture (e.g., x86_64, arm64)"),
        Flag("min-vcpu", "", "int", 0, "Minimum number of vCPUs"),
        Flag("min-ram", "", "float", 0.0, "Minimum RAM in GB"),
        Flag("min-disk", "", "float", 0.0, "Minimum disk size in GB"),
        Flag("max-boot-time", "", "int", 0, "Maximum boot time in minutes"),
        Flag("stoppable", "", "bool", False, "Only show instances that can be stopped and restarted"),
        Flag("rebootable", "", "bool", False, "Only show instances that can be rebooted"),
        Flag("flex-ports", "", "bool", False, "Only show instances with configurable firewall/port rules"),
        Flag("sort", "s", "str", "price", "Sort by column (see --help for options)"),
        Flag("desc", "d", "bool", False, "Sort in descending order"),
        Flag("json", "", "bool", False, "Output results as JSON"),
    ]
    if not cpu:
        flags += [
            Flag("gpu-name", "g", "str", "", "Filter by GPU name (case-insensitive, partial match)"),
            Flag("min-vram", "v", "float", 0.0, "Minimum VRAM per GPU in GB"),
            Flag("min-total-vram", "t", "float", 0.0, "Minimum total VRAM (GPU count * VRAM) in GB"),
            Flag("min-capability", "c", "float", 0.0, "Minimum GPU compute capability (e.g., 8.0 for Ampere)"),
            Flag("wide", "w", "bool", False, "Show additional columns (RAM, ARCH)"),
        ]
    return flags


def _no_flags(_ctx: Ctx) -> list[Flag]:
    return []


CREATE_LONG = """Create GPU instances with automatic retry across multiple instance types.

This command attempts to create GPU instances, trying different instance types
until the desired number of instances are successfully created. Instance types
can be specified directly, piped from 'brev search', or auto-selected using defaults."""

CREATE_EXAMPLE = """
  # Create an instance using smart defaults (sorted by price)
  brev create my-instance

  # Create with a specific GPU type
  brev create my-instance --type g5.xlarge

  # Try multiple types in order (fallback chain)
  brev create my-instance --type g5.xlarge,g5.2xlarge,g4dn.xlarge

  # Pipe from search for automatic fallback
  brev search --gpu-name A100 | brev create my-instance
"""

EXEC_EXAMPLE = """  # Run a command on an instance
  brev exec my-instance "nvidia-smi"

  # Run a command on multiple instances
  brev exec instance1 instance2 instance3 "nvidia-smi"

  # Run a script file on the instance (@ prefix reads local file)
  brev exec my-instance @setup.sh"""

COMMANDS: dict[str, dict] = {
    "create": {
        "handler": cmd_create,
        "flags": _create_flags,
        "aliases": ["provision"],
        "use": "create [name]",
        "short": "Create GPU instances with automatic retry",
        "long": CREATE_LONG,
        "example": CREATE_EXAMPLE,
    },
    "ls": {
        "handler": cmd_ls,
        "aliases": ["list"],
        "use": "ls",
        "short": "List instances within active org",
        "flags": lambda _ctx: [
            Flag("org", "o", "str", "", "organization (will override active org)"),
            Flag("all", "", "bool", False, "show all workspaces in org"),
            Flag("json", "", "bool", False, "output as JSON"),
        ],
    },
    "delete": {
        "handler": cmd_delete,
        "flags": _no_flags,
        "use": "delete",
        "short": "Delete an instance",
        "example": "brev delete <ws_name>...\necho instance-name | brev delete",
    },
    "stop": {
        "handler": cmd_stop,
        "flags": lambda _ctx: [Flag("all", "a", "bool", False, "stop all instances")],
        "use": "stop",
        "short": "Stop an instance if it's running",
    },
    "start": {
        "handler": cmd_start,
        "use": "start",
        "short": "Start an instance if it's stopped, or create one from url",
        "flags": lambda _ctx: [
            Flag("detached", "d", "bool", False, "run the command in the background instead of blocking the shell"),
            Flag("empty", "e", "bool", False, "create an empty workspace"),
            Flag("name", "n", "str", "", "name your workspace when creating a new one"),
            Flag("setup-script", "s", "str", "", "takes a raw gist url to an env setup script"),
            Flag("setup-repo", "r", "str", "", "repo that holds env setup script"),
            Flag("setup-path", "p", "str", "", "path to env setup script"),
            Flag("org", "o", "str", "", "organization (will override active org if creating a workspace)"),
            Flag("gpu", "g", "str", "n1-highmem-4:nvidia-tesla-t4:1", "GPU instance type"),
        ],
    },
    "exec": {
        "handler": cmd_exec,
        "use": "exec [instance...] <command>",
        "short": "Execute a command on instance(s)",
        "long": "Execute a command on one or more instances non-interactively",
        "example": EXEC_EXAMPLE,
        "flags": lambda _ctx: [Flag("host", "", "bool", False, "ssh into the host machine instead of the container")],
    },
    "copy": {
        "handler": cmd_copy,
        "aliases": ["cp", "scp"],
        "use": "copy",
        "short": "Copy files to/from an instance",
        "flags": lambda _ctx: [
            Flag("host", "", "bool", False, "copy to/from the host machine instead of the container")
        ],
    },
    "login": {
        "handler": cmd_login,
        "use": "login",
        "short": "Log into brev",
        "flags": lambda _ctx: [
            Flag("token", "", "str", "", "token provided to auto login"),
            Flag("skip-browser", "", "bool", False, "print url instead of auto opening browser"),
            Flag("email", "", "str", "", "email to use for authentication"),
            Flag("auth", "", "str", "", "authentication provider to use (nvidia or legacy)"),
            Flag("api-key", "", "str", "", "API key (bak-...)", hidden=True),
            Flag("org-id", "", "str", "", "org id for the API key", hidden=True),
        ],
    },
    "logout": {"handler": cmd_logout, "flags": _no_flags, "use": "logout", "short": "Log out of brev"},
    "refresh": {
        "handler": cmd_refresh,
        "flags": _no_flags,
        "use": "refresh",
        "short": "Force a refresh to the SSH config",
    },
    "search": {
        "handler": cmd_search,
        "flags": _search_flags,
        "use": "search [gpu|cpu]",
        "short": "Search and filter GPU instance types",
    },
    "healthcheck": {
        "handler": cmd_healthcheck,
        "flags": _no_flags,
        "use": "healthcheck",
        "short": "Check backend to see if it's healthy",
    },
    "org": {"handler": cmd_org, "flags": _no_flags, "use": "org", "short": "Organization commands"},
    "set": {"handler": cmd_set, "flags": _no_flags, "use": "set", "short": "Set active org"},
    "status": {"handler": cmd_status, "flags": _no_flags, "use": "status", "short": "About this instance"},
    "shell": {
        "handler": cmd_unsimulated("shell"),
        "aliases": ["ssh"],
        "flags": lambda _ctx: [Flag("host")],
        "use": "shell",
        "short": "[beta] Open a shell in your instance",
    },
    "open": {
        "handler": cmd_unsimulated("open"),
        "flags": lambda _ctx: [Flag("host")],
        "use": "open",
        "short": "[beta] open VSCode to",
    },
    "reset": {
        "handler": cmd_unsimulated("reset"),
        "flags": _no_flags,
        "use": "reset",
        "short": "Reset an instance if it's in a weird state.",
    },
    "orgs": {
        "handler": cmd_orgs,
        "documented_only": True,
        "use": "orgs",
        "short": "List organizations with their cloud credentials",
        "flags": lambda _ctx: [Flag("json", "", "bool", False, "output as JSON")],
    },
}
