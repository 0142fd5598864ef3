"""`--query-gpu` / `--query-compute-apps` fields of the simulated nvidia-smi.

Header names, units and value formats are copied from real captures
(fixtures/nvidia-smi-captures/h100-80gb-hbm3__590.48.01.txt): units appear in the header as
"memory.used [MiB]" and after values as "0 MiB"; values the driver lacks print "[N/A]".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gpuws.sim import health
from gpuws.sim.dynamics import (
    REASON_APPLICATIONS_CLOCKS_SETTING,
    REASON_GPU_IDLE,
    REASON_HW_POWER_BRAKE_SLOWDOWN,
    REASON_HW_SLOWDOWN,
    REASON_HW_THERMAL_SLOWDOWN,
    REASON_SW_POWER_CAP,
    REASON_SW_THERMAL_SLOWDOWN,
    REASON_SYNC_BOOST,
    REASONS_SUPPORTED,
    GpuSample,
)
from gpuws.sim.state import GpuState, SimProcess, SimState

NA = "[N/A]"
DEPRECATED = "[Requested functionality has been deprecated]"


@dataclass
class GpuContext:
    """What one CSV row is computed from."""

    state: SimState
    gpu: GpuState
    sample: GpuSample
    now: float


Getter = Callable[[GpuContext], str | None]  # None -> "[N/A]"


@dataclass(frozen=True)
class Field:
    name: str  # canonical name, printed in the header
    unit: str | None
    get: Getter


def timestamp(now: float) -> str:
    """nvidia-smi's CSV timestamp: "2026/07/14 08:12:38.696"."""
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"


def ctime_like(now: float) -> str:
    """The timestamp of `-q -x` and the table: "Fri Aug  4 11:44:30 2023" (C's ctime)."""
    return time.ctime(now)


def _is_vgpu(c: GpuContext) -> bool:
    return c.gpu.model.virtualization_mode == "VGPU"


def _reason(bit: int) -> Getter:
    return lambda c: "Active" if c.sample.reasons & bit else "Not Active"


def _power(value: Callable[[GpuContext], float]) -> Getter:
    return lambda c: None if _is_vgpu(c) else f"{value(c):.2f}"


def _util(value: Callable[[GpuSample], int | None]) -> Getter:
    return lambda c: None if (v := value(c.sample)) is None else str(v)


def _bus_part(c: GpuContext, part: int) -> str:
    # "00000000:18:00.0" -> domain 0x0000, bus 0x18, device 0x00
    domain, bus, dev = c.gpu.pci_bus_id.split(":")
    return ["0x" + domain[-4:], "0x" + bus, "0x" + dev.split(".")[0]][part]


_GPU_FIELDS: list[Field] = [
    Field("timestamp", None, lambda c: timestamp(c.now)),
    Field("driver_version", None, lambda c: c.state.driver_version),
    Field("count", None, lambda c: str(len(c.state.gpus))),
    Field("name", None, lambda c: c.gpu.model.name),
    Field("serial", None, lambda c: c.gpu.serial),
    Field("uuid", None, lambda c: c.gpu.uuid),
    Field("pci.bus_id", None, lambda c: c.gpu.pci_bus_id),
    Field("pci.domain", None, lambda c: _bus_part(c, 0)),
    Field("pci.bus", None, lambda c: _bus_part(c, 1)),
    Field("pci.device", None, lambda c: _bus_part(c, 2)),
    Field("pci.device_id", None, lambda c: "0x" + c.gpu.model.pci_device_id),
    Field("pci.sub_device_id", None, lambda c: "0x" + c.gpu.model.pci_sub_system_id),
    Field("pcie.link.gen.current", None, lambda c: str(health.pcie_gen_current(c.gpu, c.sample.pcie_gen_current))),
    Field("pcie.link.gen.gpucurrent", None,
          lambda c: str(health.pcie_gen_current(c.gpu, c.sample.pcie_gen_current))),
    Field("pcie.link.gen.max", None, lambda c: str(health.pcie_gen_max_system(c.gpu))),
    Field("pcie.link.gen.gpumax", None, lambda c: str(c.gpu.model.pcie_gen_max)),
    Field("pcie.link.gen.hostmax", None, lambda c: None),
    Field("pcie.link.width.current", None, lambda c: str(health.pcie_width_current(c.gpu))),
    Field("pcie.link.width.max", None, lambda c: str(c.gpu.model.pcie_width_max)),
    Field("index", None, lambda c: str(c.gpu.index)),
    Field("display_mode", None, lambda c: DEPRECATED),
    Field("display_active", None, lambda c: "Disabled"),
    Field("persistence_mode", None, lambda c: "Enabled"),
    Field("vbios_version", None, lambda c: c.gpu.model.vbios_version),
    Field("fan.speed", "%", lambda c: str(int(30 + 50 * c.sample.load)) if c.gpu.model.has_fan else None),
    Field("pstate", None, lambda c: c.sample.pstate),
    Field("clocks_event_reasons.supported", None, lambda c: f"0x{REASONS_SUPPORTED:016X}"),
    Field("clocks_event_reasons.active", None, lambda c: f"0x{c.sample.reasons:016X}"),
    Field("clocks_event_reasons.gpu_idle", None, _reason(REASON_GPU_IDLE)),
    Field("clocks_event_reasons.applications_clocks_setting", None, _reason(REASON_APPLICATIONS_CLOCKS_SETTING)),
    Field("clocks_event_reasons.sw_power_cap", None, _reason(REASON_SW_POWER_CAP)),
    Field("clocks_event_reasons.hw_slowdown", None, _reason(REASON_HW_SLOWDOWN)),
    Field("clocks_event_reasons.hw_thermal_slowdown", None, _reason(REASON_HW_THERMAL_SLOWDOWN)),
    Field("clocks_event_reasons.hw_power_brake_slowdown", None, _reason(REASON_HW_POWER_BRAKE_SLOWDOWN)),
    Field("clocks_event_reasons.sw_thermal_slowdown", None, _reason(REASON_SW_THERMAL_SLOWDOWN)),
    Field("clocks_event_reasons.sync_boost", None, _reason(REASON_SYNC_BOOST)),
    Field("memory.total", "MiB", lambda c: str(c.sample.mem_total_mib)),
    Field("memory.reserved", "MiB", lambda c: str(c.sample.mem_reserved_mib)),
    Field("memory.used", "MiB", lambda c: str(c.sample.mem_used_mib)),
    Field("memory.free", "MiB", lambda c: str(c.sample.mem_free_mib)),
    Field("compute_mode", None, lambda c: "Default"),
    Field("compute_cap", None, lambda c: c.gpu.model.compute_cap),
    Field("utilization.gpu", "%", _util(lambda s: s.util_gpu_pct)),
    Field("utilization.memory", "%", _util(lambda s: s.util_mem_pct)),
    Field("utilization.encoder", "%", _util(lambda s: s.encoder_pct)),
    Field("utilization.decoder", "%", _util(lambda s: s.decoder_pct)),
    Field("ecc.mode.current", None, lambda c: "Enabled" if c.gpu.model.ecc else None),
    Field("ecc.mode.pending", None, lambda c: "Enabled" if c.gpu.model.ecc else None),
    Field("ecc.errors.corrected.volatile.total", None, lambda c: "0" if c.gpu.model.ecc else None),
    Field("ecc.errors.corrected.aggregate.total", None, lambda c: "0" if c.gpu.model.ecc else None),
    Field("ecc.errors.uncorrected.volatile.total", None, lambda c: "0" if c.gpu.model.ecc else None),
    Field("ecc.errors.uncorrected.aggregate.total", None, lambda c: "0" if c.gpu.model.ecc else None),
    Field("retired_pages.single_bit_ecc.count", None, lambda c: None),
    Field("retired_pages.double_bit.count", None, lambda c: None),
    Field("retired_pages.pending", None, lambda c: None),
    Field("remapped_rows.correctable", None, lambda c: "0" if c.gpu.model.mig_capable else None),
    Field("remapped_rows.uncorrectable", None, lambda c: "0" if c.gpu.model.mig_capable else None),
    Field("remapped_rows.pending", None, lambda c: "No" if c.gpu.model.mig_capable else None),
    Field("remapped_rows.failure", None, lambda c: "No" if c.gpu.model.mig_capable else None),
    Field("temperature.gpu", None, lambda c: str(c.sample.temp_c)),
    Field("temperature.memory", None, lambda c: str(c.sample.mem_temp_c) if c.gpu.model.mig_capable else None),
    Field("power.management", None, lambda c: DEPRECATED),
    Field("power.draw", "W", _power(lambda c: c.sample.power_w)),
    Field("power.draw.average", "W", _power(lambda c: c.sample.power_w)),
    Field("power.draw.instant", "W", _power(lambda c: c.sample.power_w)),
    Field("power.limit", "W", _power(lambda c: health.power_limit_w(c.gpu))),
    Field("enforced.power.limit", "W", _power(lambda c: health.power_limit_w(c.gpu))),
    Field("power.default_limit", "W", _power(lambda c: c.gpu.model.power_limit_w)),
    Field("power.min_limit", "W", _power(lambda c: c.gpu.model.power_min_w)),
    Field("power.max_limit", "W", _power(lambda c: c.gpu.model.power_limit_w)),
    Field("clocks.current.graphics", "MHz", lambda c: str(c.sample.sm_clock_mhz)),
    Field("clocks.current.sm", "MHz", lambda c: str(c.sample.sm_clock_mhz)),
    Field("clocks.current.memory", "MHz", lambda c: str(c.sample.mem_clock_mhz)),
    Field("clocks.current.video", "MHz", lambda c: str(c.sample.video_clock_mhz)),
    Field("clocks.applications.graphics", None, lambda c: DEPRECATED),
    Field("clocks.applications.memory", None, lambda c: DEPRECATED),
    Field("clocks.max.graphics", "MHz", lambda c: str(c.gpu.model.max_sm_clock_mhz)),
    Field("clocks.max.sm", "MHz", lambda c: str(c.gpu.model.max_sm_clock_mhz)),
    Field("clocks.max.memory", "MHz", lambda c: str(c.gpu.model.max_mem_clock_mhz)),
    Field("mig.mode.current", None, lambda c: _mig_mode(c, c.gpu.mig_current)),
    Field("mig.mode.pending", None, lambda c: _mig_mode(c, c.gpu.mig_pending)),
]

GPU_FIELDS: dict[str, Field] = {f.name: f for f in _GPU_FIELDS}

# Other names nvidia-smi accepts for the same fields (`nvidia-smi --help-query-gpu`).
GPU_FIELD_ALIASES: dict[str, str] = {
    "gpu_name": "name",
    "gpu_serial": "serial",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "pstate": "pstate",
    "clocks.gr": "clocks.current.graphics",
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.video": "clocks.current.video",
    "clocks.max.gr": "clocks.max.graphics",
    "clocks.max.mem": "clocks.max.memory",
    "enforced.power.limit": "enforced.power.limit",
    **{
        name.replace("clocks_event_reasons", "clocks_throttle_reasons"): name
        for name in GPU_FIELDS
        if name.startswith("clocks_event_reasons.")
    },
}


def _mig_mode(c: GpuContext, on: bool) -> str | None:
    if not c.gpu.model.mig_capable:
        return None
    return "Enabled" if on else "Disabled"


@dataclass
class ProcessContext:
    state: SimState
    gpu: GpuState
    process: SimProcess
    now: float


ProcessGetter = Callable[[ProcessContext], str | None]


@dataclass(frozen=True)
class ProcessField:
    name: str
    unit: str | None
    get: ProcessGetter


_APP_FIELDS: list[ProcessField] = [
    ProcessField("timestamp", None, lambda c: timestamp(c.now)),
    ProcessField("gpu_name", None, lambda c: c.gpu.model.name),
    ProcessField("gpu_bus_id", None, lambda c: c.gpu.pci_bus_id),
    ProcessField("gpu_serial", None, lambda c: c.gpu.serial),
    ProcessField("gpu_uuid", None, lambda c: c.gpu.uuid),
    ProcessField("pid", None, lambda c: str(c.process.pid)),
    ProcessField("process_name", None, lambda c: c.process.name),
    ProcessField("used_gpu_memory", "MiB", lambda c: str(c.process.used_mib)),
]
APP_FIELDS: dict[str, ProcessField] = {f.name: f for f in _APP_FIELDS}
APP_FIELD_ALIASES: dict[str, str] = {"name": "process_name", "used_memory": "used_gpu_memory"}


def format_value(value: str | None, unit: str | None, nounits: bool) -> str:
    if value is None:
        return NA
    if unit is None or nounits or value.startswith("["):
        return value
    return f"{value} {unit}"


def header(name: str, unit: str | None) -> str:
    return f"{name} [{unit}]" if unit else name

