"""The datasheet catalog and model detection from real nvidia-smi names."""

from __future__ import annotations

import re

import pytest

from gpuws.core.bench.datasheets import CATALOG, PCIE_X16_GB_S, datasheet_for, detect_model, is_vgpu_name
from tests.support.real_fixtures import REAL_FIXTURES

FIXTURES = REAL_FIXTURES

REQUIRED_MODELS = {
    "V100 SXM2", "V100 PCIe", "T4", "A10", "A10G", "A100 40GB PCIe", "A100 80GB PCIe", "A100 40GB SXM",
    "A100 80GB SXM", "L4", "L40S", "RTX 4090", "RTX 6000 Ada", "H100 PCIe", "H100 SXM", "H100 NVL", "H200",
    "B200",
}


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
        # Not in the catalog: no guess.
        ("NVIDIA L40", None),
        ("NVIDIA RTX 4000 SFF Ada Generation", None),
        ("NVIDIA GeForce RTX 3090", None),
        ("Graphics Device", None),
        # vGPU guests are slices, never a full card's datasheet.
        ("GRID A100-10C", None),
        ("GRID P4-1Q", None),
        ("NVIDIA A100-4C", None),
    ],
)
def test_detect_model(name: str, model: str | None) -> None:
    assert detect_model(name) == model


def test_names_in_real_captures_are_detected() -> None:
    """The product names real drivers printed (shared fixtures) map to the right models."""
    names = {}
    for path in sorted((FIXTURES / "nvidia-smi-xml").glob("*.xml")):
        for name in re.findall(r"<product_name>([^<]+)</product_name>", path.read_text()):
            names[name] = detect_model(name)
    capture = (FIXTURES / "nvidia-smi-captures" / "h100-80gb-hbm3__590.48.01.txt").read_text()
    names.update({n: detect_model(n) for n in re.findall(r"GPU \d+: (.+?) \(UUID", capture)})
    assert names["Tesla T4"] == "T4"
    assert names["NVIDIA A10G"] == "A10G"
    assert names["NVIDIA A100-SXM4-80GB"] == "A100 80GB SXM"
    assert names["NVIDIA H100 80GB HBM3"] == "H100 SXM"
    # Consumer cards outside the catalog stay unknown rather than borrowing another card's peaks.
    assert names["NVIDIA GeForce RTX 3080"] is None


def test_catalog_covers_the_required_models_with_dense_figures() -> None:
    assert set(CATALOG) >= REQUIRED_MODELS
    for model, ds in CATALOG.items():
        assert ds.model == model
        assert ds.source, f"{model} cites no datasheet"
        assert ds.memory_gb_s > 0 and ds.fp32_tflops > 0
        assert ds.pcie_gen in PCIE_X16_GB_S
        # Dense tensor peaks: half-precision is at least twice FP32, and FP8 twice BF16.
        if ds.fp16_tflops is not None:
            assert ds.fp16_tflops >= 2 * ds.fp32_tflops
        if ds.fp8_tflops is not None and ds.bf16_tflops is not None:
            # (L40S: the datasheet prints 362.05 dense fp16 and 733 dense fp8, so not exactly 2x.)
            assert ds.fp8_tflops == pytest.approx(2 * ds.bf16_tflops, rel=0.02)


@pytest.mark.parametrize(
    ("name", "bf16", "memory", "fp8"),
    [
        ("NVIDIA H100 80GB HBM3", 989.5, 3350, 1979),
        ("NVIDIA H200", 989.5, 4800, 1979),
        ("NVIDIA A100-SXM4-80GB", 312, 2039, None),
        ("NVIDIA L40S", 362.05, 864, 733),
        ("Tesla T4", None, 320, None),
    ],
)
def test_known_datasheet_figures(name: str, bf16: float | None, memory: float, fp8: float | None) -> None:
    ds = datasheet_for(name)
    assert ds is not None
    assert ds.gemm_peak("gemm_bf16") == bf16
    assert ds.gemm_peak("gemm_fp8") == fp8
    assert ds.memory_gb_s == memory


def test_pcie_bandwidth_follows_the_link() -> None:
    h100 = CATALOG["H100 SXM"]
    assert h100.pcie_gb_s() == 63.0
    assert h100.pcie_gb_s(4, 8) == pytest.approx(15.75)
    assert is_vgpu_name("GRID A100-10C") and not is_vgpu_name("NVIDIA A100-SXM4-80GB")


def test_figures_are_nvidias_dense_ones_not_sparse_halved() -> None:
    """NVIDIA's tables: L40S dense fp16/bf16 362.05 TFLOP/s (733* sparse); B200 dense tf32 1,100."""
    assert CATALOG["L40S"].fp16_tflops == CATALOG["L40S"].bf16_tflops == 362.05
    assert CATALOG["B200"].tf32_tflops == 1100
