"""How long right-size advice takes off the GUI thread: `python -m benchmarks bench_advice`.

A host with 8 GPUs and 24 h of 1 Hz history in the app's store (the 60 s tier answers a 24 h
window) and one with 15 minutes (the raw ring answers); median of repeated `advise_from_store` calls.
"""

from __future__ import annotations

import math
import statistics
import time

from gpuws.core.advice import advise_from_store
from gpuws.core.models import HostProfile
from gpuws.core.resize.state import GpuMigState
from gpuws.core.telemetry.sample import GpuSample
from gpuws.core.telemetry.store import TelemetryStore

GPUS = 8


def _fill(store: TelemetryStore, host: str, t0: float, seconds: int) -> None:
    store.set_rate(host, 1.0)
    for i in range(seconds):
        t = t0 + i
        store.ingest_samples(host, [
            GpuSample(t=t, gpu=g, util_gpu_pct=50 + 45 * math.sin(t / 300 + g), mem_used_mib=20_000.0 + 100 * g,
                      mem_total_mib=81_559.0)
            for g in range(GPUS)
        ])


def _median_ms(store: TelemetryStore, host: str, now: float, states: list[GpuMigState], repeat: int) -> float:
    profile = HostProfile(name=host, host="127.0.0.1", user="me", price_per_hour=24.0)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        advise_from_store(store, host, states, profile, now=now)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    states = [GpuMigState(g, "NVIDIA H100 80GB HBM3", None, "Disabled", "Disabled") for g in range(GPUS)]
    now = time.time()
    store = TelemetryStore()
    _fill(store, "day", now - 86_400, 86_400)
    _fill(store, "quarter", now - 900, 900)
    day = _median_ms(store, "day", now, states, 20)
    quarter = _median_ms(store, "quarter", now, states, 20)
    print(f"advice for {GPUS} GPUs, 24 h of 1 Hz history: median {day:.1f} ms")
    print(f"advice for {GPUS} GPUs, 15 min of 1 Hz history: median {quarter:.1f} ms")


if __name__ == "__main__":
    main()
