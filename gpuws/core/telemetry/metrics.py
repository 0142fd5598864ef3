"""The metrics kept as telemetry history and how they are scaled to be stored as float16.

Plain Python (no numpy), so the agent decoder can build stored rows without the store, and a
command that only prints samples (`gpuws watch`) imports no numpy.
"""

from __future__ import annotations

from typing import Final

# The numeric series kept as history; constants (totals, limits, max clocks) live in `latest`.
METRICS: Final[tuple[str, ...]] = (
    "util_gpu_pct",
    "util_mem_pct",
    "mem_used_mib",
    "temp_c",
    "power_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "pcie_rx_kib_s",
    "pcie_tx_kib_s",
    "fan_pct",
    "enc_util_pct",
    "dec_util_pct",
)
METRIC_INDEX: Final = {name: i for i, name in enumerate(METRICS)}

# Stored rows are float16 of value * RAW_SCALE. float16 holds up to F16_MAX, so memory (MiB, up to
# 512 GiB) and PCIe throughput (KiB/s, up to 256 GiB/s) are scaled down first; the rest fit as
# they are. Every scale is a power of two, so it is the same in float32.
F16_MAX: Final = 65504.0
RAW_SCALE: Final[tuple[float, ...]] = tuple(
    1 / 8 if m == "mem_used_mib" else 1 / 4096 if m.startswith("pcie_") else 1.0 for m in METRICS
)
