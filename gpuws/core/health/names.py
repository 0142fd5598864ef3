"""The words each health check is shown with. The check IDs (`Finding.check`) are a contract of
`gpuws health --json` and `bench --check` ("health.<id>") and never change; views show these names."""

from __future__ import annotations

CHECK_NAMES: dict[str, str] = {
    "cuda": "CUDA version",
    "dcgm": "DCGM diagnostics",
    "drain_and_reset_recommended": "Drain and reset",
    "ecc": "ECC errors",
    "expect.gpu_count": "Expected GPU count",
    "expect.mig_mode": "Expected MIG mode",
    "expect.model": "Expected model",
    "fabric": "NVLink fabric",
    "gpu_lost": "GPU lost",
    "inforom": "infoROM",
    "kernel_log": "Kernel log",
    "nvidia-smi": "nvidia-smi",
    "nvlink": "NVLink links",
    "nvlink_errors": "NVLink errors",
    "pcie": "PCIe link",
    "pcie_replays": "PCIe replays",
    "persistence": "Persistence mode",
    "power_limit": "Power limit",
    "readings": "Impossible readings",
    "remapped_rows": "Remapped memory rows",
    "reset_required": "GPU reset",
    "retired_pages": "Retired memory pages",
    "throttle": "Clock throttling",
    "xid": "XID errors",
}


def check_name(check: str) -> str:
    """`check`'s name in words ("remapped_rows" -> "Remapped memory rows"); an unknown ID in words too."""
    return CHECK_NAMES.get(check) or check.replace("_", " ").replace(".", ": ").capitalize()
