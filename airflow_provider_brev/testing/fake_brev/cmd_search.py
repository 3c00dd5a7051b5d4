"""``brev search`` (GPU and ``cpu``): catalog filters, sort keys, table and JSON output."""

from __future__ import annotations

import json

from airflow_provider_brev.testing.fake_brev.catalog import PUBLIC_API_URL
from airflow_provider_brev.testing.fake_brev.cmd_ls import _table
from airflow_provider_brev.testing.fake_brev.context import Ctx, maybe_5xx
from airflow_provider_brev.testing.fake_brev.flags import CliError, http_error_text
from airflow_provider_brev.testing.fake_brev.store import _gonum

TYPE_CHECKING = False


SORT_KEYS = {
    "price": "price_per_hour",
    "gpu-count": "gpu_count",
    "vram": "vram_per_gpu_gb",
    "total-vram": "total_vram_gb",
    "vcpu": "vcpus",
    "type": "type",
    "capability": "capability",
    "provider": "provider",
    "disk": "disk_max_gb",
    "boot-time": "boot_time_seconds",
    "ram": "ram_gb",
    "arch": "arch",
}


def filter_catalog(
    cfg: dict,
    *,
    gpu_only: bool = True,
    cpu_only: bool = False,
    gpu_name: str = "",
    provider: str = "",
    arch: str = "",
    min_vram: float = 0,
    min_total_vram: float = 0,
    min_capability: float = 0,
    min_ram: float = 0,
    min_disk: float = 0,
    min_vcpu: int = 0,
    max_boot_time: int = 0,
    stoppable: bool = False,
    rebootable: bool = False,
    flex_ports: bool = False,
    sort_by: str = "price",
    desc: bool = False,
) -> list[dict]:
    res = []
    for c in cfg.get("catalog") or []:
        is_cpu = not c.get("gpu_count")
        if gpu_only and is_cpu:
            continue
        if cpu_only and not is_cpu:
            continue
        if gpu_name and gpu_name.lower() not in (c.get("gpu_name") or "").lower():
            continue
        if provider and provider.lower() not in (c.get("provider") or "").lower():
            continue
        if arch and arch.lower() not in (c.get("arch") or "").lower():
            continue
        if min_vcpu and c.get("vcpus", 0) < min_vcpu:
            continue
        if min_ram and c.get("ram_gb", 0) < min_ram:
            continue
        if min_vram and c.get("vram_per_gpu_gb", 0) < min_vram:
            continue
        if min_total_vram and c.get("total_vram_gb", 0) < min_total_vram:
            continue
        if min_capability and c.get("capability", 0) < min_capability:
            continue
        if min_disk and c.get("disk_max_gb", 0) < min_disk:
            continue
        if max_boot_time and (not c.get("boot_time_seconds") or c["boot_time_seconds"] > max_boot_time * 60):
            continue
        if stoppable and not c.get("stoppable"):
            continue
        if rebootable and not c.get("rebootable"):
            continue
        if flex_ports and not c.get("flex_ports"):
            continue
        res.append(dict(c))
    key = SORT_KEYS.get(sort_by.lower(), "price_per_hour")
    res.sort(key=lambda c: c.get(key) or 0, reverse=desc)
    return res


def search_json_record(c: dict, min_disk: float = 0) -> dict:
    dmin, dmax = c.get("disk_min_gb", 0), c.get("disk_max_gb", 0)
    target = min_disk if (dmin != dmax and min_disk and dmin <= min_disk <= dmax) else dmin
    keys = [
        "type",
        "cloud",
        "provider",
        "gpu_name",
        "gpu_count",
        "vram_per_gpu_gb",
        "total_vram_gb",
        "capability",
        "vcpus",
        "memory",
        "ram_gb",
        "arch",
        "disk_min_gb",
        "disk_max_gb",
    ]
    rec = {
        k: _gonum(c.get(k, 0 if k not in ("type", "cloud", "provider", "gpu_name", "memory", "arch") else ""))
        for k in keys
    }
    if c.get("disk_price_per_gb_mo"):
        rec["disk_price_per_gb_mo"] = _gonum(c["disk_price_per_gb_mo"])
    rec["boot_time_seconds"] = c.get("boot_time_seconds", 0)
    rec["stoppable"] = bool(c.get("stoppable"))
    rec["rebootable"] = bool(c.get("rebootable"))
    rec["flex_ports"] = bool(c.get("flex_ports"))
    if target:
        rec["target_disk_gb"] = _gonum(float(target))
    rec["price_per_hour"] = _gonum(c.get("price_per_hour", 0))
    return rec


def _fmt_size(gb: float) -> str:
    return f"{gb / 1000:.0f}TB" if gb >= 1000 else f"{gb:.0f}GB"


def _fmt_boot(sec: int) -> str:
    if not sec:
        return "-"
    return f"{sec // 60}m" if sec % 60 == 0 else f"{sec // 60}m{sec % 60}s"


def search_table(recs: list[dict], cpu: bool) -> str:
    rows = []
    for r in recs:
        disk = (
            _fmt_size(r["disk_min_gb"])
            if r["disk_min_gb"] == r["disk_max_gb"]
            else (f"{_fmt_size(r['disk_min_gb'])}-{_fmt_size(r['disk_max_gb'])}")
        )
        feats = "".join(k for k, f in (("S", "stoppable"), ("R", "rebootable"), ("P", "flex_ports")) if r[f]) or "-"
        dprice = f"${r['disk_price_per_gb_mo']:.2f}" if r.get("disk_price_per_gb_mo") else "-"
        common = [
            disk,
            dprice,
            _fmt_boot(r["boot_time_seconds"]),
            feats,
            str(r["vcpus"]),
            f"${r['price_per_hour']:.2f}",
        ]
        tdisk = f"{r.get('target_disk_gb', 0):.0f}"
        if cpu:
            rows.append([r["type"], tdisk, r["provider"], r["memory"], *common])
        else:
            rows.append(
                [
                    r["type"],
                    tdisk,
                    r["provider"],
                    r["gpu_name"],
                    str(r["gpu_count"]),
                    f"{r['vram_per_gpu_gb']}GB",
                    f"{r['total_vram_gb']}GB",
                    f"{r['capability']}",
                    *common,
                ]
            )
    if cpu:
        header = ["TYPE", "TARGET_DISK", "PROVIDER", "RAM", "DISK", "$/GB/MO", "BOOT", "FEATURES", "VCPUs", "$/HR"]
    else:
        header = [
            "TYPE",
            "TARGET_DISK",
            "PROVIDER",
            "GPU",
            "COUNT",
            "VRAM/GPU",
            "TOTAL_VRAM",
            "CAPABILITY",
            "DISK",
            "$/GB/MO",
            "BOOT",
            "FEATURES",
            "VCPUs",
            "$/HR",
        ]
    return _table(header, rows)


def cmd_search(ctx: Ctx, v: dict, pos: list[str]) -> int:
    mode = "gpu"
    if pos:
        if pos[0] in ("gpu", "cpu") and len(pos) == 1:
            mode = pos[0]
        else:
            raise CliError(f'unknown command "{pos[0]}" for "brev search"')
    if v["sort"] and v["sort"].lower() not in SORT_KEYS:
        raise CliError(f'invalid sort option "{v["sort"]}". Valid options: {", ".join(sorted(SORT_KEYS))}')
    f = maybe_5xx(ctx, "search")
    if f is not None:
        raise CliError(
            http_error_text(int(f.get("status", 502)), "v1/instance/types", f.get("body"), base=PUBLIC_API_URL)
        )
    kw = {
        "provider": v["provider"],
        "arch": v["arch"],
        "min_ram": v["min-ram"],
        "min_disk": v["min-disk"],
        "min_vcpu": v["min-vcpu"],
        "max_boot_time": v["max-boot-time"],
        "stoppable": v["stoppable"],
        "rebootable": v["rebootable"],
        "flex_ports": v["flex-ports"],
        "sort_by": v["sort"] or "price",
        "desc": v["desc"],
    }
    if mode == "cpu":
        found = filter_catalog(ctx.cfg, gpu_only=False, cpu_only=True, **kw)
    else:
        found = filter_catalog(
            ctx.cfg,
            gpu_name=v.get("gpu-name", ""),
            min_vram=v.get("min-vram", 0),
            min_total_vram=v.get("min-total-vram", 0),
            min_capability=v.get("min-capability", 0),
            **kw,
        )
    recs = [search_json_record(c, v["min-disk"]) for c in found]
    if v["json"]:
        ctx.out((json.dumps(recs, indent=2, ensure_ascii=False) if recs else "[]") + "\n")
        return 0
    if not recs:
        if not ctx.stdout_piped:
            ctx.out(f"No {mode.upper()} instances match the specified filters\n")
        return 0
    ctx.out(search_table(recs, mode == "cpu"))
    if not ctx.stdout_piped:
        ctx.out(f"\nFound {len(recs)} {mode.upper()} instance types\n")
    return 0


# --------------------------------------------------------------------------------------------------
# create
# --------------------------------------------------------------------------------------------------
