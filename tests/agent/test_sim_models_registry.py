"""Issue 23: the standalone runner's GPU table copies (SIM_MODELS, SIM_MAX_CLOCK, GEMM_CHECKS in
gpuws/agent/bench/, which must not import gpuws) against the registry (gpuws/core/gpus)
and the simulator's models: any drift fails here."""

from __future__ import annotations

from types import ModuleType

import pytest

from gpuws.core.bench.verdicts import GEMM_CHECKS
from gpuws.core.gpus.datasheets import DATASHEETS
from gpuws.core.gpus.models import variant_for_name
from gpuws.sim.models import GPU_MODELS
from tests.agent.test_bench_runner import load_runner

# The registry's datasheet for each SIM_MODELS key (a vGPU profile is cut from the 40 GB A100 PCIe,
# as gpuws.core.bench.verdicts.vgpu_parent takes it).
REGISTRY_MODEL = {"GRID A100": "A100 40GB PCIe", "H200": "H200", "H100": "H100 SXM", "A100": "A100 80GB SXM",
                  "L40S": "L40S", "L4": "L4", "A10": "A10", "T4": "T4"}


@pytest.fixture(scope="module")
def runner() -> ModuleType:
    return load_runner()


def test_every_sim_model_has_a_registry_datasheet(runner: ModuleType) -> None:
    assert set(runner.SIM_MODELS) == set(REGISTRY_MODEL)


@pytest.mark.parametrize("key", sorted(REGISTRY_MODEL))
def test_sim_model_figures_equal_the_registry(runner: ModuleType, key: str) -> None:
    ds = DATASHEETS[REGISTRY_MODEL[key]]
    fp32, tf32, fp16, bf16, fp8, memory, link, nvlink = runner.SIM_MODELS[key]
    assert (fp32, tf32, fp16, bf16, fp8) == (ds.fp32_tflops, ds.tf32_tflops, ds.fp16_tflops, ds.bf16_tflops,
                                             ds.fp8_tflops)
    assert memory == ds.memory_gb_s
    assert link == ds.pcie_gb_s()  # one direction of the card's own PCIe x16 link
    assert nvlink == ds.nvlink_gb_s or (ds.nvlink_gb_s is None and nvlink is None)


def test_the_runner_finds_the_same_model_as_the_registry(runner: ModuleType) -> None:
    """sim_peaks matches by substring; the registry by its patterns: the same card either way."""
    for model in GPU_MODELS.values():
        name = model.vgpu_profile or model.name
        peaks = runner.sim_peaks(name)
        key = next(k for k, v in runner.SIM_MODELS.items() if v == peaks)
        variant = variant_for_name(name)
        if variant is not None:  # a vGPU profile has no variant: its card is the SIM_MODELS row
            assert variant.datasheet == REGISTRY_MODEL[key], name


def test_max_clocks_equal_the_simulator_models(runner: ModuleType) -> None:
    for model in GPU_MODELS.values():
        if model.vgpu_profile:
            continue
        key = next(k for k in runner.SIM_MAX_CLOCK if k in model.name.upper())
        assert runner.SIM_MAX_CLOCK[key] == model.max_sm_clock_mhz, model.name


def test_gemm_checks_are_the_scorers(runner: ModuleType) -> None:
    assert tuple(runner.GEMM_CHECKS) == GEMM_CHECKS
