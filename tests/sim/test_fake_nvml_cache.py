"""The fake pynvml reads the state file only when it changes, and sees every change at once."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from gpuws.sim.server import FAKE_NVML_DIR
from gpuws.sim.state import SimStateStore
from tests.sim.conftest import SmiRunner


@pytest.fixture
def nvml(sim_store: SimStateStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    # Loaded under another name so the real nvidia-ml-py in this venv is left alone.
    spec = importlib.util.spec_from_file_location("fake_pynvml_cache", FAKE_NVML_DIR / "pynvml.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fake_pynvml_cache", module)
    spec.loader.exec_module(module)
    module.nvmlInit()
    yield module
    module.nvmlShutdown()


def test_shared_state_is_reused_until_the_file_changes(sim_store: SimStateStore) -> None:
    reader = SimStateStore(sim_store.dir)
    first = reader.load_shared()
    assert reader.load_shared() is first
    with sim_store.update() as state:
        state.gpu(1).set_load(0.5)
    second = reader.load_shared()
    assert second is not first
    assert second.gpu(1).load == {"kind": "constant", "value": 0.5}


def test_mig_and_load_changes_are_seen_by_the_next_call(
    nvml: ModuleType, sim_store: SimStateStore, smi: SmiRunner
) -> None:
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    with sim_store.update() as state:
        state.gpu(0).set_load(1.0)
    assert nvml.nvmlDeviceGetUtilizationRates(h).gpu == 100
    assert nvml.nvmlDeviceGetMigMode(h) == [0, 0]
    with sim_store.update() as state:
        state.gpu(0).set_load(0.0)
    assert nvml.nvmlDeviceGetUtilizationRates(h).gpu == 0  # within the reading's reuse time
    assert smi("-i", "0", "-mig", "1")[0] == 0
    assert nvml.nvmlDeviceGetMigMode(h) == [1, 1]
    assert smi("mig", "-i", "0", "-cgi", "9,9", "-C")[0] == 0
    assert nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, 1)).total == 40448 * 1024**2


def test_one_reading_per_gpu_per_instant(nvml: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[float] = []
    real_sample = nvml.sample

    def counting(gpu: Any, t: float) -> Any:
        computed.append(t)
        return real_sample(gpu, t)

    monkeypatch.setattr(nvml, "sample", counting)
    h = nvml.nvmlDeviceGetHandleByIndex(2)
    assert nvml.nvmlDeviceGetPowerUsage(h) > 0
    nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)
    nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)
    assert len(computed) == 1
    time.sleep(nvml.SAMPLE_REUSE_S * 1.5)
    nvml.nvmlDeviceGetPowerUsage(h)
    assert len(computed) == 2  # a later instant: a new reading


def test_one_look_at_the_state_file_per_instant_and_other_processes_changes_are_seen(
    nvml: ModuleType, sim_store: SimStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from gpuws.sim import state as sim_state

    looks: list[int] = []
    real_load_shared = SimStateStore.load_shared

    def counting(self: SimStateStore) -> Any:
        looks.append(1)
        return real_load_shared(self)

    monkeypatch.setattr(SimStateStore, "load_shared", counting)
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    time.sleep(nvml.STATE_REUSE_S * 2)
    nvml.nvmlDeviceGetPowerUsage(h)
    nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)
    nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)
    assert len(looks) <= 2  # one burst of calls: one look (two if it straddled the reuse time)
    # A change saved by another process (the simulated nvidia-smi, a test) is seen once the moment
    # is over; this process's own saves at once (test_mig_and_load_changes_are_seen_by_the_next_call).
    saves = sim_state.saves_in_process
    code = ("import sys; from gpuws.sim.state import SimStateStore\n"
            "with SimStateStore(sys.argv[1]).update() as s: s.gpu(0).set_load(1.0)\n")
    subprocess.run([sys.executable, "-c", code, str(sim_store.dir)], check=True, timeout=60)
    assert sim_state.saves_in_process == saves
    time.sleep(nvml.STATE_REUSE_S * 2)
    assert nvml.nvmlDeviceGetUtilizationRates(h).gpu == 100
