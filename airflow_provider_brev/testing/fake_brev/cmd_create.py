"""``brev create``: type resolution (``--type``, the documented ``--gpu``, or the catalog's defaults), placement,
retries across types, and the wait until ready (timeouts and boot failures still exit 0)."""

from __future__ import annotations

import time

from airflow_provider_brev.testing.fake_brev.cmd_search import filter_catalog
from airflow_provider_brev.testing.fake_brev.context import Ctx, authenticate, get_instance_by_id, raise_5xx
from airflow_provider_brev.testing.fake_brev.flags import NAME_RE, CliError, http_error_text
from airflow_provider_brev.testing.fake_brev.store import (
    catalog_index,
    derive,
    new_instance_record,
    prepare_sandbox,
    take_fault,
)

_FILTERS = (
    "gpu-name provider min-vram min-total-vram min-capability min-disk max-boot-time stoppable rebootable flex-ports"
)


def _disk(c: dict, min_disk: float) -> float:
    return min_disk if c["disk_min_gb"] < min_disk <= c["disk_max_gb"] else float(c["disk_min_gb"])


def _types(ctx: Ctx, v: dict) -> list[tuple[str, float]]:
    """(type, disk GB) candidates in order."""
    specs = [(t.strip(), 0.0) for t in (v["type"] or "").split(",") if t.strip()]
    if ctx.documented and v.get("gpu"):
        if specs:
            raise CliError("--gpu cannot be combined with --type or piped instance types")
        name, _, count = v["gpu"].partition(":")
        n = int(count) if count.isdigit() else (1 if not count else -1)
        if not name.strip() or n < 1:
            raise CliError(f'invalid --gpu value "{v["gpu"]}": expected NAME:COUNT, e.g. L40S:1')
        cands = [
            c for c in filter_catalog(ctx.cfg) if c["gpu_name"].lower() == name.strip().lower() and c["gpu_count"] == n
        ]
        if not cands:
            raise CliError(f"no instance type offers GPU \"{name}\" x{n}; run 'brev search' to see available options")
        return [(cands[0]["type"], _disk(cands[0], 500.0))]
    if specs:
        return specs
    user_filters = any(v[k] for k in _FILTERS.split())
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
        **{k.replace("-", "_"): v[k] for k in ("stoppable", "rebootable", "flex-ports")},
    )
    if not found:
        raise CliError("no GPU instances match the specified filters. Try 'brev search' to see available options")
    return [(c["type"], _disk(c, min_disk)) for c in found]


def _check_placement(ctx: Ctx, v: dict) -> tuple[str, str]:
    """(cloud credential, workspace group): the documented CLI requires a choice when the org has several."""
    acc = ctx.accounts
    chosen = []
    for flag, key, what in (
        ("cloud-cred-id", "cloud_credentials", "cloud credential"),
        ("workspace-group-id", "workspace_groups", "workspace group"),
    ):
        ids = [item["id"] for item in acc.get(key) or []]
        value = (v.get(flag) or "").strip() if ctx.documented else ""
        if value and value not in ids:
            raise CliError(
                f'placement error: {what} "{value}" not found in organization {ctx.org["name"]} (see brev orgs --json)'
            )
        if ctx.documented and not value and len(ids) > 1:
            raise CliError(
                f"placement error: this organization has {len(ids)} {what}s; pass --{flag} <id> (see brev orgs --json)"
            )
        chosen.append(value or (ids[0] if ids else ""))
    return chosen[0], chosen[1]


def cmd_create(ctx: Ctx, v: dict, pos: list[str]) -> int:
    name = v["name"] or (pos[0] if pos else "")
    if not name:
        raise CliError("name is required")
    if len(name) > 63:
        raise CliError(f"name must be 63 characters or fewer (got {len(name)})")
    if not NAME_RE.match(name):
        raise CliError(
            "name must start with a letter or digit and contain only letters, digits, hyphens, underscores, and dots"
        )
    count = v["count"]
    if count < 1:
        raise CliError("--count must be at least 1")
    specs = _types(ctx, v)
    shown = ", ".join(f"{t} ({d:.0f}GB disk)" if d > 0 else t for t, d in specs)
    if v["dry-run"]:
        ctx.out(shown + "\n")
        return 0
    user = authenticate(ctx)
    raise_5xx(ctx, "create", "api/me")
    cc_id, wg_id = _check_placement(ctx, v)
    with ctx.store.txn() as st:
        listing_down = take_fault(st, "listing_unavailable") is not None
    if listing_down:
        url = http_error_text(503, "api/instances/alltypesavailable/" + ctx.org["id"], version=ctx.version)
        ctx.log(f"Warning: could not fetch instance types with workspace groups: {url}\n")
        ctx.log("Falling back to default workspace group\n")
    known = catalog_index(ctx.cfg)
    parallel = max(1, v["parallel"])
    ctx.log(f"Attempting to create {count} instance(s) with {parallel} parallel attempts\n")
    ctx.log(f"Instance types to try: {shown}\n\n")
    created: list[dict] = []
    for itype, _disk_gb in specs:
        if len(created) >= count:
            break
        remaining = count - len(created)
        ctx.log(f"Trying {itype} for {remaining} instance(s)...\n")
        had_failure, fatal = False, None
        if not listing_down and itype not in known:
            ctx.log(
                f"Skipping: instance type \"{itype}\" is not a recognized type; run 'brev search' to see available types\n"
            )
            had_failure = True
        for k, idx in enumerate(range(len(created), count) if itype in known or listing_down else []):
            wid = k % min(parallel, remaining) + 1
            iname = f"{name}-{idx + 1}" if count > 1 else name
            ctx.log(f"[Worker {wid}] Trying {itype} for instance '{iname}'...\n")
            inst, failure = _create_one(ctx, user, iname, itype, listing_down, cc_id, wg_id)
            if failure is not None:
                ctx.log(f"[Worker {wid}] {itype} Failed: {failure}\n")
                had_failure = True
                if "duplicate workspace" in failure:
                    fatal = f"workspace '{iname}' already exists. Use a different name or delete the existing workspace"
            elif inst is not None:
                ctx.log(f"[Worker {wid}] {itype} Success! Created instance '{iname}'\n")
                created.append(inst)
        if fatal:
            ctx.log(f"\nError: {fatal}\n")
            break
        if len(created) < count and had_failure:
            ctx.log(f"\nType {itype} had failures, trying next type...\n\n")
    if len(created) < count:
        ctx.log(f"\nWarning: Only created {len(created)}/{count} instances\n")
        raise CliError(f"could only create {len(created)}/{count} instances")
    if not v["detached"]:
        ctx.log("\nWaiting for instance(s) to be ready...\nYou can safely ctrl+c to exit\n")
        for inst in created:
            _wait_ready(ctx, inst, float(v["timeout"]))
    if ctx.stdout_piped:
        ctx.out("".join(f"{inst['name']}\n" for inst in created))
        return 0
    ctx.out(f"\nSuccessfully created {len(created)} instance(s)!\n\n")
    for inst in created:
        ctx.out(f"Instance: {inst['name']}\n  ID: {inst['id']}\n  Type: {inst['instance_type']}\n\n")
    return 0


def _create_one(
    ctx: Ctx, user: dict, name: str, itype: str, listing_down: bool, cc_id: str, wg_id: str
) -> tuple[dict | None, str | None]:
    """One `POST api/organizations/{org}/workspaces`: (instance, None) or (None, error text)."""
    if listing_down:
        return (
            None,
            f'could not resolve workspace group for "{itype}" (instance-type listing was unavailable); please retry',
        )
    now = ctx.now()
    with ctx.store.txn(now=now) as st:
        f5 = take_fault(st, "http_5xx", command="create", stage="post")
        err = None
        if f5 is not None:
            path = f"api/organizations/{ctx.org['id']}/workspaces"
            err = http_error_text(int(f5.get("status", 502)), path, f5.get("body"), version=ctx.version)
            if not f5.get("side_effect"):
                return None, err
        if any(i["name"] == name for i in st["instances"] if not derive(i, now)["gone"]):
            return None, "duplicate workspace name"
        if take_fault(st, "capacity", type=itype) is not None:
            return None, f"no capacity available for instance type {itype}"
        boot = take_fault(st, "boot_failure", type=itype, instance=name)
        refused = take_fault(st, "ssh_refused", instance=name)
        slow = take_fault(st, "slow_create", instance=name)
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
    if slow is not None:  # the workspace exists; the CLI has not returned yet (a slow API answer)
        time.sleep(float(slow.get("seconds") or 0.0))
    return (None, err) if err is not None else (inst, None)


def _wait_ready(ctx: Ctx, inst: dict, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cur = get_instance_by_id(ctx, inst["id"])
        d = derive(cur, ctx.now()) if cur else {}
        if cur is None:
            ctx.log(
                f"  {inst['name']}: " + http_error_text(404, f"api/workspaces/{inst['id']}", version=ctx.version) + "\n"
            )
            return
        if d["status"] in ("RUNNING", "FAILURE"):
            failed = f"instance {inst['name']} failed" + (f": {d['status_message']}" if d["status_message"] else "")
            ctx.log(f"  {inst['name']}: {'Ready' if d['status'] == 'RUNNING' else failed}\n")
            return
        time.sleep(min(ctx.t("poll_seconds"), max(0.0, deadline - time.monotonic())))
    ctx.log(f"  {inst['name']}: Timeout waiting for ready state\n")
