"""Issue 12's "Found" list, each against the runner's CPU (NumPy) and simulated backends."""

from __future__ import annotations

import json
import math
import os
import stat
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy
import pytest

from tests.agent.test_bench_runner import RUNNER, load_runner


@pytest.fixture(scope="module")
def runner() -> ModuleType:
    return load_runner()


class Capture:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        pass


def results_of(capture: Capture) -> list[dict[str, Any]]:
    return [json.loads(line) for line in "".join(capture.lines).splitlines()]


def test_nan_results_are_mismatches(runner: ModuleType) -> None:
    """5 NaN in a product are 5 mismatches (a NaN never compares greater than a tolerance)."""
    state = runner.NumpyStress(runner.NumpyBackend(numpy), 32)
    state.step()
    assert state.mismatches() == 0
    good_b = state.b.copy()
    state.b[:, :5] = numpy.nan  # five columns of every row become NaN
    state.step()
    assert state.mismatches() >= 5 * 32
    state.b[:] = good_b


def test_nan_in_the_reference_is_caught_and_json_stays_valid(runner: ModuleType) -> None:
    backend = runner.NumpyBackend(numpy)
    state = runner.NumpyStress(backend, 16)
    state.ref[0, 0] = numpy.nan  # the first product itself is wrong
    answers = state.verify_reference()
    assert answers["nonfinite"] >= 1 and answers["wrong"] >= 1 and math.isinf(answers["max_rel_error"])
    state.step()
    assert state.mismatches() >= 1
    capture = Capture()
    out = runner.Emitter(capture)
    out.result("stress", gpu=0, value=1, unit="mismatches", details={"reference_rel_error": float("nan"),
                                                                      "tol": float("inf")})
    (line,) = results_of(capture)
    assert line["details"]["reference_rel_error"] == "nan (not a finite number)"
    assert line["details"]["tol"] == "inf (not a finite number)"


def test_one_ulp_difference_is_a_mismatch(runner: ModuleType) -> None:
    """Bit for bit against the first product: no tolerance that hides a flipped low bit."""
    state = runner.NumpyStress(runner.NumpyBackend(numpy), 16)
    state.ref[3, 3] = numpy.nextafter(state.ref[3, 3], numpy.float32(numpy.inf))
    state.step()
    assert state.mismatches() == 1


def _harness(runner: ModuleType, seconds_left: float, capture: Capture) -> Any:
    return runner.Harness(runner.NumpyBackend(numpy), runner.Emitter(capture), "quick",
                          time.monotonic() + seconds_left, [])


def test_stress_cut_short_is_inconclusive(runner: ModuleType) -> None:
    capture = Capture()
    harness = _harness(runner, 30, capture)
    harness.stress([0], 0.05, 10.0)  # ran well under the ten seconds it asked for
    (line,) = results_of(capture)
    assert line["status"] == "inconclusive" and "cut short" in line["reason"]


def test_stress_without_telemetry_on_a_gpu_is_inconclusive(runner: ModuleType) -> None:
    class GpuNumpy(runner.NumpyBackend):  # type: ignore[name-defined,misc]
        harness = "gpu"

    capture = Capture()
    harness = runner.Harness(GpuNumpy(numpy), runner.Emitter(capture), "quick", time.monotonic() + 30, [],
                             runner.Sampler())  # a sampler that saw nothing (no nvidia-smi here)
    harness.sizes = dict(harness.sizes, stress_n=32)
    harness.stress([0], 0.3, 0.3)
    (line,) = results_of(capture)
    assert line["status"] == "inconclusive" and "no telemetry" in line["reason"]


def test_stress_runs_on_every_gpu_at_once(runner: ModuleType) -> None:
    """One loop over all devices, the same seconds for each, not one GPU after another."""
    capture = Capture()
    harness = _harness(runner, 30, capture)
    harness.b.device_ids = lambda: [0, 1]
    harness.stress([0, 1], 0.3, 0.3)
    lines = results_of(capture)
    assert [r["gpu"] for r in lines] == [0, 1]
    assert all(r["details"]["concurrent_gpus"] == 2 for r in lines)
    assert lines[0]["details"]["seconds"] == lines[1]["details"]["seconds"]
    assert all(r["status"] == "ok" and r["value"] == 0 for r in lines)


def test_a_corrupted_copy_is_reported(runner: ModuleType) -> None:
    class FlippingNumpy(runner.NumpyBackend):  # type: ignore[name-defined,misc]
        def make_copy(self, dev: int, nbytes: int) -> Any:
            fn, verify = super().make_copy(dev, nbytes)

            def flipped() -> None:
                fn()
                verify.__closure__  # noqa: B018 - the same buffers
            return flipped, (lambda: (nbytes, verify()[1] + 1))

    capture = Capture()
    harness = runner.Harness(FlippingNumpy(numpy), runner.Emitter(capture), "quick", time.monotonic() + 30, [])
    harness.memory(0)
    copy = next(r for r in results_of(capture) if r["check"] == "mem_copy")
    assert copy["details"]["verify"]["bad_bytes"] == 1
    triad = next(r for r in results_of(capture) if r["check"] == "mem_triad")
    assert triad["details"]["verify"]["bad_bytes"] == 0


def test_copies_are_verified_byte_for_byte(runner: ModuleType) -> None:
    backend = runner.NumpyBackend(numpy)
    fn, verify = backend.make_copy(0, 4096)
    assert verify() == (4096, 4096 - 1 - 4096 // 251) or verify()[1] > 0  # nothing copied yet
    fn()
    assert verify() == (4096, 0)


def test_gemm_reports_median_sustained_and_peak_windows(runner: ModuleType) -> None:
    capture = Capture()
    harness = _harness(runner, 30, capture)
    harness.gemm(0)
    fp32 = next(r for r in results_of(capture) if r["check"] == "gemm_fp32")
    d = fp32["details"]
    assert d["windows"] == harness.sizes["windows"] and d["calls_per_window"] >= 1
    assert d["sustained_p10"] <= fp32["value"] <= d["peak"]


def test_fp8_asks_for_fast_accumulation(runner: ModuleType) -> None:
    """The datasheet's dense FP8 figure is with fast accumulation."""
    calls: list[dict[str, Any]] = []

    class Tensor:
        def to(self, *_: Any) -> Tensor:
            return self

        def t(self) -> Tensor:
            return self

        def contiguous(self) -> Tensor:
            return self

    torch = SimpleNamespace(bfloat16="bf16", float8_e4m3fn="fp8", float32="fp32",
                            randn=lambda *a, **k: Tensor(), ones=lambda *a, **k: Tensor(),
                            device=lambda name: name, _scaled_mm=lambda *a, **k: calls.append(k))
    backend = runner.TorchBackend(torch, cuda=False)
    backend.make_gemm(0, "gemm_fp8", 16)()
    assert calls and calls[0]["use_fast_accum"] is True


def _fake_binary(tmp_path: Path, script: str) -> str:
    path = tmp_path / "gpuws_bench_kernels"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_nvcc_binary_errors_come_from_stderr(runner: ModuleType, tmp_path: Path) -> None:
    binary = _fake_binary(tmp_path, 'echo "cudaSetDevice(device): CUDA driver version is insufficient" >&2\n'
                                    'echo \'{"error": "x"}\'\nexit 1\n')
    backend = runner.NvccBackend(binary, [{"index": 0}])
    with pytest.raises(runner.CheckError, match="driver version is insufficient"):
        backend.measured("gemm_fp32", 0, 64, 2)
    source = (RUNNER / "bench_kernels.cu").read_text()
    fail_body = source[source.index("static void fail"):source.index("#define CUDA_OK")]
    assert "stderr" in fail_body, "the .cu reports its errors on stderr"


def test_nvcc_build_keeps_the_error_lines_and_fits_the_budget(runner: ModuleType, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _fake_binary(bindir, 'echo "x.cu(12): error: identifier \\"foo\\" is undefined" >&2\n'
                         'echo "1 error detected in the compilation of x.cu." >&2\nexit 2\n')
    os.rename(bindir / "gpuws_bench_kernels", bindir / "nvcc")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    source = tmp_path / "x.cu"
    source.write_text("int main() {}\n")
    with pytest.raises(runner.CheckError, match='identifier "foo" is undefined'):
        runner.NvccBackend.build(str(tmp_path), [], runner.Emitter(Capture()), timeout=10, source=str(source))
    assert runner.build_timeout(90.0) <= 70.0  # never 240 s inside a 90 s run
    assert runner.build_timeout(10.0) == 0.0


def test_kernel_launches_are_checked() -> None:
    """Every <<<...>>> launch in the .cu is followed by a check (a failed kernel is not 0 mismatches)."""
    lines = (RUNNER / "bench_kernels.cu").read_text().splitlines()
    launches = [i for i, line in enumerate(lines) if ">>>(" in line and "__global__" not in line]
    assert launches
    for i in launches:
        following = "\n".join(lines[i + 1:i + 3])
        assert "KERNEL_OK" in following, lines[i]


def test_busy_gpu_is_not_measured_without_allow_busy(runner: ModuleType) -> None:
    assert runner.busy_reason({"processes": 2, "utilization_pct": 91}) == "GPU in use by 2 processes (91% utilisation)"


def test_topology_matrix_is_parsed(runner: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    text = ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-55\nGPU1\tNV18\t X \t0-55\n\nLegend:\n  X = Self\n")
    monkeypatch.setattr(runner.host, "run_cmd", lambda argv, timeout=20.0: (0, text))
    assert runner.topology_links() == {"0-1": "NV18", "1-0": "NV18"}


class TwoCpuDevices:
    """A NumPy backend that plays two devices and peer copies between them, recording which
    device timed each copy."""

    @staticmethod
    def make(runner: ModuleType) -> Any:
        class Two(runner.NumpyBackend):  # type: ignore[name-defined,misc]
            timed_on: list[int] = []

            def device_ids(self) -> list[int]:
                return [0, 1]

            def make_p2p(self, src: int, dst: int, nbytes: int) -> Any:
                fn, verify = self.make_copy(src, nbytes)
                return fn, verify, False

            def timer_start(self, dev: int) -> Any:
                self.timed_on.append(dev)
                return super().timer_start(dev)

        return Two(numpy)


def test_p2p_is_timed_on_the_source_device_and_verified(runner: ModuleType) -> None:
    capture = Capture()
    backend = TwoCpuDevices.make(runner)
    harness = runner.Harness(backend, runner.Emitter(capture), "quick", time.monotonic() + 30, [])
    harness.p2p([0, 1])
    lines = results_of(capture)
    assert [(r["gpu"], r["peer"]) for r in lines] == [(0, 1), (1, 0)]
    assert all(r["details"]["verify"] == {"checked_bytes": harness.sizes["p2p_bytes"], "bad_bytes": 0}
               for r in lines)
    assert set(backend.timed_on) == {0, 1} and backend.timed_on[0] == 0


def test_scaling_is_the_median_of_repeated_pairs(runner: ModuleType) -> None:
    capture = Capture()
    harness = runner.Harness(TwoCpuDevices.make(runner), runner.Emitter(capture), "quick", time.monotonic() + 30,
                             [])
    harness.scaling([0, 1])
    (line,) = results_of(capture)
    assert line["details"]["pairs"] == 3 and line["value"] > 0


def test_busy_gpus_are_found_before_measuring(runner: ModuleType, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Compute processes and utilisation per GPU, read from nvidia-smi (the simulated one here)."""
    from tests.support.sshd import install_sim_nvidia_smi

    install_sim_nvidia_smi(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("GPUWS_SIM_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("GPUWS_SIM_JOBS_PAUSED", "1")
    monkeypatch.setenv("GPUWS_SIM_FAULTS", "busy:2")
    gpus, why = runner.list_gpus()
    assert why is None and len(gpus) == 4
    activity = runner.gpu_activity(gpus)
    assert [i for i, a in activity.items() if a["busy"]] == [2]
    assert activity[2]["processes"] == 1 and activity[2]["utilization_pct"] >= 90
    assert runner.busy_reason(activity[2]).startswith("GPU in use by 1 processes")


def test_nan_on_one_gpu_fails_it_and_the_others_are_still_stressed(runner: ModuleType) -> None:
    """A NaN reference once broke the JSON line and stopped the stress of later GPUs."""
    backend = TwoCpuDevices.make(runner)
    real = backend.make_stress

    def make_stress(dev: int, n: int) -> Any:
        if dev == 0:
            backend.rng.standard_normal((1,))  # keep the generator moving as for any device
            state = real(dev, n)
            state.a[0, 0] = numpy.nan  # row 0 of every product is NaN from the first one on
            state.ref = state.a @ state.b
            state.bad = int(numpy.count_nonzero(~numpy.isfinite(state.ref)))
            return state
        return real(dev, n)

    backend.make_stress = make_stress
    capture = Capture()
    harness = runner.Harness(backend, runner.Emitter(capture), "quick", time.monotonic() + 30, [])
    harness.sizes = dict(harness.sizes, stress_n=16)
    harness.stress([0, 1], 0.2, 0.2)
    lines = results_of(capture)  # every line is valid JSON
    assert [r["gpu"] for r in lines] == [0, 1]
    assert lines[0]["status"] == "ok" and lines[0]["value"] >= 16 and lines[0]["details"]["reference_wrong"]
    assert lines[0]["details"]["reference_rel_error"] == "inf (not a finite number)"
    assert lines[1]["status"] == "ok" and lines[1]["value"] == 0


CUBLAS_STUB = """#pragma once
#include <cuda_runtime.h>
#include <library_types.h>
typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2 } cublasMath_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 } cublasComputeType_t;
cublasStatus_t cublasCreate(cublasHandle_t*);
cublasStatus_t cublasDestroy(cublasHandle_t);
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t);
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
cublasStatus_t cublasDgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const double*,
                           const double*, int, const double*, int, const double*, double*, int);
"""


@pytest.mark.skipif(not __import__("shutil").which("nvcc"), reason="nvcc is not installed on this machine")
def test_bench_kernels_cu_compiles(tmp_path: Path) -> None:
    """The CUDA C source compiles with nvcc (against a declaration-only cuBLAS header where the
    toolkit has no cuBLAS); it is not run: no GPU here."""
    import subprocess

    probe = subprocess.run(["nvcc", "-E", "-x", "cu", "-", "-o", "/dev/null"], input="#include <cublas_v2.h>\n",
                           capture_output=True, text=True, check=False)
    include = []
    if probe.returncode != 0:
        (tmp_path / "cublas_v2.h").write_text(CUBLAS_STUB)
        include = ["-I", str(tmp_path)]
    proc = subprocess.run(["nvcc", "-O1", "-std=c++17", "-arch=sm_90", *include, "-c", "-o",
                           str(tmp_path / "k.o"), str(RUNNER / "bench_kernels.cu")],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
