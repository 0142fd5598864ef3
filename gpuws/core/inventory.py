"""What a host has: GPUs (from `nvidia-smi -q -x`) and host facts. Produced by the probe.

Field names are the JSON contract of `gpuws probe --json`; keep them as they are.
A value the driver does not report is `None`, never 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class MigDevice:
    """One MIG device (a GPU instance + compute instance pair) on a MIG-enabled GPU."""

    index: int
    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str | None  # e.g. "1g.10gb" where known
    memory_total_mib: int | None
    sm_count: int | None = None
    uuid: str | None = None


@dataclass
class GpuInfo:
    """One physical GPU (or one vGPU guest device) as the driver describes it."""

    index: int
    name: str
    uuid: str | None
    pci_bus_id: str | None
    memory_total_mib: int | None
    driver_version: str | None
    cuda_version: str | None
    compute_capability: str | None = None
    mig_mode: str | None = None  # "Enabled" / "Disabled" / None when not MIG-capable
    mig_mode_pending: str | None = None
    mig_devices: list[MigDevice] = field(default_factory=list)
    virtualization_mode: str | None = None  # "None", "Pass-Through", "VGPU", "Host VGPU", ...
    vgpu_profile: str | None = None  # e.g. "GRID P4-1Q" when this is a vGPU slice
    is_vgpu_slice: bool = False
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    power_limit_w: float | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    ecc_mode: str | None = None  # "Enabled" / "Disabled" / None when not supported
    persistence_mode: str | None = None
    product_brand: str | None = None
    serial: str | None = None

    @property
    def pcie_degraded(self) -> bool:
        """True when the link trains below what the card supports (e.g. x16 card at x8).

        Only width counts: generation drops at idle are normal power saving.
        """
        return (
            self.pcie_width_current is not None
            and self.pcie_width_max is not None
            and self.pcie_width_current < self.pcie_width_max
        )


@dataclass
class HostFacts:
    """Facts about the host itself, gathered alongside nvidia-smi."""

    hostname: str | None = None
    os: str | None = None
    kernel: str | None = None
    cpu_count: int | None = None
    ram_mib: int | None = None
    has_python3: bool = False
    has_nvml: bool = False  # nvidia-ml-py importable by the host's python3
    has_torch: bool = False
    has_cupy: bool = False
    has_nvcc: bool = False
    driver_found: bool = True
    simulated: bool = False  # the gpuws simulated GPU host, never a real one


@dataclass
class Inventory:
    """A probe's result: the host and its GPUs."""

    host: HostFacts
    gpus: list[GpuInfo]
    # Readings of nvidia-smi no working GPU gives (NaN, infinite, impossible), each said in words
    # (gpuws.core.nvsmi.readings): the inventory is shown, with these beside it.
    warnings: list[str] = field(default_factory=list)

    @property
    def simulated(self) -> bool:
        return self.host.simulated

    def to_dict(self) -> dict[str, Any]:
        return {"host": asdict(self.host), "gpus": [asdict(g) for g in self.gpus], "simulated": self.simulated,
                "warnings": list(self.warnings)}
