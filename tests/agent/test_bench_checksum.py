"""Issue 32: every element of every checked GEMM is verified by banded Huang-Abraham checksums in
float64. One wrong element, one wrong 32 x 32 tile, one NaN and an error that repeats in every
stress product all fail; realistic fp32/tf32/fp16/bf16/fp8 products (rounding emulated with NumPy
as the formats round) raise no false alarm."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import numpy
import pytest

from tests.agent.test_bench_no_false_pass import Capture, results_of
from tests.agent.test_bench_runner import load_runner

FORMATS = ("fp32", "tf32", "fp16", "bf16", "fp8")


@pytest.fixture(scope="module")
def runner() -> ModuleType:
    return load_runner()


def product(runner: ModuleType, fmt: str, seed: int, n: int, k: int, m: int) -> tuple[Any, Any, Any]:
    """A product as the hardware would return it: inputs rounded to the format, float32
    accumulation (NumPy's BLAS), the output rounded to the format (bf16 for fp8)."""
    rng = numpy.random.default_rng(seed)
    a = rng.standard_normal((n, k)).astype(numpy.float32)
    b = rng.standard_normal((k, m)).astype(numpy.float32)
    stored = "fp32" if fmt == "tf32" else fmt
    a, b = runner.round_to_format(numpy, a, stored), runner.round_to_format(numpy, b, stored)
    c = runner.round_to_format(numpy, a, fmt) @ runner.round_to_format(numpy, b, fmt)
    return a, b, runner.round_to_format(numpy, c, "bf16" if fmt == "fp8" else "fp32" if fmt == "tf32" else fmt)


def check(runner: ModuleType, a: Any, b: Any, c: Any, fmt: str) -> dict[str, Any]:
    return dict(runner.checksum_check(runner.ArrayOps(numpy), a, b, c, fmt))


def test_rounding_is_emulated_as_the_formats_round(runner: ModuleType) -> None:
    x = numpy.array([1.0 + 2**-9, 1.0 + 3 * 2**-9, 1.0 + 2**-12, 300.0, 1e-3, 1000.0], dtype=numpy.float32)
    assert list(runner.round_to_format(numpy, x, "bf16")[:2]) == [1.0, 1.0 + 2**-7]  # ties to even
    assert runner.round_to_format(numpy, x, "tf32")[2] == 1.0 and runner.round_to_format(numpy, x, "fp16")[2] == 1.0
    fp8 = runner.round_to_format(numpy, x, "fp8")
    assert fp8[3] == 288.0 and fp8[4] == 2**-9 and fp8[5] == 448.0  # E4M3: 3 bits, subnormals, 448 at most


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_false_alarm_on_realistic_products(runner: ModuleType, fmt: str) -> None:
    """Square, wide and deep products (k up to 8192): every checksum within tolerance, with room."""
    worst = 0.0
    for seed, (n, k, m) in enumerate([(256, 256, 256), (512, 512, 512), (96, 8192, 64), (300, 1000, 200)]):
        a, b, c = product(runner, fmt, seed, n, k, m)
        found = check(runner, a, b, c, fmt)
        assert found["wrong"] == 0 and found["nonfinite"] == 0 and found["first_wrong"] is None, (n, k, m, found)
        assert found["elements"] == n * m
        worst = max(worst, found["max_share_of_tolerance"])
    assert worst < 0.5, worst  # the noise stays well inside: no alarm at 8 standard deviations


def test_fp32_from_blas_itself_passes(runner: ModuleType) -> None:
    backend = runner.NumpyBackend(numpy)
    backend.make_gemm(0, "gemm_fp32", 512)()
    assert backend.checksum_gemm(0, "gemm_fp32")["wrong"] == 0


def unsampled(runner: ModuleType, n: int) -> tuple[int, int]:
    """A row and a column the sampled answer check never looks at."""
    rows = set(runner.gemm_samples(n))
    free = [i for i in range(n) if i not in rows]
    return free[len(free) // 2], free[len(free) // 3]


@pytest.mark.parametrize("fmt", FORMATS)
def test_one_wrong_element_the_sampled_check_misses_is_caught(runner: ModuleType, fmt: str) -> None:
    a, b, c = product(runner, fmt, 7, 512, 512, 512)
    i, j = unsampled(runner, 512)
    scale = float(numpy.abs(c).max())
    c[i, j] += 0.25 * scale  # a quarter of the largest element: a flipped high bit does more
    rows, cols = runner.gemm_samples(512), runner.gemm_samples(512)
    ref, got = runner.array_grid(numpy, a, b, c, rows, cols)
    assert runner.answer_check(ref, got, 1e-2, rows, cols)["wrong"] == 0  # the sampled check is blind here
    found = check(runner, a, b, c, fmt)
    assert found["wrong"] == 2 and found["first_wrong"] == [i, j]  # its row sum and its column sum


def test_small_errors_are_caught_where_rounding_cannot_explain_them(runner: ModuleType) -> None:
    """The tolerance of a 32-element band is 16 u_out of the product's largest element (fp16 0.8 %,
    bf16 6 %; fp32 11 sqrt(k) u: 6e-5 at k = 8192): an element off by more is caught."""
    for fmt, share in (("fp32", 1e-4), ("fp16", 2e-2), ("bf16", 0.12)):
        a, b, c = product(runner, fmt, 3, 256, 256, 256)
        c[17, 33] += share * float(numpy.abs(c).max())
        assert check(runner, a, b, c, fmt)["wrong"] >= 1, fmt


def test_one_wrong_tile_and_a_nan_anywhere_are_caught(runner: ModuleType) -> None:
    a, b, c = product(runner, "bf16", 11, 512, 512, 512)
    tile = c.copy()
    tile[200:232, 300:332] *= 1.05  # every element of one tile 5 % off: within bf16's sampled tolerance
    found = check(runner, a, b, tile, "bf16")
    assert found["wrong"] > 0 and 200 <= found["first_wrong"][0] < 232 and 300 <= found["first_wrong"][1] < 332
    for i, j in ((0, 0), (511, 511), (257, 3)):
        bad = c.copy()
        bad[i, j] = numpy.nan
        found = check(runner, a, b, bad, "bf16")
        assert found["nonfinite"] == 1 and found["wrong"] > 0 and found["first_wrong"] == [i, j]
    bad = c.copy()
    bad[5, 6] = numpy.inf
    assert check(runner, a, b, bad, "bf16")["nonfinite"] == 1


def test_a_wrong_gemm_fails_the_backend_check(runner: ModuleType) -> None:
    backend = runner.NumpyBackend(numpy)
    backend.make_gemm(0, "gemm_fp32", 256)()
    holder = backend.last_gemm[2]
    i, j = unsampled(runner, 256)
    holder["c"][i, j] += 1.0
    assert backend.check_gemm(0, "gemm_fp32")["wrong"] == 0
    assert backend.checksum_gemm(0, "gemm_fp32")["first_wrong"] == [i, j]


def test_stress_catches_one_element_wrong_the_same_way_in_every_product(runner: ModuleType) -> None:
    """Bit-for-bit repeats never see it; the first product's checksum does."""
    capture = Capture()
    backend = runner.NumpyBackend(numpy)
    real = backend.make_stress
    where = unsampled(runner, 256)

    def repeating_fault(dev: int, n: int) -> Any:
        state = real(dev, n)
        state.ref[where] += 2.0  # the first product, and every later one, wrong in one element

        def step() -> None:
            state.c[:] = state.ref

        state.step = step
        return state

    backend.make_stress = repeating_fault
    harness = runner.Harness(backend, runner.Emitter(capture), "quick", time.monotonic() + 30, [])
    harness.sizes = dict(harness.sizes, stress_n=256)
    harness.stress([0], 0.2, 0.2)
    (line,) = results_of(capture)
    details = line["details"]
    assert details["reference_answers"]["wrong"] == 0  # sampled: not seen
    assert details["reference_checksum"]["first_wrong"] == list(where)
    assert details["reference_wrong"] is True and line["value"] > 0
    clean = runner.Harness(runner.NumpyBackend(numpy), runner.Emitter(Capture()), "quick", time.monotonic() + 30, [])
    clean.sizes = dict(clean.sizes, stress_n=256)
    clean.out = runner.Emitter(capture := Capture())
    clean.stress([0], 0.2, 0.2)
    (line,) = results_of(capture)
    assert line["value"] == 0 and line["details"]["reference_checksum"]["wrong"] == 0


def test_a_checksum_that_cannot_be_computed_is_never_a_pass(runner: ModuleType) -> None:
    from gpuws.core.bench.verdicts import Verdict, score_run

    backend = runner.NumpyBackend(numpy)
    a = numpy.ones((4, 3), dtype=numpy.float32)
    assert "error" in backend.checksum(0, a, a, a, "fp32")  # shapes that do not multiply
    result = {"type": "result", "check": "gemm_bf16", "gpu": 0, "value": 900.0, "status": "ok", "harness": "gpu",
              "details": {"sustained_p10": 900.0, "answers": {"checked": 4, "wrong": 0, "nonfinite": 0},
                          "checksum": {"error": "OutOfMemoryError: float64 copies"}}}
    (outcome,) = score_run({"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "mig_mode": "Disabled"}]},
                           [result])
    assert outcome.verdict is Verdict.INCONCLUSIVE and "not every element" in outcome.reason


def test_the_cuda_c_backend_checks_every_element_the_same_way(runner: ModuleType) -> None:
    """nvcc+cuBLAS: the same bands, lambda and unit roundoff, for the timed GEMMs and the first stress
    product (compiled by test_bench_kernels_cu_compiles; it has not run here: no GPU)."""
    from pathlib import Path

    source = (Path(runner.__file__).parent / "bench_kernels.cu").read_text()
    assert "checksum_json<float>(h, a, b, c, n, fmt)" in source and "checksum_json<T>(h, a, b, ref, n, dtype)" in source
    assert f"CHECKSUM_BAND = {runner.CHECKSUM_BAND};" in source
    assert f"CHECKSUM_LAMBDA = {runner.CHECKSUM_LAMBDA};" in source
    assert runner.CHECKSUM_ROUNDOFF["tf32"][0] == 2.0**-8 and 'if (fmt == "tf32") u_in = std::ldexp(1.0, -8);' in source
    assert runner.CHECKSUM_ROUNDOFF["fp16"][2] == 2.0**-11
    assert 'if (fmt == "fp16") u_out = std::ldexp(1.0, -11);' in source
    assert runner.CHECKSUM_ROUNDOFF["bf16"][2] == 2.0**-8
    assert 'if (fmt == "bf16") u_out = std::ldexp(1.0, -8);' in source


def test_the_torch_backend_checks_every_element(runner: ModuleType) -> None:
    """PyTorch's CPU build (skipped where PyTorch is not installed; run here with torch 2.13.0+cpu
    from a separate --target directory, not the shared venv): the same checksum through TorchOps,
    FP8 inputs included."""
    torch = pytest.importorskip("torch")
    backend = runner.TorchBackend(torch, cuda=False)
    for check in ("gemm_fp32", "gemm_fp16", "gemm_bf16"):
        backend.make_gemm(0, check, 256)()
        assert backend.checksum_gemm(0, check)["wrong"] == 0, check
        backend.last_gemm[2]["c"][200, 100] += 50.0
        assert backend.checksum_gemm(0, check)["first_wrong"] == [200, 100], check
    a = torch.randn(256, 256).to(torch.float8_e4m3fn)
    b = torch.randn(256, 256).to(torch.float8_e4m3fn)
    c = (a.to(torch.float32) @ b.to(torch.float32)).to(torch.bfloat16)
    assert runner.checksum_check(runner.TorchOps(torch), a, b, c, "fp8")["wrong"] == 0
    c[7, 9] = float("nan")
    assert runner.checksum_check(runner.TorchOps(torch), a, b, c, "fp8")["first_wrong"] == [7, 9]
    state = backend.make_stress(0, 128)
    assert state.checksum_reference()["wrong"] == 0
