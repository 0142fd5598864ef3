"""What the GPU cards plot and how each value reads: labels, units, scales, colours.

A value the device does not report is `None` in the sample and reads "not supported" here,
never 0 (utilisation on a MIG device, fan on a passively cooled card).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtGui import QColor, QPalette

from gpuws.core.telemetry.alerts import AlertKind
from gpuws.core.telemetry.sample import GpuSample
from gpuws.core.telemetry.throttle import POWER_REASONS, THERMAL_REASONS
from gpuws.ui import theme

NOT_SUPPORTED = "not supported"

# (on a light base, on a dark base): readable on both, distinct from the status colours.
_COLOURS: dict[str, tuple[str, str]] = {
    "util": ("#1a73e8", "#8ab4f8"),
    "memory": ("#8e24aa", "#d7aefb"),
    "temp": ("#e8710a", "#fcad70"),
    "power": ("#d93025", "#f28b82"),
    "clock": ("#188038", "#81c995"),
    "pcie": ("#007b83", "#78d9ec"),
    "pcie2": ("#9e6a03", "#fdd663"),
}


def series_colour(name: str, palette: QPalette | None = None) -> QColor:
    """The colour of series `name` for a light or dark `palette`."""
    pair = _COLOURS.get(name, _COLOURS["util"])
    return QColor(pair[1] if theme.is_dark(palette) else pair[0])


def _num(value: float | None, digits: int = 0) -> str:
    return f"{value:.{digits}f}" if value is not None else "?"


def gib(mib: float) -> str:
    """MiB as GiB with one decimal."""
    return f"{mib / 1024:.1f}"


def rate_text(kib_s: float | None) -> str:
    """PCIe throughput in a readable unit (KiB/s from the source)."""
    if kib_s is None:
        return NOT_SUPPORTED
    if kib_s >= 1024 * 1024:
        return f"{kib_s / 1024 / 1024:.1f} GiB/s"
    if kib_s >= 1024:
        return f"{kib_s / 1024:.0f} MiB/s"
    return f"{kib_s:.0f} KiB/s"


@dataclass(frozen=True)
class CardMetric:
    """One sparkline row of a GPU card: the plotted series and how the current value reads."""

    key: str  # the row's id (also the detail plot's default metric)
    label: str
    series: tuple[str, ...]  # store metric names plotted in this row (PCIe has two)
    colours: tuple[str, ...]
    value_text: Callable[[GpuSample], str]
    ceiling: Callable[[GpuSample], float | None]  # fixed top of the scale (total, limit, max) or None
    unit: str  # of the plotted values, for the detail plot's axis


def percent_text(value: float) -> str:
    """'87 %', held to 0..100: a vGPU's counters can overshoot ("101 %") for a sample."""
    return f"{min(100.0, max(0.0, value)):.0f} %"


def _util(s: GpuSample) -> str:
    """'87 %'; with the share of SMs busy where GPM gives it (MIG slices): '87 % · SM 80 %'."""
    if s.util_gpu_pct is None:
        return NOT_SUPPORTED
    if s.sm_active_pct is None:
        return percent_text(s.util_gpu_pct)
    return f"{percent_text(s.util_gpu_pct)} · SM {percent_text(s.sm_active_pct)}"


def _memory(s: GpuSample) -> str:
    if s.mem_used_mib is None:
        return NOT_SUPPORTED
    if s.mem_total_mib is None:
        return f"{gib(s.mem_used_mib)} GiB"
    return f"{gib(s.mem_used_mib)} / {gib(s.mem_total_mib)} GiB"


def _temp(s: GpuSample) -> str:
    return NOT_SUPPORTED if s.temp_c is None else f"{s.temp_c:.0f} °C"


def _power(s: GpuSample) -> str:
    if s.power_w is None:
        return NOT_SUPPORTED
    return f"{s.power_w:.0f} W" if s.power_limit_w is None else f"{s.power_w:.0f} / {s.power_limit_w:.0f} W"


def _clock(now: float | None, top: float | None) -> str:
    if now is None:
        return NOT_SUPPORTED
    return f"{now:.0f} MHz" if top is None else f"{now:.0f} / {top:.0f} MHz"


def _pcie(s: GpuSample) -> str:
    if s.pcie_rx_kib_s is None and s.pcie_tx_kib_s is None:
        return NOT_SUPPORTED
    return f"{rate_text(s.pcie_rx_kib_s)} / {rate_text(s.pcie_tx_kib_s)}"


CARD_METRICS: tuple[CardMetric, ...] = (
    CardMetric("util_gpu_pct", "GPU util", ("util_gpu_pct",), ("util",), _util, lambda s: 100.0, "%"),
    CardMetric("mem_used_mib", "Memory", ("mem_used_mib",), ("memory",), _memory, lambda s: s.mem_total_mib, "MiB"),
    CardMetric("temp_c", "Temp", ("temp_c",), ("temp",), _temp, lambda s: None, "°C"),
    CardMetric("power_w", "Power", ("power_w",), ("power",), _power, lambda s: s.power_limit_w, "W"),
    CardMetric("sm_clock_mhz", "SM clock", ("sm_clock_mhz",), ("clock",),
               lambda s: _clock(s.sm_clock_mhz, s.sm_clock_max_mhz), lambda s: s.sm_clock_max_mhz, "MHz"),
    CardMetric("mem_clock_mhz", "Mem clock", ("mem_clock_mhz",), ("clock",),
               lambda s: _clock(s.mem_clock_mhz, s.mem_clock_max_mhz), lambda s: s.mem_clock_max_mhz, "MHz"),
    CardMetric("pcie_rx_kib_s", "PCIe RX/TX", ("pcie_rx_kib_s", "pcie_tx_kib_s"), ("pcie", "pcie2"), _pcie,
               lambda s: None, "KiB/s"),
)
CARD_METRIC_BY_KEY = {m.key: m for m in CARD_METRICS}

# Every metric the detail plot offers (the store's series), with a readable name and unit.
DETAIL_METRICS: dict[str, tuple[str, str]] = {
    "util_gpu_pct": ("GPU utilisation", "%"),
    "util_mem_pct": ("Memory bandwidth utilisation", "%"),
    "mem_used_mib": ("Memory used", "MiB"),
    "temp_c": ("Temperature", "°C"),
    "power_w": ("Power draw", "W"),
    "sm_clock_mhz": ("SM clock", "MHz"),
    "mem_clock_mhz": ("Memory clock", "MHz"),
    "pcie_rx_kib_s": ("PCIe RX", "KiB/s"),
    "pcie_tx_kib_s": ("PCIe TX", "KiB/s"),
    "fan_pct": ("Fan", "%"),
    "enc_util_pct": ("Encoder utilisation", "%"),
    "dec_util_pct": ("Decoder utilisation", "%"),
}


# --- the text facts under the sparklines --------------------------------------------------------


def throttle_kinds(s: GpuSample | None) -> frozenset[AlertKind]:
    """The throttle badges a sample's decoded reasons call for (the Throttle row shows the same)."""
    reasons = set(s.throttle_reasons or ()) if s is not None else set()
    kinds: set[AlertKind] = set()
    if reasons & THERMAL_REASONS:
        kinds.add(AlertKind.THERMAL_THROTTLE)
    if reasons & POWER_REASONS:
        kinds.add(AlertKind.POWER_THROTTLE)
    return frozenset(kinds)


def throttle_text(s: GpuSample) -> str:
    """Active clock throttle reasons by name; the GPU-idle reason is shown apart ("idle")."""
    if s.throttle_reasons is None and s.idle is None:
        return NOT_SUPPORTED
    reasons = ", ".join(r.replace("_", " ") for r in s.throttle_reasons or ())
    idle = "clocks down: GPU idle" if s.idle else ""
    return " · ".join(p for p in (reasons or "none", idle) if p)


def ecc_text(s: GpuSample) -> str:
    """Corrected and uncorrected ECC errors, or "not supported"."""
    if s.ecc_errors_corrected is None and s.ecc_errors_uncorrected is None:
        return NOT_SUPPORTED
    return f"{_num_or_ns(s.ecc_errors_corrected)} corrected, {_num_or_ns(s.ecc_errors_uncorrected)} uncorrected"


def _num_or_ns(value: float | None, suffix: str = "") -> str:
    return NOT_SUPPORTED if value is None else f"{value:.0f}{suffix}"


def codec_text(s: GpuSample) -> str:
    """Encoder and decoder utilisation, or "not supported"."""
    if s.enc_util_pct is None and s.dec_util_pct is None:
        return NOT_SUPPORTED
    enc = NOT_SUPPORTED if s.enc_util_pct is None else percent_text(s.enc_util_pct)
    dec = NOT_SUPPORTED if s.dec_util_pct is None else percent_text(s.dec_util_pct)
    return f"enc {enc} · dec {dec}"


def fan_text(s: GpuSample) -> str:
    """Fan speed, or "not supported" (passively cooled cards)."""
    return NOT_SUPPORTED if s.fan_pct is None else percent_text(s.fan_pct)


def link_text(s: GpuSample) -> str:
    """The PCIe link now and its maximum ("Gen4 x16 (max Gen5 x16)"), or "not supported"."""
    if s.pcie_gen_current is None and s.pcie_width_current is None:
        return NOT_SUPPORTED
    now = f"Gen{_num(s.pcie_gen_current)} x{_num(s.pcie_width_current)}"
    if s.pcie_gen_max is None and s.pcie_width_max is None:
        return now
    return f"{now} (max Gen{_num(s.pcie_gen_max)} x{_num(s.pcie_width_max)})"


def processes_text(s: GpuSample, limit: int = 3) -> str:
    """'python3 (4242) 40.1 GiB, …' biggest first; 'none' / 'not supported'."""
    if s.processes is None:
        return NOT_SUPPORTED
    if not s.processes:
        return "none"
    procs = sorted(s.processes, key=lambda p: -(p.used_mib or 0.0))
    parts = []
    for p in procs[:limit]:
        used = f"{gib(p.used_mib)} GiB" if p.used_mib is not None else "memory n/a"
        parts.append(f"{p.name} ({p.pid}) {used}" if p.name else f"pid {p.pid} {used}")
    more = len(procs) - limit
    return ", ".join(parts) + (f", +{more} more" if more > 0 else "")


def pstate_text(s: GpuSample) -> str:
    """'P0' ... 'P12', or '' when the device does not report one (MIG devices)."""
    return s.pstate or ""
