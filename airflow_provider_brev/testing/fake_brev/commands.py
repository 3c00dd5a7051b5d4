"""The command table of the fake ``brev`` (flags, handlers) and its help output."""

from __future__ import annotations

import importlib

from airflow_provider_brev.testing.fake_brev.flags import GLOBAL_FLAGS, CliError, Flag, flag_usages

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_provider_brev.testing.fake_brev.context import Ctx


def handler(spec: dict) -> Callable[[Ctx, dict, list[str]], int]:
    """A command's handler, imported when the command runs (``"module:function"`` of this package): a call imports
    only its own command's module."""
    target = spec["handler"]
    if callable(target):
        return target
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(f"airflow_provider_brev.testing.fake_brev.{module}"), function)


def root_help(ctx: Ctx) -> str:
    names = sorted(n for n, spec in COMMANDS.items() if not spec.get("documented_only") or ctx.documented)
    width = max(len(n) for n in names)
    rows = "".join(f"  {n.ljust(width)}  {COMMANDS[n]['short']}\n" for n in names)
    return (
        "brev client for managing workspaces\n\nRead the docs at https://docs.nvidia.com/brev/\n\nUsage:\n"
        f"  brev [command]\n\nAvailable Commands:\n{rows}\nFlags:\n{flag_usages(GLOBAL_FLAGS)}\n"
        'Use "brev [command] --help" for more information about a command.\n'
    )


def command_help(ctx: Ctx, name: str, spec: dict) -> str:
    parts = [spec["short"], "", "Usage:", f"  brev {spec.get('use', name)}"]
    if spec.get("aliases"):
        parts += ["", "Aliases:", "  " + ", ".join([name, *spec["aliases"]])]
    flags = spec["flags"](ctx)
    if flags:
        parts += ["", "Flags:", flag_usages(flags).rstrip("\n")]
    return "\n".join([*parts, "", "Global Flags:", flag_usages(GLOBAL_FLAGS)])


def _unsimulated(_ctx: Ctx, _v: dict, _pos: list[str]) -> int:
    raise CliError("simulator: this command is interactive or not simulated")


def _create_flags(ctx: Ctx) -> list[Flag]:
    """The released CLI's ``create`` flags (what ``create --help`` lists); the documented CLI adds placement."""
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


def _search_flags(_ctx: Ctx) -> list[Flag]:
    return [
        Flag("gpu-name", "g", "str", "", "Filter by GPU name (case-insensitive, partial match)"),
        Flag("provider", "p", "str", "", "Filter by provider/cloud (case-insensitive, partial match)"),
        Flag("min-vram", "v", "float", 0.0, "Minimum VRAM per GPU in GB"),
        Flag("min-total-vram", "t", "float", 0.0, "Minimum total VRAM (GPU count * VRAM) in GB"),
        Flag("min-capability", "c", "float", 0.0, "Minimum GPU compute capability (e.g., 8.0 for Ampere)"),
        Flag("json", "", "bool", False, "Output results as JSON"),
    ]


def _flags(*flags: Flag) -> object:
    return lambda _ctx: list(flags)


#: simulated commands, then the other released commands (listed, so that `unknown command` suggests them)
COMMANDS: dict[str, dict] = {
    "create": {
        "handler": "cmd_create:cmd_create",
        "flags": _create_flags,
        "aliases": ["provision"],
        "use": "create [name]",
    },
    "ls": {
        "handler": "cmd_ls:cmd_ls",
        "aliases": ["list"],
        "flags": _flags(Flag("org", "o", "str"), Flag("all"), Flag("json")),
    },
    "delete": {"handler": "cmd_lifecycle:cmd_delete", "flags": _flags()},
    "stop": {"handler": "cmd_lifecycle:cmd_stop", "flags": _flags(Flag("all", "a"))},
    "start": {
        "handler": "cmd_lifecycle:cmd_start",
        "flags": _flags(
            Flag("detached", "d"),
            Flag("empty", "e"),
            *(Flag(f, short, "str") for f, short in (("name", "n"), ("setup-script", "s"), ("setup-repo", "r"))),
            *(Flag(f, short, "str") for f, short in (("setup-path", "p"), ("org", "o"))),
            Flag("gpu", "g", "str", "n1-highmem-4:nvidia-tesla-t4:1"),
        ),
    },
    "exec": {"handler": "cmd_exec:cmd_exec", "flags": _flags(Flag("host")), "use": "exec [instance...] <command>"},
    "copy": {"handler": "cmd_copy:cmd_copy", "aliases": ["cp", "scp"], "flags": _flags(Flag("host"))},
    "login": {
        "handler": "cmd_auth:cmd_login",
        "flags": _flags(
            *(Flag(f, "", "str") for f in ("token", "email", "auth", "api-key", "org-id")), Flag("skip-browser")
        ),
    },
    "refresh": {"handler": "ssh:cmd_refresh", "flags": _flags()},
    "search": {"handler": "cmd_search:cmd_search", "flags": _search_flags, "use": "search [gpu|cpu]"},
    "orgs": {"handler": "cmd_auth:cmd_orgs", "documented_only": True, "flags": _flags(Flag("json"))},
}
_SHORT = {
    "create": "Create GPU instances with automatic retry",
    "ls": "List instances within active org",
    "delete": "Delete an instance",
    "exec": "Execute a command on instance(s)",
    "copy": "Copy files to/from an instance",
    "login": "Log into brev",
    "refresh": "Force a refresh to the SSH config",
    "search": "Search and filter GPU instance types",
    "orgs": "List organizations with their cloud credentials",
    "healthcheck": "Check backend to see if it's healthy",
    "logout": "Log out of brev",
    "open": "[beta] open VSCode to",
    "org": "Organization commands",
    "reset": "Reset an instance if it's in a weird state.",
    "set": "Set active org",
    "shell": "[beta] Open a shell in your instance",
    "start": "Start an instance if it's stopped, or create one from url",
    "status": "About this instance",
    "stop": "Stop an instance if it's running",
}
for _name, _short in _SHORT.items():
    COMMANDS.setdefault(_name, {"handler": _unsimulated, "flags": _flags()})["short"] = _short
COMMANDS["shell"]["aliases"] = ["ssh"]
