"""Simulated readings: deterministic, and correlated the way real GPUs are."""

from __future__ import annotations

import pytest

from gpuws.sim.dynamics import (
    CYCLE_S,
    REASON_GPU_IDLE,
    REASON_SW_POWER_CAP,
    REASON_SW_THERMAL_SLOWDOWN,
    sample,
)
from gpuws.sim.models import SimSpecError, parse_gpu_spec
from gpuws.sim.state import SimState

T0 = 1_800_000_000.0


def test_more_load_means_more_power_heat_and_clock() -> None:
    state = SimState.new("3xh100", now=T0)
    for gpu, load in zip(state.gpus, (0.0, 0.4, 0.9), strict=True):
        gpu.set_load(load)
    idle, mid, busy = (sample(g, T0 + 600) for g in state.gpus)
    assert idle.power_w < mid.power_w < busy.power_w <= busy.power_limit_w
    assert idle.temp_c < mid.temp_c < busy.temp_c
    assert idle.sm_clock_mhz < mid.sm_clock_mhz
    assert idle.pcie_rx_kbs < mid.pcie_rx_kbs < busy.pcie_rx_kbs
    assert idle.reasons & REASON_GPU_IDLE and not busy.reasons & REASON_GPU_IDLE
    assert 60 <= idle.power_w <= 90


def test_readings_are_a_function_of_time() -> None:
    state = SimState.new("h100", now=T0)
    assert sample(state.gpus[0], T0 + 10.2) == sample(state.gpus[0], T0 + 10.2)


def test_temperature_lags_a_load_step() -> None:
    gpu = SimState.new("a100", now=T0).gpus[0]
    gpu.set_load_schedule([(T0, 1.0)])
    right_after, later = sample(gpu, T0 + 1), sample(gpu, T0 + 60)
    assert right_after.util_gpu_pct == 100
    assert right_after.temp_c < later.temp_c


def test_demo_cycle_shows_every_alert_within_two_minutes() -> None:
    state = SimState.new(now=T0)
    samples = {g.index: [sample(g, T0 + s) for s in range(0, int(CYCLE_S), 2)] for g in state.gpus}
    training = samples[0]
    assert max(s.mem_used_mib / s.mem_total_mib for s in training) > 0.9  # OOM risk
    assert min(s.mem_used_mib for s in training) == 0  # ... and the job ends, freeing it
    assert all(s.util_gpu_pct == 0 and s.reasons & REASON_GPU_IDLE for s in samples[1])  # idle GPU
    assert any(s.reasons & REASON_SW_THERMAL_SLOWDOWN for s in samples[2])  # thermal
    assert any(s.reasons & REASON_SW_POWER_CAP for s in samples[0] + samples[3])  # power cap


def test_processes_add_memory() -> None:
    gpu = SimState.new("l40s", now=T0).gpus[0]
    gpu.set_load(0.0)
    assert sample(gpu, T0).mem_used_mib == 0
    gpu.add_process("python3 x.py", 3000)
    assert sample(gpu, T0).mem_used_mib == 3000


def test_gpu_spec_parsing() -> None:
    assert [m.key for m in parse_gpu_spec("2xh100,l40s")] == ["h100", "h100", "l40s"]
    with pytest.raises(SimSpecError, match="unknown GPU model"):
        parse_gpu_spec("h100,rtx9999")
    with pytest.raises(SimSpecError):
        parse_gpu_spec("h100,,a100")
