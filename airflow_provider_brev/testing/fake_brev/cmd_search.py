"""``brev search [gpu|cpu]``: catalog filters (shared with ``create``'s type choice) and the JSON output."""

from __future__ import annotations

import json

from airflow_provider_brev.testing.fake_brev.catalog import PUBLIC_API_URL
from airflow_provider_brev.testing.fake_brev.context import Ctx, maybe_5xx
from airflow_provider_brev.testing.fake_brev.flags import CliError, http_error_text
from airflow_provider_brev.testing.fake_brev.store import gonum

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: ``min_*`` filter -> the catalog key that must be at least that
_MINIMA = {
    "min_vram": "vram_per_gpu_gb",
    "min_total_vram": "total_vram_gb",
    "min_capability": "capability",
    "min_disk": "disk_max_gb",
}
_JSON_KEYS = "type cloud provider gpu_name gpu_count vram_per_gpu_gb total_vram_gb capability vcpus memory ram_gb arch"
_JSON_KEYS += " disk_min_gb disk_max_gb"


def filter_catalog(
    cfg: dict, *, cpu: bool = False, gpu_name: str = "", provider: str = "", max_boot_time: int = 0, **minima: Any
) -> list[dict]:
    """Catalog entries matching ``brev search``'s filters (``gpu_name``/``provider``: case-insensitive substring;
    ``min_*``: see :data:`_MINIMA`; ``stoppable``/``rebootable``/``flex_ports``: required), cheapest first."""
    required = [k for k in ("stoppable", "rebootable", "flex_ports") if minima.pop(k, False)]
    res = [
        dict(c)
        for c in cfg.get("catalog") or []
        if bool(c.get("gpu_count")) != cpu
        and gpu_name.lower() in (c.get("gpu_name") or "").lower()
        and provider.lower() in (c.get("provider") or "").lower()
        and all(c.get(_MINIMA[k], 0) >= (v or 0) for k, v in minima.items())
        and (not max_boot_time or 0 < c.get("boot_time_seconds", 0) <= max_boot_time * 60)
        and all(c.get(k) for k in required)
    ]
    return sorted(res, key=lambda c: c.get("price_per_hour") or 0)


def search_json_record(c: dict, min_disk: float = 0) -> dict:
    dmin, dmax = c.get("disk_min_gb", 0), c.get("disk_max_gb", 0)
    target = min_disk if (dmin != dmax and min_disk and dmin <= min_disk <= dmax) else dmin
    rec = {
        k: gonum(c.get(k, "" if k in ("type", "cloud", "provider", "gpu_name", "memory", "arch") else 0))
        for k in _JSON_KEYS.split()
    }
    if c.get("disk_price_per_gb_mo"):
        rec["disk_price_per_gb_mo"] = gonum(c["disk_price_per_gb_mo"])
    rec["boot_time_seconds"] = c.get("boot_time_seconds", 0)
    rec.update({k: bool(c.get(k)) for k in ("stoppable", "rebootable", "flex_ports")})
    if target:
        rec["target_disk_gb"] = gonum(float(target))
    rec["price_per_hour"] = gonum(c.get("price_per_hour", 0))
    return rec


def cmd_search(ctx: Ctx, v: dict, pos: list[str]) -> int:
    if pos and (pos[0] not in ("gpu", "cpu") or len(pos) > 1):
        raise CliError(f'unknown command "{pos[0]}" for "brev search"')
    f = maybe_5xx(ctx, "search")
    if f is not None:
        status, body = int(f.get("status", 502)), f.get("body")
        raise CliError(
            http_error_text(status, "v1/instance/types", body, version=ctx.version, base=PUBLIC_API_URL, local=False)
        )
    cpu = pos == ["cpu"]
    filters = {} if cpu else {k.replace("-", "_"): v[k] for k in ("min-vram", "min-total-vram", "min-capability")}
    found = filter_catalog(ctx.cfg, cpu=cpu, gpu_name="" if cpu else v["gpu-name"], provider=v["provider"], **filters)
    recs = [search_json_record(c) for c in found]
    if not v["json"]:
        raise CliError("simulator: only `brev search --json` is simulated")
    ctx.out((json.dumps(recs, indent=2, ensure_ascii=False) if recs else "[]") + "\n")
    return 0
