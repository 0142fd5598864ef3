"""A fake `pynvml` (nvidia-ml-py) for the gpuws simulated GPU host. NOT real NVML.

This directory is put first on the simulated host's PYTHONPATH, so `import pynvml` in the
telemetry agent finds this module. Function names, constants, error classes and value conventions
match nvidia-ml-py (bytes in mW, KB/s, MiB-free bytes, lists for [current, pending] ...); values
come from the same state and dynamics as the simulated `nvidia-smi` ($GPUWS_SIM_STATE).

`GPUWS_SIMULATED = True` marks it: a real pynvml never has that attribute.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from gpuws.sim import state as sim_state
from gpuws.sim.dynamics import GpuSample, sample, scenario_load, slice_load
from gpuws.sim.mig import mig_devices
from gpuws.sim.state import GpuState, SimState, SimStateStore

GPUWS_SIMULATED = True

# -- constants (values as in nvidia-ml-py) --------------------------------------------------------

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_UNKNOWN = 999

NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1

NVML_TEMPERATURE_GPU = 0

NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_CLOCK_VIDEO = 3

NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1

NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1

NVML_PSTATE_0 = 0
NVML_PSTATE_8 = 8
NVML_PSTATE_UNKNOWN = 32

nvmlClocksEventReasonGpuIdle = 0x0000000000000001
nvmlClocksEventReasonApplicationsClocksSetting = 0x0000000000000002
nvmlClocksEventReasonSwPowerCap = 0x0000000000000004
nvmlClocksEventReasonHwSlowdown = 0x0000000000000008
nvmlClocksEventReasonSyncBoost = 0x0000000000000010
nvmlClocksEventReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksEventReasonHwThermalSlowdown = 0x0000000000000040
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x0000000000000080
nvmlClocksEventReasonDisplayClockSetting = 0x0000000000000100
nvmlClocksEventReasonNone = 0x0000000000000000

nvmlClocksThrottleReasonGpuIdle = 0x0000000000000001
nvmlClocksThrottleReasonApplicationsClocksSetting = 0x0000000000000002
nvmlClocksThrottleReasonSwPowerCap = 0x0000000000000004
nvmlClocksThrottleReasonHwSlowdown = 0x0000000000000008
nvmlClocksThrottleReasonSyncBoost = 0x0000000000000010
nvmlClocksThrottleReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksThrottleReasonHwThermalSlowdown = 0x0000000000000040
nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x0000000000000080
nvmlClocksThrottleReasonDisplayClockSetting = 0x0000000000000100
nvmlClocksThrottleReasonNone = 0x0000000000000000

# GPM (GPU Performance Monitoring, Hopper and later): the metrics this fake computes.
NVML_GPM_METRIC_GRAPHICS_UTIL = 1
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_SM_OCCUPANCY = 3
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_DRAM_BW_UTIL = 10
NVML_GPM_METRIC_MAX = 477
NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_SUPPORT_VERSION = 1


# -- errors (same class names and values as nvidia-ml-py) -----------------------------------------


class NVMLError(Exception):
    _valClassMapping: dict[int, type[NVMLError]] = {}
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_IN_USE: "In use by another client",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }

    _value = NVML_ERROR_UNKNOWN
    value: int

    def __new__(cls, value: int | None = None) -> NVMLError:
        if value is None:  # NVMLError_NotSupported() as nvidia-ml-py allows
            value = cls._value
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __init__(self, value: int | None = None) -> None:
        super().__init__(self.value)

    def __str__(self) -> str:
        return self._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NVMLError) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


def _error_class(name: str, value: int) -> type[NVMLError]:
    cls = type(name, (NVMLError,), {"_value": value})
    NVMLError._valClassMapping[value] = cls
    return cls


NVMLError_Uninitialized = _error_class("NVMLError_Uninitialized", NVML_ERROR_UNINITIALIZED)
NVMLError_InvalidArgument = _error_class("NVMLError_InvalidArgument", NVML_ERROR_INVALID_ARGUMENT)
NVMLError_NotSupported = _error_class("NVMLError_NotSupported", NVML_ERROR_NOT_SUPPORTED)
NVMLError_NoPermission = _error_class("NVMLError_NoPermission", NVML_ERROR_NO_PERMISSION)
NVMLError_AlreadyInitialized = _error_class("NVMLError_AlreadyInitialized", NVML_ERROR_ALREADY_INITIALIZED)
NVMLError_NotFound = _error_class("NVMLError_NotFound", NVML_ERROR_NOT_FOUND)
NVMLError_DriverNotLoaded = _error_class("NVMLError_DriverNotLoaded", NVML_ERROR_DRIVER_NOT_LOADED)
NVMLError_GpuIsLost = _error_class("NVMLError_GpuIsLost", NVML_ERROR_GPU_IS_LOST)
NVMLError_InUse = _error_class("NVMLError_InUse", NVML_ERROR_IN_USE)
NVMLError_Unknown = _error_class("NVMLError_Unknown", NVML_ERROR_UNKNOWN)


def nvmlExceptionClass(nvmlErrorCode: int) -> type[NVMLError]:
    if nvmlErrorCode not in NVMLError._valClassMapping:
        raise ValueError(f"nvmlErrorCode {nvmlErrorCode} is not valid")
    return NVMLError._valClassMapping[nvmlErrorCode]


# -- structures ----------------------------------------------------------------------------------


@dataclass
class c_nvmlMemory_t:
    total: int
    free: int
    used: int


@dataclass
class c_nvmlUtilization_t:
    gpu: int
    memory: int


@dataclass
class c_nvmlPciInfo_t:
    busId: str
    busIdLegacy: str
    domain: int
    bus: int
    device: int
    pciDeviceId: int
    pciSubSystemId: int


@dataclass
class c_nvmlProcessInfo_t:
    pid: int
    usedGpuMemory: int
    gpuInstanceId: int
    computeInstanceId: int


@dataclass
class c_nvmlProcessUtilizationSample_t:
    pid: int
    timeStamp: int  # microseconds
    smUtil: int
    memUtil: int
    encUtil: int
    decUtil: int


@dataclass(frozen=True)
class _Handle:
    """A device handle: a GPU index, plus the MIG device index for MIG device handles."""

    index: int
    mig_index: int | None = None


# -- module state --------------------------------------------------------------------------------

_init_count = 0
_store: SimStateStore | None = None

# The agent asks ~25 questions per GPU in one burst. Each answer comes from one reading of the GPU
# per instant: a reading is reused for SAMPLE_REUSE_S (real NVML counters update no faster) unless
# the state changed meanwhile, instead of computing the dynamics again for every call.
SAMPLE_REUSE_S = 0.02
_readings: dict[int, tuple[SimState, float, GpuSample]] = {}  # GPU index -> (state, when, reading)


# The state as last read: (when, this process's save count then, state). One reading instant --
# the ~8 calls per GPU the agent makes in one burst -- shares one look at the state file, as the
# nvidia-smi emulator reads it once per sample: a real NVML has no file to check per call.
STATE_REUSE_S = 0.005
_checked: tuple[float, int, SimState] | None = None


def _state() -> SimState:
    global _checked
    if _init_count <= 0 or _store is None:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    now = time.monotonic()
    checked = _checked
    if checked is not None and 0.0 <= now - checked[0] < STATE_REUSE_S and checked[1] == sim_state.saves_in_process:
        return checked[2]
    # Re-read only when the state file changes (e.g. after `nvidia-smi mig ...`): a change made in
    # this process is seen by the next call, one made by another process within STATE_REUSE_S.
    state = _store.load_shared()
    _checked = (now, sim_state.saves_in_process, state)
    return state


def _gpu_of(state: SimState, handle: Any) -> GpuState:
    if not isinstance(handle, _Handle):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    try:
        return state.gpu(handle.index)
    except Exception:
        raise NVMLError(NVML_ERROR_GPU_IS_LOST) from None


def _gpu(handle: Any) -> GpuState:
    return _gpu_of(_state(), handle)


def _sample(handle: Any) -> tuple[GpuState, GpuSample]:
    state = _state()
    gpu = _gpu_of(state, handle)
    now = time.time()
    cached = _readings.get(gpu.index)
    if cached is not None and cached[0] is state and 0.0 <= now - cached[1] < SAMPLE_REUSE_S:
        return gpu, cached[2]
    reading = sample(gpu, now)
    _readings[gpu.index] = (state, now, reading)
    return gpu, reading


def _no_vgpu_power(gpu: GpuState) -> None:
    if gpu.model.virtualization_mode == "VGPU":
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)


# -- system --------------------------------------------------------------------------------------


def nvmlInit() -> None:
    global _init_count, _store, _checked
    try:
        _checked = None
        _store = SimStateStore.from_env()
        _store.load()
    except Exception:
        raise NVMLError(NVML_ERROR_DRIVER_NOT_LOADED) from None
    _init_count += 1


def nvmlInitWithFlags(flags: int) -> None:
    nvmlInit()


def nvmlShutdown() -> None:
    global _init_count
    if _init_count <= 0:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    _init_count -= 1


def nvmlSystemGetDriverVersion() -> str:
    return _state().driver_version


def nvmlSystemGetNVMLVersion() -> str:
    return "13." + _state().driver_version


def nvmlSystemGetCudaDriverVersion() -> int:
    major, minor = _state().cuda_version.split(".")
    return int(major) * 1000 + int(minor) * 10


nvmlSystemGetCudaDriverVersion_v2 = nvmlSystemGetCudaDriverVersion


def nvmlDeviceGetCount() -> int:
    return len(_state().gpus)


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    if not 0 <= int(index) < nvmlDeviceGetCount():
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(int(index))


def nvmlDeviceGetHandleByUUID(uuid: str | bytes) -> _Handle:
    text = uuid.decode() if isinstance(uuid, bytes) else uuid
    for gpu in _state().gpus:
        if gpu.uuid == text:
            return _Handle(gpu.index)
    raise NVMLError(NVML_ERROR_NOT_FOUND)


# -- identity ------------------------------------------------------------------------------------


def nvmlDeviceGetName(handle: _Handle) -> str:
    gpu = _gpu(handle)
    if handle.mig_index is not None:
        gi, _ = mig_devices(gpu)[handle.mig_index]
        profile = gpu.model.mig_profile(gi.profile_id)
        return f"{gpu.model.name} MIG {profile.name if profile else '?'}"
    return gpu.model.name


def nvmlDeviceGetUUID(handle: _Handle) -> str:
    gpu = _gpu(handle)
    if handle.mig_index is not None:
        return mig_devices(gpu)[handle.mig_index][1].uuid
    return gpu.uuid


def nvmlDeviceGetIndex(handle: _Handle) -> int:
    return _gpu(handle).index


def nvmlDeviceGetSerial(handle: _Handle) -> str:
    return _gpu(handle).serial


def nvmlDeviceGetPciInfo(handle: _Handle) -> c_nvmlPciInfo_t:
    gpu = _gpu(handle)
    domain, bus, dev = gpu.pci_bus_id.split(":")
    return c_nvmlPciInfo_t(
        busId=gpu.pci_bus_id, busIdLegacy=gpu.pci_bus_id[4:], domain=int(domain, 16), bus=int(bus, 16),
        device=int(dev.split(".")[0], 16), pciDeviceId=int(gpu.model.pci_device_id, 16),
        pciSubSystemId=int(gpu.model.pci_sub_system_id, 16),
    )


nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo


def nvmlDeviceGetCudaComputeCapability(handle: _Handle) -> tuple[int, int]:
    major, minor = _gpu(handle).model.compute_cap.split(".")
    return int(major), int(minor)


# -- readings ------------------------------------------------------------------------------------


def nvmlDeviceGetUtilizationRates(handle: _Handle) -> c_nvmlUtilization_t:
    _, s = _sample(handle)
    if handle.mig_index is not None or s.util_gpu_pct is None or s.util_mem_pct is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # as real NVML on MIG devices / MIG-enabled GPUs
    return c_nvmlUtilization_t(gpu=s.util_gpu_pct, memory=s.util_mem_pct)


def nvmlDeviceGetMemoryInfo(handle: _Handle, version: int | None = None) -> c_nvmlMemory_t:
    gpu, s = _sample(handle)
    mib = 1024 * 1024
    if handle.mig_index is not None:
        gi, _ = mig_devices(gpu)[handle.mig_index]
        profile = gpu.model.mig_profile(gi.profile_id)
        total = (profile.memory_mib if profile else 0) * mib
        used = sum(p.used_mib for p in gpu.processes if p.gpu_instance_id == gi.gi_id) * mib
        return c_nvmlMemory_t(total=total, free=total - used, used=used)
    total = s.mem_total_mib * mib
    used = s.mem_used_mib * mib
    return c_nvmlMemory_t(total=total, free=s.mem_free_mib * mib, used=used)


def nvmlDeviceGetTemperature(handle: _Handle, sensor: int) -> int:
    if sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _sample(handle)[1].temp_c


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    gpu, s = _sample(handle)
    _no_vgpu_power(gpu)
    return int(s.power_w * 1000)


def nvmlDeviceGetEnforcedPowerLimit(handle: _Handle) -> int:
    gpu = _gpu(handle)
    _no_vgpu_power(gpu)
    return int(gpu.model.power_limit_w * 1000)


nvmlDeviceGetPowerManagementLimit = nvmlDeviceGetEnforcedPowerLimit


def nvmlDeviceGetClockInfo(handle: _Handle, clock_type: int) -> int:
    _, s = _sample(handle)
    clocks = {
        NVML_CLOCK_GRAPHICS: s.sm_clock_mhz, NVML_CLOCK_SM: s.sm_clock_mhz,
        NVML_CLOCK_MEM: s.mem_clock_mhz, NVML_CLOCK_VIDEO: s.video_clock_mhz,
    }
    if clock_type not in clocks:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return clocks[clock_type]


def nvmlDeviceGetMaxClockInfo(handle: _Handle, clock_type: int) -> int:
    model = _gpu(handle).model
    clocks = {
        NVML_CLOCK_GRAPHICS: model.max_sm_clock_mhz, NVML_CLOCK_SM: model.max_sm_clock_mhz,
        NVML_CLOCK_MEM: model.max_mem_clock_mhz, NVML_CLOCK_VIDEO: model.max_video_clock_mhz,
    }
    if clock_type not in clocks:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return clocks[clock_type]


def nvmlDeviceGetPcieThroughput(handle: _Handle, counter: int) -> int:
    _, s = _sample(handle)
    if counter == NVML_PCIE_UTIL_TX_BYTES:
        return s.pcie_tx_kbs
    if counter == NVML_PCIE_UTIL_RX_BYTES:
        return s.pcie_rx_kbs
    raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)


def nvmlDeviceGetCurrPcieLinkGeneration(handle: _Handle) -> int:
    return _sample(handle)[1].pcie_gen_current


def nvmlDeviceGetMaxPcieLinkGeneration(handle: _Handle) -> int:
    return _gpu(handle).model.pcie_gen_max


def nvmlDeviceGetCurrPcieLinkWidth(handle: _Handle) -> int:
    return _gpu(handle).model.pcie_width_max


def nvmlDeviceGetMaxPcieLinkWidth(handle: _Handle) -> int:
    return _gpu(handle).model.pcie_width_max


def nvmlDeviceGetFanSpeed(handle: _Handle) -> int:
    gpu, s = _sample(handle)
    if not gpu.model.has_fan:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # passively cooled data-center card
    return int(30 + 50 * s.load)


def nvmlDeviceGetPerformanceState(handle: _Handle) -> int:
    return int(_sample(handle)[1].pstate[1:])


def nvmlDeviceGetCurrentClocksEventReasons(handle: _Handle) -> int:
    return _sample(handle)[1].reasons


nvmlDeviceGetCurrentClocksThrottleReasons = nvmlDeviceGetCurrentClocksEventReasons


def nvmlDeviceGetSupportedClocksEventReasons(handle: _Handle) -> int:
    _gpu(handle)
    return 0x1FF


nvmlDeviceGetSupportedClocksThrottleReasons = nvmlDeviceGetSupportedClocksEventReasons


def nvmlDeviceGetTotalEccErrors(handle: _Handle, error_type: int, counter_type: int) -> int:
    if not _gpu(handle).model.ecc:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return 0


def nvmlDeviceGetEccMode(handle: _Handle) -> list[int]:
    if not _gpu(handle).model.ecc:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return [NVML_FEATURE_ENABLED, NVML_FEATURE_ENABLED]


def nvmlDeviceGetEncoderUtilization(handle: _Handle) -> list[int]:
    return [_sample(handle)[1].encoder_pct, 167000]


def nvmlDeviceGetDecoderUtilization(handle: _Handle) -> list[int]:
    return [_sample(handle)[1].decoder_pct, 167000]


def nvmlDeviceGetComputeRunningProcesses(handle: _Handle) -> list[c_nvmlProcessInfo_t]:
    _, s = _sample(handle)
    invalid = 0xFFFFFFFF
    return [
        c_nvmlProcessInfo_t(
            pid=p.pid, usedGpuMemory=p.used_mib * 1024 * 1024,
            gpuInstanceId=invalid if p.gpu_instance_id is None else p.gpu_instance_id,
            computeInstanceId=invalid if p.compute_instance_id is None else p.compute_instance_id,
        )
        for p in s.processes
    ]


nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses


def nvmlDeviceGetProcessUtilization(handle: _Handle, lastSeenTimeStamp: int) -> list[c_nvmlProcessUtilizationSample_t]:
    """Per-process utilisation since `lastSeenTimeStamp` (µs): the GPU's busy share split by memory held."""
    if handle.mig_index is not None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # as real NVML on MIG devices
    _, s = _sample(handle)
    stamp = int(time.time() * 1e6)
    if not s.processes or stamp <= lastSeenTimeStamp:
        raise NVMLError(NVML_ERROR_NOT_FOUND)  # what real NVML says when there is no newer sample
    shares = s.process_utilization()
    if not shares:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # the parent of MIG devices: NVML cannot tell
    return [
        c_nvmlProcessUtilizationSample_t(
            pid=pid, timeStamp=stamp, smUtil=sm, memUtil=mem, encUtil=0, decUtil=0,
        )
        for pid, (sm, mem) in shares.items()
    ]


def nvmlSystemGetProcessName(pid: int) -> str:
    """The process's executable, as real NVML reports it (simulated processes only)."""
    for gpu in _state().gpus:
        for proc in _sample(_Handle(gpu.index))[1].processes:
            if proc.pid == pid:
                return proc.name.split(" ", 1)[0]
    raise NVMLError(NVML_ERROR_NOT_FOUND)


SIM_PROCESS_USER = "ubuntu"


def gpuwsSimProcessDetails(pid: int) -> tuple[str, str] | None:
    """(user, command line) of a simulated process. NOT an NVML call: the simulated host's processes
    have no /proc entry, so the agent asks here first (a real pynvml has no such function)."""
    for gpu in _state().gpus:
        for proc in _sample(_Handle(gpu.index))[1].processes:
            if proc.pid == pid:
                return SIM_PROCESS_USER, proc.name
    return None


# -- MIG -----------------------------------------------------------------------------------------


def nvmlDeviceGetMigMode(handle: _Handle) -> list[int]:
    gpu = _gpu(handle)
    if not gpu.model.mig_capable or handle.mig_index is not None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return [int(gpu.mig_current), int(gpu.mig_pending)]


def nvmlDeviceGetMaxMigDeviceCount(handle: _Handle) -> int:
    gpu = _gpu(handle)
    if not gpu.model.mig_capable:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return 7


def nvmlDeviceGetMigDeviceHandleByIndex(device: _Handle, index: int) -> _Handle:
    gpu = _gpu(device)
    if not gpu.model.mig_capable:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if not gpu.mig_current or not 0 <= int(index) < len(mig_devices(gpu)):
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return _Handle(device.index, int(index))


def nvmlDeviceIsMigDeviceHandle(handle: _Handle) -> int:
    return int(isinstance(handle, _Handle) and handle.mig_index is not None)


def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle: _Handle) -> _Handle:
    return _Handle(handle.index)


def nvmlDeviceGetGpuInstanceId(handle: _Handle) -> int:
    if handle.mig_index is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return mig_devices(_gpu(handle))[handle.mig_index][0].gi_id


def nvmlDeviceGetComputeInstanceId(handle: _Handle) -> int:
    if handle.mig_index is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return mig_devices(_gpu(handle))[handle.mig_index][1].ci_id


# -- GPM (GPU Performance Monitoring) -------------------------------------------------------------
# Real GPM keeps hardware counters; a sample is a snapshot of them and a metric is the rate between
# two samples. Here a sample records which device (or GPU instance) and when, and a metric is the
# simulated load averaged over the time between the two samples, so it follows the load as the
# real counters would. Supported on the Hopper (and later) models only, as on real hardware.

GPM_ARCHITECTURES = frozenset({"Hopper", "Blackwell"})


@dataclass
class c_nvmlGpmSupport_t:
    version: int = 0
    isSupportedDevice: int = 0


class c_nvmlGpmSample_t:
    """An opaque GPM sample (nvmlGpmSampleAlloc): what it snapshotted, and when."""

    def __init__(self) -> None:
        self.index: int | None = None
        self.gi_id: int | None = None  # None: the whole GPU
        self.t = 0.0
        self.freed = False


@dataclass
class c_nvmlGpmMetric_t:
    metricId: int = 0
    nvmlReturn: int = NVML_SUCCESS
    value: float = 0.0


class c_nvmlGpmMetricsGet_t:
    """nvmlGpmMetricsGet's in/out structure: ask `numMetrics` metrics between `sample1` and `sample2`."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: c_nvmlGpmSample_t | None = None
        self.sample2: c_nvmlGpmSample_t | None = None
        self.metrics = [c_nvmlGpmMetric_t() for _ in range(NVML_GPM_METRIC_MAX)]


# Each metric as a share of the load: SMs are never all busy, tensor cores even less.
_GPM_SHARE = {
    NVML_GPM_METRIC_GRAPHICS_UTIL: 1.0,
    NVML_GPM_METRIC_SM_UTIL: 0.9,
    NVML_GPM_METRIC_SM_OCCUPANCY: 0.6,
    NVML_GPM_METRIC_ANY_TENSOR_UTIL: 0.5,
    NVML_GPM_METRIC_DRAM_BW_UTIL: 0.55,
}


def _gpm_gpu(handle: Any) -> GpuState:
    gpu = _gpu(handle)
    if handle.mig_index is not None or gpu.model.architecture not in GPM_ARCHITECTURES:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu


def nvmlGpmQueryDeviceSupport(device: _Handle) -> c_nvmlGpmSupport_t:
    gpu = _gpu(device)
    supported = device.mig_index is None and gpu.model.architecture in GPM_ARCHITECTURES
    return c_nvmlGpmSupport_t(version=NVML_GPM_SUPPORT_VERSION, isSupportedDevice=int(supported))


def nvmlGpmSampleAlloc() -> c_nvmlGpmSample_t:
    return c_nvmlGpmSample_t()


def nvmlGpmSampleFree(gpmSample: c_nvmlGpmSample_t) -> None:
    gpmSample.freed = True


def nvmlGpmSampleGet(device: _Handle, gpmSample: c_nvmlGpmSample_t) -> c_nvmlGpmSample_t:
    gpu = _gpm_gpu(device)
    gpmSample.index, gpmSample.gi_id, gpmSample.t = gpu.index, None, time.time()
    return gpmSample


def nvmlGpmMigSampleGet(device: _Handle, gpuInstanceId: int, gpmSample: c_nvmlGpmSample_t) -> c_nvmlGpmSample_t:
    """A sample of one GPU instance of a MIG-enabled GPU (`device` is the parent GPU)."""
    gpu = _gpm_gpu(device)
    if not gpu.mig_current or not any(gi.gi_id == gpuInstanceId for gi in gpu.gpu_instances):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    gpmSample.index, gpmSample.gi_id, gpmSample.t = gpu.index, int(gpuInstanceId), time.time()
    return gpmSample


def nvmlGpmMetricsGet(metricsGet: c_nvmlGpmMetricsGet_t) -> c_nvmlGpmMetricsGet_t:
    first, second = metricsGet.sample1, metricsGet.sample2
    if metricsGet.version != NVML_GPM_METRICS_GET_VERSION or first is None or second is None:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    if first.freed or second.freed or first.index is None or (first.index, first.gi_id) != (
            second.index, second.gi_id) or not second.t > first.t:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    gpu = _state().gpu(first.index)
    steps = min(8, max(2, int((second.t - first.t) * 4) + 1))
    times = [first.t + (second.t - first.t) * i / (steps - 1) for i in range(steps)]
    if first.gi_id is None:
        loads = [scenario_load(gpu, t) for t in times]
    else:
        loads = [slice_load(gpu, first.gi_id, t) for t in times]
    load = sum(loads) / len(loads)
    for metric in metricsGet.metrics[:metricsGet.numMetrics]:
        share = _GPM_SHARE.get(metric.metricId)
        if share is None:
            metric.nvmlReturn, metric.value = NVML_ERROR_NOT_SUPPORTED, 0.0
        else:
            metric.nvmlReturn, metric.value = NVML_SUCCESS, round(100.0 * share * load, 2)
    return metricsGet
