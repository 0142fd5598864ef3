"""The telemetry sample model: one reading of one GPU (or MIG device) at one instant.

Both sources (the on-host NVML agent and streaming `nvidia-smi --query-gpu`) produce the same
`GpuSample`. A value the source cannot give, or the device does not support (utilisation on a
MIG device, fan on a passively cooled card), is `None` -- JSON `null` -- and never 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from gpuws.core.errors import ParseError
from gpuws.core.telemetry.throttle import decode_mask

SOURCE_NVML: Final = "nvml"
SOURCE_NVIDIA_SMI: Final = "nvidia-smi"
SOURCES: Final = (SOURCE_NVML, SOURCE_NVIDIA_SMI)

# Numeric fields, in the order the JSON and CSV outputs list them.
FLOAT_FIELDS: Final = (
    "util_gpu_pct",
    "util_mem_pct",
    "mem_used_mib",
    "mem_total_mib",
    "temp_c",
    "power_w",
    "power_limit_w",
    "sm_clock_mhz",
    "sm_clock_max_mhz",
    "mem_clock_mhz",
    "mem_clock_max_mhz",
    "pcie_rx_kib_s",
    "pcie_tx_kib_s",
    "fan_pct",
    "enc_util_pct",
    "dec_util_pct",
    "sm_active_pct",
)
INT_FIELDS: Final = (
    "pcie_gen_current",
    "pcie_gen_max",
    "pcie_width_current",
    "pcie_width_max",
    "ecc_errors_corrected",
    "ecc_errors_uncorrected",
)


@dataclass(slots=True)
class ProcessSample:
    """A process holding GPU memory. `command` is the host's raw command line (shorten and sanitise
    it before showing it); `sm_util_pct` is its share of the SM where NVML reports one."""

    pid: int
    name: str | None
    used_mib: float | None
    user: str | None = None
    command: str | None = None
    sm_util_pct: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of one process in `gpuws watch --json`."""
        return {"pid": self.pid, "name": self.name, "used_mib": self.used_mib, "user": self.user,
                "command": self.command, "sm_util_pct": self.sm_util_pct}


@dataclass(slots=True)
class HostSample:
    """The host itself at one instant: CPU busy %, memory used/total and load average (None: unknown)."""

    t: float
    cpu_pct: float | None = None
    ram_used_mib: float | None = None
    ram_total_mib: float | None = None
    load_1m: float | None = None
    load_5m: float | None = None
    load_15m: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"t_unix": round(self.t, 3), "cpu_pct": self.cpu_pct, "ram_used_mib": self.ram_used_mib,
                "ram_total_mib": self.ram_total_mib, "load_1m": self.load_1m, "load_5m": self.load_5m,
                "load_15m": self.load_15m}


@dataclass(slots=True, frozen=True)
class MigRef:
    """Where a MIG device sits: its parent GPU, device index, GPU instance and compute instance."""

    parent_gpu: int
    device: int
    gi: int | None
    ci: int | None


@dataclass(slots=True)
class GpuSample:
    """One reading of one GPU or MIG device. `t` is local unix time (host clock skew removed).

    `util_gpu_pct` is one thing on every device: the share of time in which a kernel ran on it
    (NVML's utilisation rate on a whole GPU; on a MIG device, where that rate is not supported, GPM's
    graphics/compute activity of its GPU instance). `sm_active_pct` is the share of the device's
    SMs that were busy (GPM's SM activity; today read on MIG devices only). None: not supported.
    """

    t: float
    gpu: int
    uuid: str | None = None
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    pcie_rx_kib_s: float | None = None
    pcie_tx_kib_s: float | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    fan_pct: float | None = None
    pstate: str | None = None
    throttle_reasons: list[str] | None = None  # None: the source cannot tell
    idle: bool | None = None  # the GPU-idle clock reason, kept apart from real throttles
    ecc_errors_corrected: int | None = None
    ecc_errors_uncorrected: int | None = None
    enc_util_pct: float | None = None
    dec_util_pct: float | None = None
    sm_active_pct: float | None = None
    processes: list[ProcessSample] | None = None  # None: the source cannot tell
    mig: MigRef | None = None
    source: str = SOURCE_NVML
    simulated: bool = False

    @property
    def key(self) -> str:
        """Stable key of the device within its host: "0" for GPU 0, "0/mig1" for its MIG device 1."""
        return gpu_key(self.gpu, self.mig.device if self.mig else None)

    @property
    def mem_used_pct(self) -> float | None:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return 100.0 * self.mem_used_mib / self.mem_total_mib

    def to_dict(self, *, iso_time: bool = True) -> dict[str, Any]:
        """The JSON shape of `gpuws watch --json`: `t` as ISO 8601 (UTC), missing values None."""
        out: dict[str, Any] = {
            "t": iso8601(self.t) if iso_time else self.t,
            "t_unix": round(self.t, 3),
            "gpu": self.gpu,
            "uuid": self.uuid,
        }
        for name in FLOAT_FIELDS:
            out[name] = getattr(self, name)
        for name in INT_FIELDS:
            out[name] = getattr(self, name)
        out["pstate"] = self.pstate
        out["throttle_reasons"] = None if self.throttle_reasons is None else list(self.throttle_reasons)
        out["idle"] = self.idle
        out["processes"] = (
            None
            if self.processes is None
            else [p.to_dict() for p in self.processes]
        )
        out["mig"] = (
            None
            if self.mig is None
            else {"parent_gpu": self.mig.parent_gpu, "device": self.mig.device, "gi": self.mig.gi, "ci": self.mig.ci}
        )
        out["source"] = self.source
        out["simulated"] = self.simulated
        return out


@dataclass(slots=True)
class SampleBatch:
    """All devices of one host read at one instant."""

    t: float
    samples: list[GpuSample]
    source: str
    simulated: bool = False
    host_t: float | None = None  # the host's own clock, before skew correction
    extra: dict[str, Any] = field(default_factory=dict)
    host: HostSample | None = None  # the host's CPU, memory and load, when the source reports them
    # The samples' history metrics already encoded as the store keeps them (scaled float16,
    # (samples, len(store.METRICS)), see `store.encode_rows`), when the decoder has them in that
    # form: the store then skips reading them off each sample and encoding them. Read-only: a
    # decoder shares one array between batches until a value changes.
    stored_rows: Any = None
    # The samples' device keys (`GpuSample.key`), one tuple object shared by every batch with the
    # same device list, when the decoder knows them.
    keys: tuple[str, ...] | None = None


def gpu_key(gpu: int, mig_device: int | None = None) -> str:
    """The store/UI key of a GPU ("0") or of one of its MIG devices ("0/mig1")."""
    return str(gpu) if mig_device is None else f"{gpu}/mig{mig_device}"


def iso8601(t: float) -> str:
    """Unix seconds as ISO 8601 UTC with milliseconds, e.g. 2026-07-14T08:12:38.696Z."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- from the agent's JSON -------------------------------------------------------------------


def _float(record: Mapping[str, Any], name: str) -> float | None:
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"telemetry agent sent a non-numeric {name}: {str(value)[:40]!r}")
    return float(value) if math.isfinite(value) else None


def _int(record: Mapping[str, Any], name: str) -> int | None:
    value = _float(record, name)
    return None if value is None else int(value)


def _opt_int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(f"telemetry agent sent a non-integer {what}: {str(value)[:40]!r}")
    return value


def _opt_str(value: Any, what: str, limit: int = 256) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParseError(f"telemetry agent sent a non-text {what}")
    return value[:limit]


def sample_from_agent(
    record: Any, *, t: float, source: str = SOURCE_NVML, simulated: bool = False
) -> GpuSample:
    """Build a sample from one device record of the agent's batch line (see telemetry_agent.py)."""
    if not isinstance(record, dict):
        raise ParseError("telemetry agent sent a device record that is not an object")
    gpu = record.get("gpu")
    if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
        raise ParseError(f"telemetry agent sent an invalid GPU index: {str(gpu)[:40]!r}")
    sample = GpuSample(t=t, gpu=gpu, uuid=_opt_str(record.get("uuid"), "uuid"), source=source, simulated=simulated)
    for name in FLOAT_FIELDS:
        setattr(sample, name, _float(record, name))
    for name in INT_FIELDS:
        setattr(sample, name, _int(record, name))
    sample.pstate = _opt_str(record.get("pstate"), "pstate", 8)
    mask = _opt_int(record.get("throttle_mask"), "throttle_mask")
    if mask is not None and mask >= 0:
        decoded = decode_mask(mask)
        sample.throttle_reasons = list(decoded.reasons)
        sample.idle = decoded.idle
    procs = record.get("processes")
    if isinstance(procs, list):
        sample.processes = [_process(p) for p in procs]
    elif procs is not None:
        raise ParseError("telemetry agent sent a process list that is not a list")
    mig = record.get("mig")
    if isinstance(mig, dict):
        parent = _opt_int(mig.get("parent_gpu"), "mig.parent_gpu")
        device = _opt_int(mig.get("device"), "mig.device")
        if parent is None or device is None:
            raise ParseError("telemetry agent sent a MIG device without its parent or index")
        sample.mig = MigRef(parent, device, _opt_int(mig.get("gi"), "mig.gi"), _opt_int(mig.get("ci"), "mig.ci"))
    elif mig is not None:
        raise ParseError("telemetry agent sent a MIG reference that is not an object")
    return sample


def _process(value: Any) -> ProcessSample:
    if not isinstance(value, dict):
        raise ParseError("telemetry agent sent a process entry that is not an object")
    pid = _opt_int(value.get("pid"), "process pid")
    if pid is None:
        raise ParseError("telemetry agent sent a process without a pid")
    return ProcessSample(
        pid, _opt_str(value.get("name"), "process name"), _float(value, "used_mib"),
        user=_opt_str(value.get("user"), "process user", 64),
        command=_opt_str(value.get("command"), "process command", 512),
        sm_util_pct=_float(value, "sm_util_pct"),
    )
