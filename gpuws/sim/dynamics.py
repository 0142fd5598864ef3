"""What a simulated GPU reads at a given moment: a pure function of its state and wall time.

Being a function of time (not of call history) means two `nvidia-smi` processes asking at the
same moment agree, and the fake NVML agrees with them.

Load drives everything: utilisation, power (idle draw up to the limit), temperature (lagging the
load by tens of seconds), SM/memory clocks, PCIe throughput and the clock event reasons (GPU idle
when idle, SW power cap near the limit, SW/HW thermal slowdown when hot).

Demo scenarios repeat every `CYCLE_S` seconds so a viewer sees everything within two minutes:

- "training": a job starts, its memory climbs past 90 % (OOM-risk alert), then it ends and frees it.
- "idle": a notebook kernel holds 2 GiB but computes nothing (idle-GPU alert).
- "hot": a sustained render whose temperature crosses the slowdown threshold (thermal alert).
- "inference": bursty serving that touches the power limit at its peaks (power-cap alert).
"""

from __future__ import annotations

import math
import os
import zlib
from dataclasses import dataclass, field

from gpuws.core.gpus import throttle
from gpuws.sim.faults import BUSY_PID_BASE as FAULT_BUSY_PID_BASE
from gpuws.sim.faults import BUSY_UTILIZATION, JOBS_PAUSED_ENV, FaultKind, active_faults, has_fault
from gpuws.sim.models import GpuModel
from gpuws.sim.state import BUSY_PID_BASE, SCENARIO_PID_BASE, Fault, GpuState, SimProcess

CYCLE_S = 120.0
IDLE_LOAD = 0.02

# Clock event reason bits: the GPU registry's table (nvml.h values).
REASON_GPU_IDLE = throttle.GPU_IDLE
REASON_APPLICATIONS_CLOCKS_SETTING = throttle.APPLICATIONS_CLOCKS_SETTING
REASON_SW_POWER_CAP = throttle.SW_POWER_CAP
REASON_HW_SLOWDOWN = throttle.HW_SLOWDOWN
REASON_SYNC_BOOST = throttle.SYNC_BOOST
REASON_SW_THERMAL_SLOWDOWN = throttle.SW_THERMAL_SLOWDOWN
REASON_HW_THERMAL_SLOWDOWN = throttle.HW_THERMAL_SLOWDOWN
REASON_HW_POWER_BRAKE_SLOWDOWN = throttle.HW_POWER_BRAKE_SLOWDOWN
REASON_DISPLAY_CLOCK_SETTING = throttle.DISPLAY_CLOCK_SETTING
REASONS_SUPPORTED = 0x1FF


@dataclass
class GpuSample:
    """Everything dynamic about one GPU at one moment."""

    load: float
    util_gpu_pct: int | None  # None on a MIG-enabled GPU (NVML: not supported)
    util_mem_pct: int | None
    mem_used_mib: int
    mem_total_mib: int
    mem_reserved_mib: int
    temp_c: int
    mem_temp_c: int
    power_w: float
    power_limit_w: float
    sm_clock_mhz: int
    mem_clock_mhz: int
    video_clock_mhz: int
    pcie_rx_kbs: int
    pcie_tx_kbs: int
    pcie_gen_current: int
    pstate: str
    reasons: int
    encoder_pct: int
    decoder_pct: int
    processes: list[SimProcess] = field(default_factory=list)

    @property
    def mem_free_mib(self) -> int:
        return max(0, self.mem_total_mib - self.mem_reserved_mib - self.mem_used_mib)

    def process_utilization(self) -> dict[int, tuple[int, int]]:
        """pid -> (SM %, memory %): the GPU's busy share split by the memory each process holds.

        What NVML's per-process utilisation and `nvidia-smi pmon` report; empty on a MIG-enabled
        GPU, where NVML cannot tell (util_gpu_pct is None there).
        """
        if self.util_gpu_pct is None or not self.processes:
            return {}
        held = sum(max(p.used_mib, 1) for p in self.processes)
        sm, mem = self.util_gpu_pct, self.util_mem_pct or 0
        return {p.pid: (round(sm * max(p.used_mib, 1) / held), round(mem * max(p.used_mib, 1) / held))
                for p in self.processes}


def _noise(gpu: GpuState, t: float, salt: str, amplitude: float) -> float:
    """Deterministic jitter in [-amplitude, amplitude], stable within each half second."""
    h = zlib.crc32(f"{gpu.uuid}:{salt}:{int(t * 2)}".encode())
    return ((h % 2001) / 1000.0 - 1.0) * amplitude


def _phase(gpu: GpuState, t: float) -> tuple[int, float]:
    """(cycle number, position in [0, 1)) of this GPU's scenario; GPUs are offset from each other."""
    shifted = t + gpu.index * 17.0
    return int(shifted // CYCLE_S), (shifted % CYCLE_S) / CYCLE_S


def scenario_load(gpu: GpuState, t: float) -> float:
    """The load in [0, 1] the GPU's load setting asks for at time `t` (before any MIG effect)."""
    spec = gpu.load
    kind = spec.get("kind")
    if kind == "constant":
        return float(spec["value"])
    if kind == "schedule":
        value = 0.0
        for when, load in spec["points"]:
            if t >= when:
                value = float(load)
        return value
    if gpu.mig_current:
        return 0.0  # the demo jobs do not run on a repartitioned card
    if os.environ.get(JOBS_PAUSED_ENV) == "1":
        return 0.0  # the benchmark runner is measuring: the demo jobs stand aside
    _, p = _phase(gpu, t)
    name = spec.get("name")
    if name == "training":
        return 0.0 if p < 0.08 or p >= 0.85 else 0.93 + _noise(gpu, t, "l", 0.05)
    if name == "hot":
        return 0.88 + _noise(gpu, t, "l", 0.04)
    if name == "inference":
        return max(0.0, 0.5 + 0.48 * math.sin(2 * math.pi * p * 3) + _noise(gpu, t, "l", 0.04))
    return 0.0


def scenario_processes(gpu: GpuState, t: float) -> list[SimProcess]:
    """Processes the scenario runs right now (none for explicit loads or on MIG-enabled GPUs)."""
    if gpu.load.get("kind") != "scenario" or gpu.mig_current or os.environ.get(JOBS_PAUSED_ENV) == "1":
        return []
    cycle, p = _phase(gpu, t)
    total = gpu.model.memory_total_mib - gpu.model.memory_reserved_mib
    name = gpu.load.get("name")
    base_pid = SCENARIO_PID_BASE + gpu.index * 100
    if name == "training":
        if p < 0.08 or p >= 0.85:
            return []
        # Memory climbs from 25 % to 96 % of the card by 75 % of the cycle, then holds until the end.
        climb = min(1.0, (p - 0.08) / 0.67)
        used = int(total * (0.25 + 0.71 * climb))
        return [SimProcess(base_pid + cycle % 90, "python3 train.py", used)]
    if name == "idle":
        return [SimProcess(base_pid, "python3 -m ipykernel_launcher", 2048)]
    if name == "hot":
        return [SimProcess(base_pid, "blender", int(total * 0.45))]
    if name == "inference":
        return [SimProcess(base_pid, "tritonserver", int(total * 0.6))]
    return []


def _lagged_load(gpu: GpuState, t: float) -> float:
    """The load as the heat sink sees it: an exponential average over the last minute or so."""
    weights = total = 0.0
    for i in range(16):
        w = math.exp(-i * 4.0 / 20.0)
        total += w * scenario_load(gpu, t - i * 4.0)
        weights += w
    return total / weights


def sample(gpu: GpuState, t: float) -> GpuSample:
    """The GPU's readings at wall time `t` (seconds since the epoch)."""
    model: GpuModel = gpu.model
    load = scenario_load(gpu, t)
    busy = load > IDLE_LOAD

    processes = [*scenario_processes(gpu, t), *gpu.processes]
    if gpu.has_fault(Fault.BUSY):
        processes.append(SimProcess(BUSY_PID_BASE + gpu.index, "python3 train.py", 1024))
    if has_fault(active_faults(), FaultKind.BUSY, gpu.index):
        # The benchmark's `busy` fault: someone else's job holds the GPU at high utilisation.
        processes.append(SimProcess(FAULT_BUSY_PID_BASE + gpu.index, "python3 someone_elses_job.py", 2048))
        load = max(load, BUSY_UTILIZATION)
        busy = True
    mem_used = min(model.memory_total_mib - model.memory_reserved_mib, sum(p.used_mib for p in processes))

    hot_bump = 0.0
    if gpu.load.get("kind") == "scenario" and gpu.load.get("name") == "hot":
        # A sustained render with a struggling fan curve: crosses the slowdown threshold mid-cycle.
        _, p = _phase(gpu, t)
        hot_bump = 9.0 * math.sin(math.pi * p) ** 2
    lagged = _lagged_load(gpu, t)
    temp = model.idle_temp_c + (model.full_load_temp_c - model.idle_temp_c) * lagged + hot_bump
    temp += _noise(gpu, t, "t", 0.4)

    span = model.power_limit_w - model.power_idle_w
    demand = model.power_idle_w + span * 1.08 * load**1.1 + _noise(gpu, t, "p", 1.5)
    power = max(model.power_idle_w * 0.9, min(model.power_limit_w, demand))

    reasons = 0
    clock_factor = 1.0
    if not busy:
        reasons |= REASON_GPU_IDLE
    if demand >= model.power_limit_w * 0.98:
        reasons |= REASON_SW_POWER_CAP
        clock_factor *= 0.92
    if temp >= model.slowdown_temp_c - 3:
        reasons |= REASON_SW_THERMAL_SLOWDOWN
        clock_factor *= 0.9
    if temp >= model.slowdown_temp_c:
        reasons |= REASON_HW_THERMAL_SLOWDOWN
        clock_factor *= 0.85

    if busy:
        sm_clock = int(model.max_sm_clock_mhz * min(1.0, 0.8 + 0.4 * load) * clock_factor)
        sm_clock = max(model.idle_sm_clock_mhz, sm_clock - sm_clock % 15)
        mem_clock = model.max_mem_clock_mhz
        video_clock = int(model.max_video_clock_mhz * min(1.0, 0.8 + 0.4 * load))
        pstate = "P0"
        pcie_gen = model.pcie_gen_max
    else:
        sm_clock = model.idle_sm_clock_mhz
        mem_clock = model.idle_mem_clock_mhz
        video_clock = model.max_video_clock_mhz // 2
        pstate = model.idle_pstate
        pcie_gen = model.pcie_gen_idle

    # PCIe traffic follows load (batches streaming in); host->device (rx) dominates.
    rx = int(max(0.0, load * 1_800_000 * (1.0 + _noise(gpu, t, "rx", 0.3)))) + 400
    tx = int(rx * 0.25) + 300

    util_gpu: int | None = round(load * 100)
    util_mem: int | None = round(load * 55 + _noise(gpu, t, "m", 2.0)) if busy else 0
    if gpu.mig_current:
        util_gpu = util_mem = None
    if util_mem is not None:
        util_mem = max(0, min(100, util_mem))
    return GpuSample(
        load=load,
        util_gpu_pct=util_gpu,
        util_mem_pct=util_mem,
        mem_used_mib=mem_used,
        mem_total_mib=model.memory_total_mib,
        mem_reserved_mib=model.memory_reserved_mib,
        temp_c=round(temp),
        mem_temp_c=round(temp + 6),
        power_w=round(power, 2),
        power_limit_w=model.power_limit_w,
        sm_clock_mhz=sm_clock,
        mem_clock_mhz=mem_clock,
        video_clock_mhz=video_clock,
        pcie_rx_kbs=rx,
        pcie_tx_kbs=tx,
        pcie_gen_current=pcie_gen,
        pstate=pstate,
        reasons=reasons,
        encoder_pct=0,
        decoder_pct=round(load * 8) if gpu.load.get("name") == "inference" else 0,
        processes=processes,
    )


# A job on a MIG slice, under the demo scenarios (which do not run on a repartitioned card).
SLICE_JOB_LOAD = 0.85


def slice_load(gpu: GpuState, gi_id: int, t: float) -> float:
    """The load in [0, 1] of one MIG slice (GPU instance `gi_id`) at wall time `t`.

    A slice computes only while a process runs on it: then the GPU's explicit load setting
    (constant or schedule) applies to it, or, under a demo scenario, a steady job's load. A slice
    with no process is idle, whatever its neighbours do. What GPM's per-slice metrics follow.
    """
    if not any(p.gpu_instance_id == gi_id for p in gpu.processes):
        return 0.0
    kind = gpu.load.get("kind")
    base = scenario_load(gpu, t) if kind in ("constant", "schedule") else SLICE_JOB_LOAD
    if base <= 0.0:
        return 0.0
    return max(0.0, min(1.0, base + _noise(gpu, t, f"gi{gi_id}", 0.03)))
