"""Controller for the fake ``brev`` CLI (see :mod:`airflow_provider_brev.testing.fake_brev`).

Typical use::

    sim = BrevSimulator(tmp_path / "brev", profile="released").install()
    env = {**os.environ, **sim.env()}           # brev on PATH, FAKE_BREV_STATE set
    subprocess.run(["brev", "login", "--token", sim.valid_token], env=env, stdin=subprocess.DEVNULL)
    sim.set_fault("http_5xx", command="ls", times=1, status=502)
    assert [c["exit_code"] for c in sim.calls("ls")] == [1, 0]

Sandboxes have a fake ``docker`` (:mod:`.fake_docker`) running fake TAO entrypoints (:mod:`.fake_tao`):
``set_docker``/``set_tao``, ``docker_calls``/``tao_runs``. Command line: :mod:`.simulator_cli`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.testing import fake_docker as _fd
from airflow_provider_brev.testing import fake_tao as _ft
from airflow_provider_brev.testing.fake_brev import catalog as _cat
from airflow_provider_brev.testing.fake_brev import instance_loss as _loss
from airflow_provider_brev.testing.fake_brev import store as _st
from airflow_provider_brev.testing.fake_brev.ssh import write_ssh_config
from airflow_provider_brev.testing.fake_brev.ssh_agent import AGENTS_FILE
from airflow_provider_brev.testing.fake_common import flocked, merge_phases, read_json, read_jsonl, write_json_atomic
from airflow_provider_brev.testing.sandbox_tools import install_tools, write_exe
from airflow_provider_brev.testing.simulator_processes import SimulatorProcesses

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DEFAULT_ACCOUNTS",
    "DEFAULT_CATALOG",
    "DEFAULT_DOCKER_CONFIG",
    "DEFAULT_TAO_CONFIG",
    "DEFAULT_TIMINGS",
    "FAULT_KINDS",
    "PROFILES",
    "BrevSimulator",
    "make_token",
]

DEFAULT_TIMINGS = _cat.DEFAULT_TIMINGS
DEFAULT_ACCOUNTS = _cat.DEFAULT_ACCOUNTS
DEFAULT_CATALOG = _cat.DEFAULT_CATALOG
PROFILES = _cat.PROFILES
#: knobs of the fake ``docker`` (``set_docker``) and of the fake TAO entrypoints (``set_tao``)
DEFAULT_DOCKER_CONFIG = _fd.DEFAULT_DOCKER_CONFIG
DEFAULT_TAO_CONFIG = _ft.DEFAULT_TAO_CONFIG
#: config sections that live next to fake_brev's own keys in ``config.json``
_TOOL_SECTIONS = {"docker": DEFAULT_DOCKER_CONFIG, "tao": DEFAULT_TAO_CONFIG}

#: fault kind -> default ``times`` (None = until cleared)
FAULT_KINDS: dict[str, int | None] = {
    "http_5xx": 1,  # command=, status=502, body=, stage=None|"post", side_effect=False
    "capacity": None,  # type= (instance type); create attempts on it fail with "no capacity ..."
    "boot_failure": 1,  # message=, type=, instance=; the next matching create ends in FAILURE
    "ssh_refused": 1,  # seconds=, instance=; sshd answers that much later (next create/start)
    "connection_drop": 1,  # after_seconds= | after_bytes=, instance=, match= (substring of the command)
    "listing_unavailable": 1,  # the next create cannot fetch the instance-type/workspace-group listing
    "slow_create": 1,  # seconds=, instance=; the next create's POST succeeds, then its CLI answers that much later
    # seconds=, instance= (the name or id given), until_file=; the next start waits that long (or until that file
    # exists) before its PUT
    "slow_start": 1,
    # instance=, mode="deleted"|"failure", message=, and one trigger: after_seconds= | when_file= | at_epoch=
    "instance_lost": 1,
    # a gate, not a failure: run= (bash, in the sandbox HOME) runs to its end right before the next exec whose
    # command contains match= (instance=): deterministic changes between two steps of the provider
    "before_exec": 1,
    # instance=; plain ssh (the host entries' ProxyCommand, the simulator's bin/ssh) times out connecting to a
    # RUNNING instance that brev exec reaches: a worker whose own ssh cannot get through
    "direct_ssh_unreachable": None,
}

_TIMING_KEYS = tuple(_cat.DEFAULT_TIMINGS)


def make_token(exp_in_seconds: float = 3600, sub: str = "user", now: float | None = None) -> str:
    """An unsigned JWT that ``brev login --token`` accepts until ``exp`` (wall clock unless ``now``)."""
    return _st.make_token(exp_in_seconds=exp_in_seconds, sub=sub, now=now)


class BrevSimulator(SimulatorProcesses):
    """Owns one simulator root: config, state, the ``brev`` launcher and the sandbox tools.

    :param root: directory of the simulator (created by :meth:`install`).
    :param profile: ``released`` (brev-cli v0.6.327) or ``documented`` (the documented newer CLI).
    :param deploy_seconds: DEPLOYING -> RUNNING; ``build_seconds``/``ssh_seconds``: build done / sshd up after that;
        ``delete_seconds``: DELETING -> gone; ``start_seconds``: STARTING -> RUNNING; ``poll_seconds``: the CLI's
        poll interval; ``probe_seconds``: its ssh probe interval (default ``poll_seconds``).
    :param config: other config knobs (see :meth:`set_config`), ``docker=``/``tao=`` knob sections.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        profile: str = "released",
        deploy_seconds: float = 0.3,
        build_seconds: float = 0.2,
        ssh_seconds: float = 0.2,
        delete_seconds: float = 0.3,
        start_seconds: float = 0.3,
        poll_seconds: float = 0.05,
        probe_seconds: float | None = None,
        **config: Any,
    ) -> None:
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, not {profile!r}")
        self.root = Path(root).absolute()
        #: the HOME whose ``~/.brev`` the CLI uses: the simulator's own ``<root>/home`` unless a fixture points
        #: it elsewhere; :meth:`login`, :meth:`connection_json` and :meth:`shell_exports` use it, never ``~``
        self.home: Path = self.own_home
        self._initial_config: dict[str, Any] = {
            **json.loads(json.dumps(_cat.DEFAULT_CONFIG)),
            "profile": profile,
            "timings": {
                "deploy_seconds": deploy_seconds,
                "build_seconds": build_seconds,
                "ssh_seconds": ssh_seconds,
                "delete_seconds": delete_seconds,
                "start_seconds": start_seconds,
                "poll_seconds": poll_seconds,
                "probe_seconds": poll_seconds if probe_seconds is None else probe_seconds,
            },
        }
        self._initial_config.update(self._check_config(config))
        self._token: str | None = None
        self._store = _st.StateStore(str(self.root))

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def own_home(self) -> Path:
        return self.root / "home"

    @property
    def brev_path(self) -> Path:
        return self.bin_dir / "brev"

    @property
    def tools_bin(self) -> Path:
        """Tools on the PATH of every sandbox (``docker``, ``nvidia-smi``, :meth:`add_tool`)."""
        return self.root / "tools" / "bin"

    @property
    def docker_calls_path(self) -> Path:
        return self.root / _fd.CALLS_FILE

    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    # --------------------------------------------------------------------------------- install
    def install(self) -> BrevSimulator:
        """Create the root, config, state, the simulator's own HOME, ``bin/brev`` and the sandbox tools
        (idempotent)."""
        for d in (self.root, self.bin_dir, self.tools_bin, self.root / "instances", self.own_home):
            d.mkdir(parents=True, exist_ok=True)
        with flocked(str(self.root / "state.lock")):
            write_json_atomic(str(self.root / "config.json"), self._initial_config, indent=1)
            if not self.state_path.exists():
                write_json_atomic(str(self.state_path), _st.empty_state())
        for name in ("calls.jsonl", "runs.jsonl", _fd.CALLS_FILE, _ft.RUNS_FILE, AGENTS_FILE):
            (self.root / name).touch(exist_ok=True)
        install_tools(
            self.root, self.bin_dir, self.tools_bin, self.root / "tools" / "container-bin", list(_ft.NETWORK_ACTIONS)
        )
        return self

    def add_tool(self, name: str, content: str) -> Path:
        """Install an executable into ``<root>/tools/bin`` (on every sandbox's PATH)."""
        self.tools_bin.mkdir(parents=True, exist_ok=True)
        return write_exe(self.tools_bin / name, content)

    def env(self) -> dict[str, str]:
        """Environment to apply: ``brev`` first on PATH and ``FAKE_BREV_STATE`` set."""
        path = os.environ.get("PATH", "")
        return {
            "PATH": f"{self.bin_dir}{os.pathsep}{path}" if path else str(self.bin_dir),
            "FAKE_BREV_STATE": str(self.root),
        }

    def shell_exports(self) -> str:
        """``export`` lines for a shell: ``brev`` on PATH, and HOME set to the simulator's own home so that
        ``brev login`` in that shell never touches the real ``~/.brev``."""
        return (
            f'export PATH={shlex.quote(str(self.bin_dir))}:"$PATH"\n'
            f"export FAKE_BREV_STATE={shlex.quote(str(self.root))}\n"
            f"export HOME={shlex.quote(str(self.home))}\n"
        )

    # ---------------------------------------------------------------------------------- config
    def config(self) -> dict[str, Any]:
        return _st.load_config(str(self.root))

    def _update_config(self, fn: Callable[[dict[str, Any]], None]) -> None:
        with flocked(str(self.root / "state.lock")):
            cfg = read_json(str(self.root / "config.json"), None) or json.loads(json.dumps(self._initial_config))
            fn(cfg)
            write_json_atomic(str(self.root / "config.json"), cfg, indent=1)

    @property
    def profile(self) -> str:
        return str(self.config().get("profile", "released"))

    def set_config(self, **knobs: Any) -> None:
        """Set config knobs (see ``DEFAULT_CONFIG`` in :mod:`.fake_brev.catalog`, e.g. ``ls_json_shape``,
        ``auth_error_style``)."""
        self._update_config(lambda c: c.update(self._check_config(knobs)))

    @classmethod
    def _check_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        unknown = set(config) - set(_cat.DEFAULT_CONFIG) - set(_TOOL_SECTIONS)
        if unknown:
            raise TypeError(f"unknown simulator config keys: {sorted(unknown)}")
        return {k: cls._check_knobs(k, v) if k in _TOOL_SECTIONS else v for k, v in config.items()}

    @staticmethod
    def _check_knobs(section: str, knobs: dict[str, Any] | None) -> dict[str, Any]:
        knobs = dict(knobs or {})
        unknown = set(knobs) - set(_TOOL_SECTIONS[section])
        if unknown:
            raise TypeError(f"unknown {section} knobs: {sorted(unknown)}; expected {sorted(_TOOL_SECTIONS[section])}")
        return knobs

    def _merge_section(self, section: str, knobs: dict[str, Any]) -> None:
        knobs = self._check_knobs(section, knobs)

        def apply(c: dict[str, Any]) -> None:
            c[section] = {**(c.get(section) or {}), **knobs}

        self._update_config(apply)

    def set_docker(self, **knobs: Any) -> None:
        """Merge fake ``docker`` knobs (see :data:`DEFAULT_DOCKER_CONFIG`)."""
        self._merge_section("docker", knobs)

    def set_tao(self, **knobs: Any) -> None:
        """Merge fake TAO knobs (see :data:`DEFAULT_TAO_CONFIG`)."""
        self._merge_section("tao", knobs)

    def docker_calls(self, instance: str | None = None, subcommand: str | None = None) -> list[dict[str, Any]]:
        """Fake ``docker`` invocations, oldest first (``-e K=V`` values and passwords redacted;
        ``exit_code`` is None while a ``docker run`` is still attached or when its client was killed)."""
        recs = merge_phases(read_jsonl(str(self.docker_calls_path)), "call_id")
        if instance is not None:
            recs = [r for r in recs if instance in (r.get("instance"), r.get("instance_id"))]
        if subcommand is not None:
            recs = [r for r in recs if r.get("subcommand") == subcommand]
        return recs

    def tao_runs(self, instance: str | None = None) -> list[dict[str, Any]]:
        """Fake TAO entrypoint runs, oldest first (``exit_code`` None while running or when killed)."""
        recs = merge_phases(read_jsonl(str(self.root / _ft.RUNS_FILE)), "run_id")
        if instance is not None:
            recs = [r for r in recs if instance in (r.get("instance"), r.get("instance_id"))]
        return recs

    def docker_images(self, name: str) -> dict[str, dict[str, Any]]:
        """Images the fake docker of instance ``name`` holds: canonical ref -> ``pull_count``, ``downloads``..."""
        return dict(read_json(str(self.sandbox(name).parent / "docker" / "images.json"), {}) or {})

    def docker_containers(self, name: str) -> list[dict[str, Any]]:
        """The containers of instance ``name``'s fake docker, newest first, as ``docker inspect`` shows them."""
        return _fd.containers_of(str(self.root), str(self.sandbox(name).parent.name))

    def set_timings(self, **timings: float) -> None:
        """``set_timings(deploy_seconds=1.0, ssh=0.5)`` (the ``_seconds`` suffix is optional)."""
        norm = {(k if k.endswith("_seconds") else f"{k}_seconds"): float(v) for k, v in timings.items()}
        if set(norm) - set(_TIMING_KEYS):
            raise TypeError(f"unknown timings {sorted(set(norm) - set(_TIMING_KEYS))}; expected {_TIMING_KEYS}")

        def apply(c: dict[str, Any]) -> None:
            c.setdefault("timings", {}).update(norm)

        self._update_config(apply)

    def set_catalog(self, catalog: list[dict[str, Any]]) -> None:
        self._update_config(lambda c: c.__setitem__("catalog", catalog))

    def set_accounts(
        self,
        cloud_credentials: list[dict[str, str]] | None = None,
        workspace_groups: list[dict[str, str]] | None = None,
        org: dict[str, str] | None = None,
        orgs: list[dict[str, str]] | None = None,
    ) -> None:
        given = {"cloud_credentials": cloud_credentials, "workspace_groups": workspace_groups, "org": org, "orgs": orgs}

        def apply(c: dict[str, Any]) -> None:
            c.setdefault("accounts", json.loads(json.dumps(_cat.DEFAULT_ACCOUNTS))).update(
                {k: v for k, v in given.items() if v is not None}
            )

        self._update_config(apply)

    # ----------------------------------------------------------------------------------- clock
    def now(self) -> float:
        return time.time() + float(self.config().get("now_offset") or 0.0)

    def advance(self, seconds: float) -> None:
        """Move the simulated clock forward (status transitions and token expiry follow it)."""

        def apply(c: dict[str, Any]) -> None:
            c["now_offset"] = float(c.get("now_offset") or 0.0) + float(seconds)

        self._update_config(apply)

    # ------------------------------------------------------------------------------------ auth
    def make_token(self, exp_in_seconds: float = 3600, sub: str = "user", issuer: str | None = None) -> str:
        """A JWT valid for ``exp_in_seconds`` of simulated time (an unknown ``issuer`` makes every ``brev`` call of
        a session holding it print the breadcrumb ``no oauth found for token``)."""
        return _st.make_token(
            exp_in_seconds=exp_in_seconds, sub=sub, now=self.now(), issuer=issuer or _st.KNOWN_ISSUERS[0]
        )

    @property
    def valid_token(self) -> str:
        """A token valid for (at least) the next ~hour of simulated time; cached."""
        tok = self._token
        payload = _st.jwt_payload(tok) if tok else None
        revoked = set(self.config().get("revoked_tokens") or [])
        if payload is None or float(payload.get("exp", 0)) - self.now() < 600 or tok in revoked:
            tok = self.make_token(3600)
            self._token = tok
        assert tok is not None
        return tok

    def revoke_token(self, token: str) -> None:
        """The server rejects this token (``401 Unauthorized``) from now on, also for ``login``."""

        def apply(c: dict[str, Any]) -> None:
            lst = list(c.get("revoked_tokens") or [])
            if token not in lst:
                lst.append(token)
            c["revoked_tokens"] = lst

        self._update_config(apply)

    def expire_sessions(self, home: Path | str | None = None) -> None:
        """End server-side login sessions (all, or the one of the token a HOME holds): the next authenticated
        command of a HOME holding such a token takes the CLI's logged-out path until ``brev login`` runs again."""
        creds = read_json(str(Path(home) / ".brev" / "credentials.json"), {}) if home is not None else {}
        with self._store.txn() as st:
            if home is None:
                st["auth_generation"] = int(st.get("auth_generation", 0)) + 1
            elif isinstance(creds, dict) and creds.get("access_token"):
                st["sessions"][_st.session_key(creds["access_token"])] = -1

    def login(self, home: Path | str | None = None, token: str | None = None) -> str:
        """Write credentials for ``home`` as ``brev login --token`` would (no subprocess); returns the token."""
        home = Path(home or self.home)
        token = token or self.valid_token
        brev_dir = home / ".brev"
        brev_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(
            str(brev_dir / "credentials.json"), {"access_token": token, "refresh_token": "auto-login"}, indent=1
        )
        org = self.config()["accounts"]["org"]
        write_json_atomic(
            str(brev_dir / "active_org.json"), {"id": org["id"], "name": org["name"], "userNetworkId": ""}
        )
        with self._store.txn() as st:
            st["sessions"][_st.session_key(token)] = st.get("auth_generation", 0)
        return token

    # ---------------------------------------------------------------------------------- faults
    def set_fault(self, kind: str, **params: Any) -> dict[str, Any]:
        """Arm a fault shared by all ``brev`` processes; see :data:`FAULT_KINDS` for parameters.

        ``times`` (default per kind) counts uses; ``times=None`` keeps it armed until cleared.
        ``ssh_refused`` with ``instance=`` naming an existing instance delays its sshd right away.
        ``instance_lost`` (see :mod:`.fake_brev.instance_loss`): ``mode="deleted"`` (default) or ``"failure"``;
        ``after_seconds`` (simulated, default 0), ``when_file`` (glob under the sandbox HOME) or ``at_epoch``
        (fake TAO train); it is evaluated right away too, so an already-due loss fires before this returns.
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(FAULT_KINDS)}")
        fault: dict[str, Any] = {"kind": kind, "times": params.pop("times", FAULT_KINDS[kind]), **params}
        if kind == "http_5xx":
            fault.setdefault("status", 502)
        now = self.now()
        if kind == "instance_lost":
            triggers = [k for k in ("after_seconds", "when_file", "at_epoch") if params.get(k) is not None]
            if fault.setdefault("mode", "deleted") not in _loss.MODES or len(triggers) > 1:
                raise ValueError(f"instance_lost takes mode= in {_loss.MODES} and at most one trigger, not {params}")
            with self._store.txn() as st:
                st["faults"].append({**fault, "armed_at": now})
            _loss.lose_due_instances(str(self.root))
            return fault
        with self._store.txn() as st:
            if kind == "ssh_refused" and params.get("instance"):
                for inst in st["instances"]:
                    if inst["name"] == params["instance"] and inst.get("phase") in ("deploy", "start"):
                        base = max(float(inst.get("t_ssh_up", 0)), now)
                        inst["t_ssh_up"] = base + float(params.get("seconds", 0))
                        return fault
            st["faults"].append(fault)
        return fault

    def clear_faults(self, kind: str | None = None) -> None:
        with self._store.txn() as st:
            st["faults"] = [f for f in st["faults"] if kind is not None and f.get("kind") != kind]

    def faults(self) -> list[dict[str, Any]]:
        return list(self._store.read().get("faults", []))

    # ----------------------------------------------------------------------------- inspection
    def calls(self, command: str | None = None) -> list[dict[str, Any]]:
        """Recorded invocations, oldest first; ``command`` filters on the subcommand (aliases resolved)."""
        recs = sorted(read_jsonl(str(self.root / "calls.jsonl")), key=lambda r: r.get("ts", 0))
        first = lambda r: next((a for a in r.get("argv", []) if not a.startswith("-")), "")  # noqa: E731
        return [r for r in recs if command is None or command in (first(r), r.get("command"))]

    def ssh_calls(self) -> list[dict[str, Any]]:
        """Recorded invocations of the client's plain ``ssh`` (``bin/ssh``, :mod:`.fake_brev.ssh_client`)."""
        return sorted(read_jsonl(str(self.root / "ssh_calls.jsonl")), key=lambda r: r.get("ts", 0))

    def runs(self, instance: str | None = None) -> list[dict[str, Any]]:
        """Commands actually started in a sandbox (by ``brev exec``), oldest first."""
        recs = read_jsonl(str(self.root / "runs.jsonl"))
        return [r for r in recs if instance is None or instance in (r.get("instance"), r.get("instance_id"))]

    def instances(self) -> list[dict[str, Any]]:
        """Current instances (deleted ones that finished DELETING are gone), with derived status."""
        st = self._store.read()
        cfg = self.config()
        now = time.time() + float(cfg.get("now_offset") or 0.0)
        views = [_st.public_view(i, now, cfg) for i in st["instances"]]
        views = [v for v in views if not v["gone"]]
        views.sort(key=lambda v: v.get("created_at") or 0)
        return views

    def billing(self) -> list[dict[str, Any]]:
        """What every instance of this simulator was billed, deleted ones included: per instance its ``id``,
        ``name``, ``instance_type``, ``running_seconds`` (deploying, running, stopping, deleting: the machine's
        price) and ``stopped_seconds`` (STOPPED: the disk only), up to now."""
        st = self._store.read()
        now = time.time() + float(self.config().get("now_offset") or 0.0)
        live = [_st.billing_view(i, now) for i in st["instances"] if not _st.derive(i, now)["gone"]]
        gone = [_st.billing_view(i, now) for i in st["instances"] if _st.derive(i, now)["gone"]]
        return [*st.get("ledger", []), *gone, *live]

    def wait_for_deletions(self, timeout: float = 30.0) -> None:
        """Wait until no instance is DELETING: ``brev delete`` returns at once and the simulator finishes the delete
        ``delete_seconds`` later (simulated time). Polls :meth:`instances`; raises ``TimeoutError`` naming those
        still deleting after ``timeout``.

        :param timeout: the most wall-clock seconds to wait (a loaded machine is slower: be generous)."""
        deadline = time.monotonic() + timeout
        while deleting := [v["name"] for v in self.instances() if v["status"] == "DELETING"]:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"instance(s) still DELETING after {timeout} s: {', '.join(deleting)}")
            time.sleep(0.05)

    def instance(self, name: str) -> dict[str, Any] | None:
        """The current instance with this name (or id), or None."""
        return next((v for v in self.instances() if name in (v["name"], v["id"])), None)

    def name_of(self, ident: str) -> str | None:
        """The name of the instance with id ``ident`` (current or deleted), ``ident`` itself when it is a name of one,
        else ``None``: what a ``brev delete <name or id>`` call hit."""
        for meta_path in (self.root / "instances").glob("*/meta.json"):
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if ident in (meta.get("id"), meta.get("name")):
                return str(meta.get("name"))
        return None

    def sandbox(self, name: str) -> Path:
        """The sandbox HOME of an instance (current one by name/id, else the newest with that name)."""
        cur = self.instance(name)
        if cur is not None:
            return self.root / "instances" / cur["id"] / "home"
        best: tuple[float, Path] | None = None
        for meta_path in (self.root / "instances").glob("*/meta.json"):
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if name in (meta.get("name"), meta.get("id")):
                mtime = meta_path.stat().st_mtime
                if best is None or mtime > best[0]:
                    best = (mtime, meta_path.parent / "home")
        if best is None:
            raise KeyError(f"no instance named {name!r} in {self.root}")
        return best[1]

    # ------------------------------------------------------------------------------ seeding
    def create_instance_directly(
        self,
        name: str,
        status: str = "RUNNING",
        ready: bool = True,
        *,
        instance_type: str = "g6e.xlarge",
        created_by: str = "user",
        ssh_config_home: Path | str | None = None,
    ) -> dict[str, Any]:
        """Seed an instance without going through ``brev create`` (for janitor/adoption tests).

        ``status``: RUNNING, DEPLOYING, STOPPED or DELETING. ``ready=True`` (RUNNING only): build COMPLETED and sshd
        up already; otherwise the timings apply from now. ``ssh_config_home`` also writes the ssh alias into that
        HOME (as if ``brev refresh`` had run there).
        """
        cfg = self.config()
        t = cfg["timings"]
        now = time.time() + float(cfg.get("now_offset") or 0.0)
        acc = cfg["accounts"]
        with self._store.txn(now=now) as st:
            if any(i["name"] == name and not _st.derive(i, now)["gone"] for i in st["instances"]):
                raise ValueError(f"an instance named {name!r} already exists")
            inst = _st.new_instance_record(
                cfg,
                st,
                name,
                instance_type,
                now,
                created_by=created_by,
                org_id=acc["org"]["id"],
                workspace_group_id=(acc.get("workspace_groups") or [{"id": ""}])[0]["id"],
                cloud_cred_id=(acc.get("cloud_credentials") or [{"id": ""}])[0]["id"],
            )
            if status == "RUNNING" and ready:
                inst.update(t_running=now - 1, t_build_done=now - 1, t_ssh_up=now - 1)
            elif status == "RUNNING":
                inst.update(t_running=now, t_build_done=now + t["build_seconds"], t_ssh_up=now + t["ssh_seconds"])
            elif status == "STOPPED":
                inst.update(phase="stop", t_stopping=now, t_stopped=now)
                _st.record_phase(inst, "stop", now, now)
            elif status == "DELETING":
                inst.update(phase="delete", t_deleting=now, t_gone=now + float(t["delete_seconds"]))
                _st.record_phase(inst, "delete", now, inst["t_gone"])
            elif status != "DEPLOYING":
                raise ValueError(f"unsupported status {status!r}")
            st["instances"].append(inst)
        _st.prepare_sandbox(str(self.root), inst, cfg)
        if ssh_config_home is not None:
            write_ssh_config(str(self.root), str(Path(ssh_config_home) / ".brev"), [inst], append=True)
        view = self.instance(name)
        assert view is not None
        return view

    def replace_instance(self, name: str, *, created_by: str = "user") -> dict[str, Any]:
        """Someone deletes instance ``name`` outside Airflow (gone at once, its processes killed) and creates a new
        one under the freed name: same name, another id. By default on the same account (a colleague sharing the
        token, another DAG run), so ``brev ls`` lists it. Returns the new instance."""
        now = time.time() + float(self.config().get("now_offset") or 0.0)
        with self._store.txn(now=now) as st:
            live = [i for i in st["instances"] if i["name"] == name and not _st.derive(i, now)["gone"]]
            if not live:
                raise KeyError(f"no instance named {name!r}")
            for inst in live:
                inst.update(last_build="COMPLETED", phase="delete", t_deleting=now, t_gone=now)
                _st.record_phase(inst, "delete", now, now)
        for inst in live:
            _st.kill_marked(("BREV_SIM_INSTANCE", inst["id"]))
        return self.create_instance_directly(name, created_by=created_by)

    def set_health(self, name: str, health: str | None) -> None:
        """Override a RUNNING instance's health (``"UNHEALTHY"`` shows as status UNHEALTHY in ls)."""
        with self._store.txn() as st:
            for inst in st["instances"]:
                if name in (inst["name"], inst["id"]):
                    inst["health_override"] = health

    # ----------------------------------------------------------------------------- airflow
    def connection_json(self, token: str | None = None, **extra: Any) -> str:
        """An Airflow connection (JSON form) for ``AIRFLOW_CONN_BREV_DEFAULT`` pointing at this fake CLI, with
        ``brev_home`` set to :attr:`home` (the CLI keeps its ``~/.brev`` there, not in the real HOME)."""
        return json.dumps(
            {
                "conn_type": "brev",
                "password": token if token is not None else self.valid_token,
                "extra": {"cli_path": str(self.brev_path), "brev_home": str(self.home), **extra},
            }
        )


if __name__ == "__main__":
    from airflow_provider_brev.testing.simulator_cli import main

    sys.exit(main())
