"""Record the telemetry windows the advice tests read (tests/core/data/advice/*.json).

Each window is 10 minutes of one simulated GPU read at 2 s intervals through the simulator's
dynamics (`gpuws.sim.dynamics.sample`), the same readings the demo host's NVML reports. They are
stored, not recomputed in the tests, so a later change to the demo loads does not silently change
what the advice tests check. Re-record with `python -m tests.core.record_advice_windows`.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuws.sim.dynamics import REASON_GPU_IDLE, sample
from gpuws.sim.state import SimState

OUT = Path(__file__).parent / "data" / "advice"
T0 = 1_780_000_000.0  # a fixed epoch: the recording is reproducible
PERIOD_S = 2.0
SPAN_S = 600.0


def _record(name: str, spec: str, setup: str, skip: tuple[float, float] | None = None) -> None:
    state = SimState.new(spec, now=T0)
    gpu = state.gpus[0]
    if setup.startswith("scenario:"):
        gpu.set_scenario(setup.split(":", 1)[1])
    elif setup == "bursty":  # light inference: 25 % bursts of 10 s every 30 s, 12 GiB of weights
        gpu.set_load_schedule([(T0 + k * 30.0 + off, v) for k in range(21) for off, v in ((0, 0.25), (10, 0.05))])
        gpu.add_process("python3 serve.py", 12 * 1024)
    elif setup == "memory-bound":  # a big model at a third of the compute
        gpu.set_load(0.3)
        gpu.add_process("python3 embed.py", 76 * 1024)
    rows = []
    t = T0
    while t < T0 + SPAN_S:
        if skip is None or not skip[0] <= t - T0 < skip[1]:
            s = sample(gpu, t)
            throttled = bool(s.reasons & ~REASON_GPU_IDLE)
            rows.append([t, s.util_gpu_pct, s.mem_used_mib, throttled])
        t += PERIOD_S
    doc = {
        "origin": f"gpuws.sim.dynamics.sample, GPU model {gpu.model.name}, load {setup}, "
        f"every {PERIOD_S:g} s for {SPAN_S:g} s" + (f", no samples from {skip[0]:g} to {skip[1]:g} s" if skip else ""),
        "gpu_name": gpu.model.name,
        "mem_total_mib": gpu.model.memory_total_mib,  # as NVML reports the total
        "columns": ["t", "util_pct", "mem_used_mib", "throttled"],
        "rows": rows,
    }
    (OUT / f"{name}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    _record("idle", "a100", "scenario:idle")
    _record("bursty", "h100", "bursty")
    _record("saturated", "l40s", "scenario:hot")
    _record("memory-bound", "h100", "memory-bound")
    _record("gaps", "h100", "bursty", skip=(200.0, 440.0))


if __name__ == "__main__":
    main()
