"""Versions, profiles, timings, accounts and the instance-type catalog of the fake ``brev``."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


RELEASED_VERSION = "v0.6.327"
DOCUMENTED_VERSION = "v0.6.400-documented"
API_URL = "https://brevapi.us-west-2-prod.control-plane.brev.dev"
PUBLIC_API_URL = "https://api.brev.dev"
STATE_ENV = "FAKE_BREV_STATE"
PROFILES = ("released", "documented")

DEFAULT_TIMINGS: dict[str, float] = {
    "deploy_seconds": 0.3,
    "build_seconds": 0.2,
    "ssh_seconds": 0.2,
    "delete_seconds": 0.3,
    "stop_seconds": 0.3,
    "start_seconds": 0.3,
    "poll_seconds": 0.05,
    "probe_seconds": 0.05,
}

DEFAULT_ACCOUNTS: dict = {
    "user": {"id": "user", "username": "sim-user", "email": "sim-user@example.com"},
    "org": {"id": "org-2p9sim0001", "name": "sim-org"},
    "cloud_credentials": [{"id": "cc-aws-4f1c2b", "name": "aws-default"}],
    "workspace_groups": [{"id": "wg-aws-us-east-1", "name": "aws-us-east-1"}],
}


def _gpu(
    type_: str,
    cloud: str,
    provider: str,
    gpu: str,
    count: int,
    vram: int,
    cap: float,
    vcpus: int,
    ram: int,
    dmin: int,
    dmax: int,
    boot: int,
    price: float,
    **kw: Any,
) -> dict[str, Any]:
    return {
        "type": type_,
        "cloud": cloud,
        "provider": provider,
        "gpu_name": gpu,
        "gpu_count": count,
        "vram_per_gpu_gb": vram,
        "total_vram_gb": vram * count,
        "capability": cap,
        "vcpus": vcpus,
        "memory": f"{ram}GiB",
        "ram_gb": ram,
        "arch": kw.get("arch", "x86_64"),
        "disk_min_gb": dmin,
        "disk_max_gb": dmax,
        "disk_price_per_gb_mo": kw.get("disk_price", 0.1 if dmin != dmax else 0),
        "boot_time_seconds": boot,
        "stoppable": kw.get("stoppable", True),
        "rebootable": kw.get("rebootable", True),
        "flex_ports": kw.get("flex_ports", True),
        "price_per_hour": price,
    }


DEFAULT_CATALOG: list[dict] = [
    _gpu("g4dn.xlarge", "aws", "aws", "T4", 1, 16, 7.5, 4, 16, 125, 16000, 300, 0.63),
    _gpu("p3.2xlarge", "aws", "aws", "V100", 1, 16, 7.0, 8, 61, 250, 16000, 360, 3.67),
    _gpu("g6.xlarge", "aws", "aws", "L4", 1, 24, 8.9, 4, 16, 250, 16000, 330, 0.96),
    _gpu("g5.xlarge", "aws", "aws", "A10G", 1, 24, 8.6, 4, 16, 250, 16000, 330, 1.21),
    _gpu("g6e.xlarge", "aws", "aws", "L40S", 1, 48, 8.9, 4, 32, 250, 16000, 390, 2.24),
    _gpu(
        "gpu_1x_h100_pcie",
        "lambda",
        "lambda-labs",
        "H100",
        1,
        80,
        9.0,
        26,
        200,
        1024,
        1024,
        300,
        2.99,
        stoppable=False,
        flex_ports=False,
    ),
    _gpu("a2-ultragpu-1g", "gcp", "gcp", "A100", 1, 80, 8.0, 12, 170, 500, 10000, 420, 6.09),
    _gpu("g6e.12xlarge", "aws", "aws", "L40S", 4, 48, 8.9, 48, 384, 250, 16000, 420, 12.52),
    _gpu("a2-ultragpu-8g", "gcp", "gcp", "A100", 8, 80, 8.0, 96, 1360, 500, 10000, 540, 48.73),
    _gpu("p5.48xlarge", "aws", "aws", "H100", 8, 80, 9.0, 192, 2048, 500, 16000, 600, 98.32),
    {
        "type": "n2-standard-8",
        "cloud": "gcp",
        "provider": "gcp",
        "gpu_name": "",
        "gpu_count": 0,
        "vram_per_gpu_gb": 0,
        "total_vram_gb": 0,
        "capability": 0,
        "vcpus": 8,
        "memory": "32GiB",
        "ram_gb": 32,
        "arch": "x86_64",
        "disk_min_gb": 50,
        "disk_max_gb": 10000,
        "disk_price_per_gb_mo": 0.1,
        "boot_time_seconds": 120,
        "stoppable": True,
        "rebootable": True,
        "flex_ports": True,
        "price_per_hour": 0.39,
    },
    {
        "type": "m6i.2xlarge",
        "cloud": "aws",
        "provider": "aws",
        "gpu_name": "",
        "gpu_count": 0,
        "vram_per_gpu_gb": 0,
        "total_vram_gb": 0,
        "capability": 0,
        "vcpus": 8,
        "memory": "32GiB",
        "ram_gb": 32,
        "arch": "x86_64",
        "disk_min_gb": 50,
        "disk_max_gb": 16000,
        "disk_price_per_gb_mo": 0.1,
        "boot_time_seconds": 120,
        "stoppable": True,
        "rebootable": True,
        "flex_ports": True,
        "price_per_hour": 0.46,
    },
]

# nvidia-smi product names for the fake nvidia-smi tool.
SMI_NAMES = {
    "T4": "Tesla T4",
    "V100": "Tesla V100-SXM2-16GB",
    "L4": "NVIDIA L4",
    "A10G": "NVIDIA A10G",
    "L40S": "NVIDIA L40S",
    "A100": "NVIDIA A100-SXM4-80GB",
    "H100": "NVIDIA H100 80GB HBM3",
}

DEFAULT_CONFIG: dict = {
    "profile": "released",
    "version": None,
    "timings": dict(DEFAULT_TIMINGS),
    "now_offset": 0.0,
    "accounts": DEFAULT_ACCOUNTS,
    "catalog": DEFAULT_CATALOG,
    "revoked_tokens": [],
    "ls_json_shape": "object",
    "auth_error_style": "prompt",
    "healthy": True,
    "start_wait_max_seconds": 30.0,
    "probe_limit": 40,
    "sandbox_env": {},
}
