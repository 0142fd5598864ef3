"""Synthetic telemetry for the dashboard tests and the dashboard benchmark (no GPU, no host)."""

from __future__ import annotations

import math

from gpuws.core.telemetry.sample import GpuSample, MigRef, ProcessSample, SampleBatch
from gpuws.core.telemetry.store import TelemetryStore


def h100_sample(t: float, gpu: int = 0, *, busy: bool = True) -> GpuSample:
    """A plausible H100 reading; `busy=False` gives an idle card (clocks down, GPU-idle reason)."""
    wave = 0.5 + 0.5 * math.sin(t / 20.0 + gpu)
    util = 55.0 + 40.0 * wave if busy else 0.0
    return GpuSample(
        t=t, gpu=gpu, uuid=f"GPU-{gpu:08d}-0000-0000-0000-000000000000",
        util_gpu_pct=util, util_mem_pct=util * 0.6,
        mem_used_mib=20_000.0 + 52_000.0 * wave if busy else 2_048.0, mem_total_mib=81_559.0,
        temp_c=48.0 + 25.0 * wave if busy else 34.0, power_w=120.0 + 520.0 * wave if busy else 71.0,
        power_limit_w=700.0, sm_clock_mhz=1980.0 if busy else 345.0, sm_clock_max_mhz=1980.0,
        mem_clock_mhz=2619.0 if busy else 1593.0, mem_clock_max_mhz=2619.0,
        pcie_rx_kib_s=900_000.0 * wave if busy else 12.0, pcie_tx_kib_s=300_000.0 * wave if busy else 4.0,
        pcie_gen_current=5 if busy else 1, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16,
        fan_pct=None, pstate="P0" if busy else "P8",
        throttle_reasons=["sw_power_cap"] if busy and wave > 0.9 else [], idle=not busy,
        ecc_errors_corrected=0, ecc_errors_uncorrected=0, enc_util_pct=0.0, dec_util_pct=0.0,
        processes=[ProcessSample(4242, "python3", 18_000.0 + 52_000.0 * wave)] if busy else [],
        source="nvml", simulated=True,
    )


def mig_sample(t: float, parent: int = 0, device: int = 1) -> GpuSample:
    """A MIG device: memory only, utilisation not supported (None, never 0)."""
    return GpuSample(t=t, gpu=parent, mem_used_mib=4_000.0, mem_total_mib=9_856.0,
                     mig=MigRef(parent, device, 1, 0), source="nvml", simulated=True)


def fill_store(store: TelemetryStore, host: str, t0: float, seconds: int, *, gpus: int = 2, hz: float = 1.0,
               mig: bool = False, gap: tuple[float, float] | None = None) -> None:
    """`seconds` of 1 Hz history for `gpus` cards (GPU 1 idle); `gap` = (offline_at, back_at) offsets."""
    store.set_rate(host, hz)
    marked = False
    for i in range(int(seconds * hz)):
        t = t0 + i / hz
        if gap is not None and gap[0] <= i / hz < gap[1]:
            if not marked:
                store.mark_offline(host, t)
                marked = True
            continue
        samples = [h100_sample(t, g, busy=g != 1) for g in range(gpus)]
        if mig:
            samples.append(mig_sample(t))
        store.ingest(host, SampleBatch(t, samples, "nvml", simulated=True))
