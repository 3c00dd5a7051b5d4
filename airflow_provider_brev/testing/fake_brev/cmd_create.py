"""``brev create``: type resolution, placement, retries across types, waiting until ready."""

from __future__ import annotations

import json
import time

from airflow_provider_brev.testing.fake_brev.cmd_search import filter_catalog
from airflow_provider_brev.testing.fake_brev.context import Ctx, authenticate, get_instance_by_id, raise_5xx
from airflow_provider_brev.testing.fake_brev.flags import _NAME_RE, CliError, http_error_text
from airflow_provider_brev.testing.fake_brev.store import (
    catalog_index,
    derive,
    new_instance_record,
    prepare_sandbox,
    take_fault,
)

TYPE_CHECKING = False


def _parse_types_input(text: str) -> list[tuple[str, float]]:
    text = text.strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        return [(str(i.get("type", "")), float(i.get("target_disk_gb") or 0)) for i in items if isinstance(i, dict)]
    specs = []
    for idx, line in enumerate(text.split("\n")):
        if idx == 0 and ("TYPE" in line or "GPU" in line):
            continue
        line = line.strip()
        if not line or line.startswith("Found "):
            continue
        fields = line.split()
        t = fields[0]
        if len(t) >= 2 and any(ch.isalpha() for ch in t) and any(ch.isdigit() for ch in t):
            disk = 0.0
            if len(fields) > 1:
                try:
                    disk = max(0.0, float(fields[1]))
                except ValueError:
                    disk = 0.0
            specs.append((t, disk))
    return specs


def _fmt_specs(specs: list[tuple[str, float]]) -> str:
    return ", ".join(f"{t} ({d:.0f}GB disk)" if d > 0 else t for t, d in specs)


def _resolve_gpu_flag(ctx: Ctx, value: str) -> list[tuple[str, float]]:
    name, _, count = value.partition(":")
    name = name.strip()
    try:
        n = int(count) if count else 1
    except ValueError:
        n = -1
    if not name or n < 1:
        raise CliError(f'invalid --gpu value "{value}": expected NAME:COUNT, e.g. L40S:1')
    cands = [
        c
        for c in filter_catalog(ctx.cfg)
        if (c.get("gpu_name") or "").lower() == name.lower() and int(c.get("gpu_count", 0)) == n
    ]
    if not cands:
        raise CliError(f"no instance type offers GPU \"{name}\" x{n}; run 'brev search' to see available options")
    c = cands[0]
    disk = float(c["disk_min_gb"])
    if c["disk_min_gb"] != c["disk_max_gb"] and c["disk_min_gb"] < 500 <= c["disk_max_gb"]:
        disk = 500.0
    return [(c["type"], disk)]


def _check_placement(ctx: Ctx, v: dict) -> tuple[str, str]:
    acc = ctx.accounts
    creds = acc.get("cloud_credentials") or []
    groups = acc.get("workspace_groups") or []
    cc = (v.get("cloud-cred-id") or "").strip()
    wg = (v.get("workspace-group-id") or "").strip()
    if cc and cc not in {c["id"] for c in creds}:
        raise CliError(
            f'placement error: cloud credential "{cc}" not found in organization {ctx.org["name"]} '
            f"(see brev orgs --json)"
        )
    if wg and wg not in {g["id"] for g in groups}:
        raise CliError(
            f'placement error: workspace group "{wg}" not found in organization {ctx.org["name"]} '
            f"(see brev orgs --json)"
        )
    if not cc and len(creds) > 1:
        raise CliError(
            f"placement error: this organization has {len(creds)} cloud credentials; "
            f"pass --cloud-cred-id <id> (see brev orgs --json)"
        )
    if not wg and len(groups) > 1:
        raise CliError(
            f"placement error: this organization has {len(groups)} workspace groups; "
            f"pass --workspace-group-id <id> (see brev orgs --json)"
        )
    return cc or (creds[0]["id"] if creds else ""), wg or (groups[0]["id"] if groups else "")


def cmd_create(ctx: Ctx, v: dict, pos: list[str]) -> int:
    name = v["name"] or (pos[0] if pos else "")
    if v["launchable"]:
        lid = v["launchable"]
        raise CliError(
            f'failed to fetch launchable "{lid}": '
            + http_error_text(404, f"api/launchables/{lid}/now", '{"message":"launchable not found"}')
        )
    mode = v["mode"]
    if mode not in ("vm", "k8s", "container", "compose"):
        raise CliError(f'invalid mode "{mode}": must be one of vm, k8s, container, compose')
    if mode == "container" and not v["container-image"]:
        raise CliError("--container-image is required for container mode")
    if mode == "compose" and not v["compose-file"]:
        raise CliError("--compose-file is required for compose mode")
    if not name:
        raise CliError("name is required")
    if len(name) > 63:
        raise CliError(f"name must be 63 characters or fewer (got {len(name)})")
    if not _NAME_RE.match(name):
        raise CliError(
            "name must start with a letter or digit and contain only letters, digits, hyphens, underscores, and dots"
        )
    count = v["count"]
    if count < 1:
        raise CliError("--count must be at least 1")
    specs = [(t.strip(), 0.0) for t in (v["type"] or "").split(",") if t.strip()]
    specs += _parse_types_input(ctx.read_stdin_all())
    if v["startup-script"].startswith("@"):
        try:
            with open(v["startup-script"][1:], encoding="utf-8") as fh:
                fh.read()
        except OSError as exc:
            raise CliError(f"open {v['startup-script'][1:]}: {(exc.strerror or 'error').lower()}") from None
    if ctx.documented and v.get("gpu"):
        if specs:
            raise CliError("--gpu cannot be combined with --type or piped instance types")
        specs = _resolve_gpu_flag(ctx, v["gpu"])
    if not specs:
        user_filters = bool(
            v["gpu-name"]
            or v["provider"]
            or v["min-vram"]
            or v["min-total-vram"]
            or v["min-capability"]
            or v["min-disk"]
            or v["max-boot-time"]
            or v["stoppable"]
            or v["rebootable"]
            or v["flex-ports"]
        )
        min_disk = v["min-disk"] or 500.0
        found = filter_catalog(
            ctx.cfg,
            gpu_name=v["gpu-name"],
            provider=v["provider"],
            min_vram=v["min-vram"],
            min_total_vram=v["min-total-vram"] or 20.0,
            min_capability=v["min-capability"] or 8.0,
            min_disk=min_disk,
            max_boot_time=v["max-boot-time"] or (0 if user_filters else 7),
            stoppable=v["stoppable"],
            rebootable=v["rebootable"],
            flex_ports=v["flex-ports"],
            sort_by=v["sort"] or "price",
            desc=v["desc"],
        )
        if not found:
            raise CliError("no GPU instances match the specified filters. Try 'brev search' to see available options")
        for c in found:
            disk = float(c["disk_min_gb"])
            if c["disk_min_gb"] != c["disk_max_gb"] and c["disk_min_gb"] < min_disk <= c["disk_max_gb"]:
                disk = float(min_disk)
            specs.append((c["type"], disk))
    if v["dry-run"]:
        ctx.out(_fmt_specs(specs) + "\n")
        return 0

    user = authenticate(ctx)
    raise_5xx(ctx, "create", "api/me")
    cc_id, wg_id = ("", "")
    if ctx.documented:
        cc_id, wg_id = _check_placement(ctx, v)
    else:
        acc = ctx.accounts
        cc_id = (acc.get("cloud_credentials") or [{"id": ""}])[0]["id"]
        wg_id = (acc.get("workspace_groups") or [{"id": ""}])[0]["id"]

    with ctx.store.txn() as st:
        listing_down = take_fault(st, "listing_unavailable") is not None
    if listing_down:
        ctx.log(
            f"Warning: could not fetch instance types with workspace groups: "
            f"{http_error_text(503, 'api/instances/alltypesavailable/' + ctx.org['id'])}\n"
        )
        ctx.log("Falling back to default workspace group\n")
    known = catalog_index(ctx.cfg)
    parallel = max(1, v["parallel"])
    ctx.log(f"Attempting to create {count} instance(s) with {parallel} parallel attempts\n")
    ctx.log(f"Instance types to try: {_fmt_specs(specs)}\n\n")

    created: list[dict] = []
    for itype, _disk in specs:
        if len(created) >= count:
            break
        remaining = count - len(created)
        ctx.log(f"Trying {itype} for {remaining} instance(s)...\n")
        had_failure = False
        fatal = None
        if not listing_down and itype not in known:
            ctx.log(
                f"Skipping: instance type \"{itype}\" is not a recognized type; run 'brev search' to see "
                f"available types\n"
            )
            had_failure = True
        else:
            workers = min(parallel, remaining)
            for k, idx in enumerate(range(len(created), len(created) + remaining)):
                if len(created) >= count:
                    break
                wid = (k % workers) + 1
                iname = f"{name}-{idx + 1}" if count > 1 else name
                ctx.log(f"[Worker {wid}] Trying {itype} for instance '{iname}'...\n")
                inst, failure = _create_one(ctx, user, iname, itype, listing_down, cc_id, wg_id)
                if failure is not None:
                    ctx.log(f"[Worker {wid}] {itype} Failed: {failure}\n")
                    had_failure = True
                    if "duplicate workspace" in failure:
                        fatal = (
                            f"workspace '{iname}' already exists. Use a different name or delete the existing workspace"
                        )
                elif inst is not None:
                    ctx.log(f"[Worker {wid}] {itype} Success! Created instance '{iname}'\n")
                    created.append(inst)
        if fatal:
            ctx.log(f"\nError: {fatal}\n")
            break
        if not had_failure and len(created) >= count:
            break
        if len(created) < count and had_failure:
            ctx.log(f"\nType {itype} had failures, trying next type...\n\n")
    if len(created) < count:
        ctx.log(f"\nWarning: Only created {len(created)}/{count} instances\n")
        if created:
            ctx.log("Successfully created instances:\n")
            for inst in created:
                ctx.log(f"  - {inst['name']} (ID: {inst['id']})\n")
        raise CliError(f"could only create {len(created)}/{count} instances")

    if not v["detached"]:
        ctx.log("\nWaiting for instance(s) to be ready...\n")
        ctx.log("You can safely ctrl+c to exit\n")
        for inst in created:
            _wait_ready(ctx, inst, float(v["timeout"]))
    if ctx.stdout_piped:
        for inst in created:
            ctx.out(inst["name"] + "\n")
        return 0
    ctx.out("\n")
    ctx.out(f"Successfully created {len(created)} instance(s)!\n\n")
    for inst in created:
        ctx.out(f"Instance: {inst['name']}\n  ID: {inst['id']}\n  Type: {inst['instance_type']}\n")
        ctx.out(f"  Connect:\n    brev open {inst['name']}\n    brev shell {inst['name']}\n\n")
    return 0


def _create_one(
    ctx: Ctx, user: dict, name: str, itype: str, listing_down: bool, cc_id: str, wg_id: str
) -> tuple[dict | None, str | None]:
    """One `POST api/organizations/{org}/workspaces`; returns (instance, None) or (None, error text)."""
    if listing_down:
        return None, (
            f'could not resolve workspace group for "{itype}" (instance-type listing was unavailable); please retry'
        )
    now = ctx.now()
    with ctx.store.txn(now=now) as st:
        f5 = None
        for cand in st.get("faults", []):
            if (
                cand.get("kind") == "http_5xx"
                and cand.get("command") in (None, "create")
                and cand.get("stage") == "post"
                and (cand.get("times") is None or cand["times"] > 0)
            ):
                f5 = cand
                break
        if f5 is not None:
            if f5.get("times") is not None:
                f5["times"] -= 1
            st["faults"] = [x for x in st["faults"] if x.get("times") is None or x["times"] > 0]
        err = None
        if f5 is not None:
            err = http_error_text(
                int(f5.get("status", 502)), f"api/organizations/{ctx.org['id']}/workspaces", f5.get("body")
            )
            if not f5.get("side_effect"):
                return None, err
        if any(i["name"] == name for i in st["instances"] if not derive(i, now)["gone"]):
            return None, "duplicate workspace name"
        if take_fault(st, "capacity", type=itype) is not None:
            return None, f"no capacity available for instance type {itype}"
        boot = take_fault(st, "boot_failure", type=itype, instance=name)
        refused = take_fault(st, "ssh_refused", instance=name)
        inst = new_instance_record(
            ctx.cfg,
            st,
            name,
            itype,
            now,
            created_by=user["id"],
            org_id=ctx.org["id"],
            workspace_group_id=wg_id,
            cloud_cred_id=cc_id,
            failure=(boot.get("message") or "instance failed to boot: VM health check timed out") if boot else None,
            extra_ssh=float(refused.get("seconds", 0)) if refused else 0.0,
        )
        st["instances"].append(inst)
    prepare_sandbox(ctx.root, inst, ctx.cfg)
    if err is not None:
        return None, err
    return inst, None


def _wait_ready(ctx: Ctx, inst: dict, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    poll = ctx.t("poll_seconds")
    while time.monotonic() < deadline:
        cur = get_instance_by_id(ctx, inst["id"])
        if cur is None:
            ctx.log(f"  {inst['name']}: " + http_error_text(404, f"api/workspaces/{inst['id']}") + "\n")
            return
        d = derive(cur, ctx.now())
        if d["status"] == "RUNNING":
            ctx.log(f"  {inst['name']}: Ready\n")
            return
        if d["status"] == "FAILURE":
            msg = f"instance {inst['name']} failed"
            if d["status_message"]:
                msg += f": {d['status_message']}"
            ctx.log(f"  {inst['name']}: {msg}\n")
            return
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
    ctx.log(f"  {inst['name']}: Timeout waiting for ready state\n")


# --------------------------------------------------------------------------------------------------
# delete / stop / start
# --------------------------------------------------------------------------------------------------
def _names_or_error(ctx: Ctx, pos: list[str]) -> list[str]:
    names = list(pos) + ctx.names_from_stdin()
    if not names:
        raise CliError("instance name required: provide as argument or pipe from another command")
    return names
