"""The fake pynvml: nvidia-ml-py's names and semantics over the simulated state."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from gpuws.sim.server import FAKE_NVML_DIR


@pytest.fixture
def nvml(sim_store, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # Loaded under another name so the real nvidia-ml-py in this venv is left alone.
    spec = importlib.util.spec_from_file_location("fake_pynvml", FAKE_NVML_DIR / "pynvml.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fake_pynvml", module)
    spec.loader.exec_module(module)
    module.nvmlInit()
    yield module
    module.nvmlShutdown()


def test_marked_and_matching_real_constants(nvml) -> None:
    import pynvml as real

    assert nvml.GPUWS_SIMULATED is True
    assert not hasattr(real, "GPUWS_SIMULATED")
    for name in ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_NOT_FOUND", "NVML_CLOCK_SM", "NVML_CLOCK_MEM",
                 "NVML_PCIE_UTIL_TX_BYTES", "NVML_TEMPERATURE_GPU", "nvmlClocksEventReasonSwPowerCap",
                 "nvmlClocksThrottleReasonHwThermalSlowdown", "nvmlClocksEventReasonGpuIdle"):
        assert getattr(nvml, name) == getattr(real, name), name
    assert issubclass(nvml.NVMLError_NotSupported, nvml.NVMLError)
    assert nvml.NVMLError(3).__class__ is nvml.NVMLError_NotSupported
    assert str(nvml.NVMLError_NotSupported()) == "Not Supported"


def test_readings_have_nvml_units(nvml) -> None:
    assert nvml.nvmlDeviceGetCount() == 4
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetName(h) == "NVIDIA H100 80GB HBM3"
    mem = nvml.nvmlDeviceGetMemoryInfo(h)
    assert mem.total == 81559 * 1024 * 1024 and mem.used + mem.free <= mem.total
    assert nvml.nvmlDeviceGetEnforcedPowerLimit(h) == 700_000  # mW
    assert 0 < nvml.nvmlDeviceGetPowerUsage(h) <= 700_000
    assert nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM) == 1980
    assert nvml.nvmlDeviceGetMaxPcieLinkGeneration(h) == 5
    assert nvml.nvmlDeviceGetMigMode(h) == [0, 0]
    assert nvml.nvmlSystemGetCudaDriverVersion() == 13010
    util, period = nvml.nvmlDeviceGetDecoderUtilization(h)
    assert period > 0 and 0 <= util <= 100
    with pytest.raises(nvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetFanSpeed(h)  # passively cooled
    with pytest.raises(nvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetPowerUsage(nvml.nvmlDeviceGetHandleByIndex(3))  # vGPU guest


def test_utilisation_on_mig_device_is_not_supported(nvml, sim_store, smi) -> None:
    with sim_store.update() as state:
        state.gpu(0).set_load(0.0)
    assert smi("-i", "0", "-mig", "1")[0] == 0
    assert smi("mig", "-i", "0", "-cgi", "9,9", "-C")[0] == 0
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetMigMode(h) == [1, 1]
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, 1)
    assert nvml.nvmlDeviceIsMigDeviceHandle(mig) and not nvml.nvmlDeviceIsMigDeviceHandle(h)
    assert nvml.nvmlDeviceGetMemoryInfo(mig).total == 40448 * 1024 * 1024
    with pytest.raises(nvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetUtilizationRates(mig)
    with pytest.raises(nvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, 5)


def _gpm_rates(nvml, parent, gi: int, metric_ids: list[int]) -> list[tuple[int, float]]:
    import time

    first = nvml.nvmlGpmMigSampleGet(parent, gi, nvml.nvmlGpmSampleAlloc())
    time.sleep(0.05)
    second = nvml.nvmlGpmMigSampleGet(parent, gi, nvml.nvmlGpmSampleAlloc())
    request = nvml.c_nvmlGpmMetricsGet_t()
    request.version, request.numMetrics = nvml.NVML_GPM_METRICS_GET_VERSION, len(metric_ids)
    request.sample1, request.sample2 = first, second
    for slot, metric_id in zip(request.metrics, metric_ids, strict=False):
        slot.metricId = metric_id
    nvml.nvmlGpmMetricsGet(request)
    return [(m.nvmlReturn, m.value) for m in request.metrics[:len(metric_ids)]]


def test_gpm_gives_per_slice_activity_on_hopper_following_the_slice_load(nvml, sim_store, smi) -> None:
    import pynvml as real

    for name in ("NVML_GPM_METRIC_GRAPHICS_UTIL", "NVML_GPM_METRIC_SM_UTIL", "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
                 "NVML_GPM_METRIC_DRAM_BW_UTIL", "NVML_GPM_METRICS_GET_VERSION", "NVML_GPM_SUPPORT_VERSION"):
        assert getattr(nvml, name) == getattr(real, name), name
    with sim_store.update() as state:
        state.gpu(0).set_load(0.0)
        state.gpu(1).set_load(0.0)
    assert smi("-i", "0,1", "-mig", "1")[0] == 0
    assert smi("mig", "-i", "0,1", "-cgi", "9,9", "-C")[0] == 0
    with sim_store.update() as state:
        state.gpu(0).set_load(0.6)
        state.gpu(0).add_process("python3 train.py", 2048, gpu_instance_id=2, compute_instance_id=0)
    h100, a100 = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    assert nvml.nvmlGpmQueryDeviceSupport(h100).isSupportedDevice == 1
    assert nvml.nvmlGpmQueryDeviceSupport(a100).isSupportedDevice == 0  # Ampere: no GPM
    ids = [nvml.NVML_GPM_METRIC_GRAPHICS_UTIL, nvml.NVML_GPM_METRIC_SM_UTIL, 99]
    (ok_g, graphics), (ok_sm, sm), (unknown, _) = _gpm_rates(nvml, h100, 2, ids)
    assert ok_g == ok_sm == nvml.NVML_SUCCESS and unknown == nvml.NVML_ERROR_NOT_SUPPORTED
    assert 55 <= graphics <= 65 and 0 < sm < graphics  # the slice with the job, at its 60 % load
    assert _gpm_rates(nvml, h100, 1, ids[:1]) == [(nvml.NVML_SUCCESS, 0.0)]  # the empty slice: idle
    with pytest.raises(nvml.NVMLError_NotSupported):
        nvml.nvmlGpmMigSampleGet(a100, 1, nvml.nvmlGpmSampleAlloc())
    with pytest.raises(nvml.NVMLError_InvalidArgument):
        nvml.nvmlGpmMigSampleGet(h100, 5, nvml.nvmlGpmSampleAlloc())  # no such GPU instance
