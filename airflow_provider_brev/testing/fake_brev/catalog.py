"""Versions, profiles, timings, accounts and the instance-type catalog of the fake ``brev``."""

from __future__ import annotations

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
    "start_seconds": 0.3,
    "stop_seconds": 0.3,
    "poll_seconds": 0.05,
    "probe_seconds": 0.05,
}

DEFAULT_ACCOUNTS: dict = {
    "user": {"id": "user", "username": "sim-user", "email": "sim-user@example.com"},
    "org": {"id": "org-2p9sim0001", "name": "sim-org"},
    "cloud_credentials": [{"id": "cc-aws-4f1c2b", "name": "aws-default"}],
    "workspace_groups": [{"id": "wg-aws-us-east-1", "name": "aws-us-east-1"}],
}

#: type, provider (= cloud, except lambda-labs), GPU, count, VRAM/GPU, capability, vCPUs, RAM GiB, disk min/max GB,
#: boot seconds, $/h, stoppable
_TYPES = [
    ("g4dn.xlarge", "aws", "T4", 1, 16, 7.5, 4, 16, 125, 16000, 300, 0.63, True),
    ("p3.2xlarge", "aws", "V100", 1, 16, 7.0, 8, 61, 250, 16000, 360, 3.67, True),
    ("g6.xlarge", "aws", "L4", 1, 24, 8.9, 4, 16, 250, 16000, 330, 0.96, True),
    ("g5.xlarge", "aws", "A10G", 1, 24, 8.6, 4, 16, 250, 16000, 330, 1.21, True),
    ("g6e.xlarge", "aws", "L40S", 1, 48, 8.9, 4, 32, 250, 16000, 390, 2.24, True),
    ("gpu_1x_h100_pcie", "lambda-labs", "H100", 1, 80, 9.0, 26, 200, 1024, 1024, 300, 2.99, False),
    ("a2-ultragpu-1g", "gcp", "A100", 1, 80, 8.0, 12, 170, 500, 10000, 420, 6.09, True),
    ("g6e.12xlarge", "aws", "L40S", 4, 48, 8.9, 48, 384, 250, 16000, 420, 12.52, True),
    ("a2-ultragpu-8g", "gcp", "A100", 8, 80, 8.0, 96, 1360, 500, 10000, 540, 48.73, True),
    ("p5.48xlarge", "aws", "H100", 8, 80, 9.0, 192, 2048, 500, 16000, 600, 98.32, True),
    ("n2-standard-8", "gcp", "", 0, 0, 0, 8, 32, 50, 10000, 120, 0.39, True),
    ("m6i.2xlarge", "aws", "", 0, 0, 0, 8, 32, 50, 16000, 120, 0.46, True),
]
DEFAULT_CATALOG: list[dict] = [
    {
        "type": t,
        "cloud": "lambda" if provider == "lambda-labs" else provider,
        "provider": provider,
        "gpu_name": gpu,
        "gpu_count": count,
        "vram_per_gpu_gb": vram,
        "total_vram_gb": vram * count,
        "capability": cap,
        "vcpus": vcpus,
        "memory": f"{ram}GiB",
        "ram_gb": ram,
        "arch": "x86_64",
        "disk_min_gb": dmin,
        "disk_max_gb": dmax,
        "disk_price_per_gb_mo": 0.1 if dmin != dmax else 0,
        "boot_time_seconds": boot,
        "stoppable": stoppable,
        "rebootable": True,
        "flex_ports": stoppable,
        "price_per_hour": price,
    }
    for t, provider, gpu, count, vram, cap, vcpus, ram, dmin, dmax, boot, price, stoppable in _TYPES
]

#: nvidia-smi product names for the fake nvidia-smi tool.
SMI_NAMES = {
    "T4": "Tesla T4",
    "V100": "Tesla V100-SXM2-16GB",
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
    "ls_json_shape": "object",  # "list": the bare-list `ls --json` of v0.6.317-0.6.322
    "auth_error_style": "prompt",  # "401": an expired session fails with 401 Unauthorized instead of the prompt
    "start_wait_max_seconds": 30.0,  # exec's auto-start of a STOPPED instance waits this long
    "probe_limit": 40,  # ssh probes while sshd boots
    "sandbox_env": {},  # extra environment of every sandbox command
}
