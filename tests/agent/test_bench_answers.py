"""Issue 25: the benchmark checks its answers (GEMM and stress against float64 over every output
tile) and matches devices by UUID, on the runner's CPU (NumPy) backend and the real H200 capture."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy
import pytest

from tests.agent.test_bench_no_false_pass import Capture, results_of
from tests.agent.test_bench_runner import load_runner

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "h200"


@pytest.fixture(scope="module")
def runner() -> ModuleType:
    return load_runner()


def test_samples_hit_every_output_tile(runner: ModuleType) -> None:
    picks = runner.gemm_samples(8192)
    assert {p // 128 for p in picks} == set(range(64)) and len(picks) == 128
    assert len({p % 128 for p in picks}) > 20  # not the same offset in every tile


def test_a_wrong_tile_past_row_3_fails_the_gemm_at_full_speed(runner: ModuleType) -> None:
    """The old check timed only; the known-answer rows 0-3 of the stress never saw row 130."""
    backend = runner.NumpyBackend(numpy)
    gemm = backend.make_gemm(0, "gemm_fp32", 256)
    gemm()
    assert backend.check_gemm(0, "gemm_fp32")["wrong"] == 0
    _a, _b, holder = backend.last_gemm
    holder["c"][128:256, 128:256] *= 1.01  # one tile off by 1 %
    answers = backend.check_gemm(0, "gemm_fp32")
    assert answers["wrong"] > 0 and answers["first_wrong"][0] >= 128


def test_a_nan_anywhere_sampled_fails(runner: ModuleType) -> None:
    backend = runner.NumpyBackend(numpy)
    backend.make_gemm(0, "gemm_fp32", 256)()
    c = backend.last_gemm[2]["c"]
    rows, cols = runner.gemm_samples(256), runner.gemm_samples(256)
    c[rows[-1], cols[-1]] = numpy.nan
    answers = backend.check_gemm(0, "gemm_fp32")
    assert answers["nonfinite"] == 1 and answers["wrong"] == 1


def test_stress_catches_a_unit_wrong_the_same_way_every_time(runner: ModuleType) -> None:
    """Each iteration equals the first, so only the known answer over the whole output finds it."""
    capture = Capture()
    backend = runner.NumpyBackend(numpy)
    real = backend.make_stress

    def constant_fault(dev: int, n: int) -> Any:
        state = real(dev, n)
        state.b[:, 200:] *= 1.05  # every product is wrong in the same columns, identically
        state.ref = state.a @ state.b
        state.b[:, 200:] /= 1.05

        def step() -> None:  # the unit repeats the same wrong product
            state.c[:] = state.ref

        state.step = step
        return state

    backend.make_stress = constant_fault
    harness = runner.Harness(backend, runner.Emitter(capture), "quick", time.monotonic() + 30, [])
    harness.sizes = dict(harness.sizes, stress_n=256)
    harness.stress([0], 0.2, 0.2)
    (line,) = results_of(capture)
    assert line["details"]["reference_wrong"] is True and line["value"] > 0


def test_every_backend_sends_answers_and_the_tolerances_are_per_format(runner: ModuleType) -> None:
    assert set(runner.GEMM_TOLERANCE) == set(runner.GEMM_CHECKS)
    assert runner.GEMM_TOLERANCE["gemm_fp32"] < runner.GEMM_TOLERANCE["gemm_fp16"] < runner.GEMM_TOLERANCE["gemm_fp8"]
    source = (Path(runner.__file__).parent / "bench_kernels.cu").read_text()
    assert "answers_json<T>(a, b, ref" in source and "answers_json<float>(a, b, c" in source  # nvcc too
    assert "CUBLAS_PEDANTIC_MATH" in source.split("static void gemm(")[1].split("auto op")[0]


@pytest.mark.parametrize("name", ["bench-torch-answers.jsonl", "bench-nvcc-answers.jsonl"])
def test_real_h200_answers_are_within_tolerance(runner: ModuleType, name: str) -> None:
    """Recorded by gpuws's device check on one H200 (driver 580.159.04): healthy answers pass."""
    results = [json.loads(line) for line in (H200 / name).read_text().splitlines() if line.startswith("{")]
    gemms = [r for r in results if r.get("type") == "result" and r["check"] in runner.GEMM_CHECKS
             and r.get("status") == "ok"]
    assert len(gemms) >= 4
    for r in gemms:
        answers = r["details"]["answers"]
        assert answers["checked"] == 16384 and answers["nonfinite"] == 0
        assert answers["max_rel_error"] <= runner.GEMM_TOLERANCE[r["check"]], r["check"]


class Identified:
    """A CPU backend that says which GPU each CUDA ordinal is (as CUDA numbers them)."""

    @staticmethod
    def make(runner: ModuleType, identities: dict[int, tuple[str | None, str | None]]) -> Any:
        class Backend(runner.NumpyBackend):  # type: ignore[name-defined,misc]
            harness = "gpu"

            def device_ids(self) -> list[int]:
                return sorted(identities)

            def device_identity(self, dev: int) -> tuple[str | None, str | None]:
                return identities[dev]

        return Backend(numpy)


GPUS = [{"index": 0, "uuid": "GPU-aaaa0000-0000-0000-0000-000000000000", "pci_bus_id": "00000000:18:00.0"},
        {"index": 1, "uuid": "GPU-bbbb0000-0000-0000-0000-000000000000", "pci_bus_id": "00000000:3B:00.0"}]


def test_devices_are_matched_by_uuid_not_ordinal(runner: ModuleType) -> None:
    # CUDA ordinal 0 is nvidia-smi's GPU 1 (CUDA_DEVICE_ORDER=FASTEST_FIRST, say).
    backend = Identified.make(runner, {0: ("bbbb0000-0000-0000-0000-000000000000", None),
                                       1: (None, "0000:18:00.0")})
    mapping, missing = runner.match_devices(backend, GPUS, runner.Emitter(Capture()))
    assert mapping == {0: 1, 1: 0} and missing == []


def test_a_gpu_cuda_cannot_see_is_inconclusive_with_the_reason(runner: ModuleType) -> None:
    backend = Identified.make(runner, {0: ("bbbb0000-0000-0000-0000-000000000000", None)})
    mapping, missing = runner.match_devices(backend, GPUS, runner.Emitter(Capture()))
    assert mapping == {0: 1} and [g["index"] for g in missing] == [0]
    capture = Capture()
    harness = runner.Harness(backend, runner.Emitter(capture), "quick", time.monotonic() + 30, GPUS, None, {},
                             mapping)
    harness.sizes = dict(harness.sizes, gemm_n=64, windows=2, window_s=0.0)
    harness.gemm(0)
    assert {r["gpu"] for r in results_of(capture)} == {1}  # CUDA's 0 reported as nvidia-smi's 1


def test_warm_up_is_at_least_200_ms_and_windows_at_least_10_ms(runner: ModuleType) -> None:
    """Issue 25 (method): copies had 2-3 warm-up calls and one call per timed window."""
    calls: list[float] = []

    def op() -> None:
        calls.append(time.perf_counter())
        time.sleep(0.002)

    harness = runner.Harness(runner.NumpyBackend(numpy), runner.Emitter(Capture()), "quick",
                             time.monotonic() + 30, [])
    times = harness.time_op(0, op, 2, 3)
    assert calls[-1] - calls[0] >= runner.MIN_WARMUP_S  # warm-up calls (and the windows) span >= 200 ms
    assert len(calls) >= 1 + 3 * 5  # each window holds >= 10 ms of 2 ms calls
    assert len(times) == 3


def test_time_op_gives_seconds_per_call_not_per_window(runner: ModuleType) -> None:
    """Per call, read on the backend's own timer (here one that each call moves by exactly 2 ms):
    no wall-clock bound, so a loaded machine cannot fail it."""

    class TwoMsPerCall(runner.NumpyBackend):  # type: ignore[name-defined,misc]
        now = 0.0

        def timer_start(self, dev: int) -> list[float | None]:
            return [self.now, None]

        def timer_end(self, dev: int, token: list[float | None]) -> None:
            token[1] = self.now

    backend = TwoMsPerCall(numpy)

    def op() -> None:
        backend.now += 0.002

    harness = runner.Harness(backend, runner.Emitter(Capture()), "quick", time.monotonic() + 30, [])
    times, per = harness.time_windows(0, op, 2, 3, 0.0)
    assert per == math.ceil(runner.MIN_WINDOW_S / 0.002)  # a window of at least MIN_WINDOW_S of calls
    assert times == pytest.approx([per * 0.002] * 3)
    assert harness.time_op(0, op, 2, 3) == pytest.approx([0.002] * 3)  # the window divided by its calls


def test_the_copy_pattern_takes_no_temporaries_of_four_times_its_size(runner: ModuleType) -> None:
    pattern = runner.NumpyBackend(numpy)._pattern(1000)
    assert pattern.dtype == numpy.uint8 and len(pattern) == 1000
    assert (pattern == numpy.arange(1000) % 251).all()
    source = Path(runner.__file__).read_text()
    assert "% 251).to(" not in source and "% 251).astype(" not in source  # no int32/int64 arange per byte


def test_nvcc_is_found_under_usr_local_cuda_and_builds_for_the_cards(runner: ModuleType, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    found = runner.find_nvcc()
    if found is not None:
        assert found.startswith("/usr/local/cuda") and found.endswith("/bin/nvcc")
    argv_seen: list[list[str]] = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    def fake_run(argv: list[str], **_: Any) -> Done:
        argv_seen.append(list(argv))
        return Done()

    monkeypatch.setattr(runner.backends, "find_nvcc", lambda: "/usr/local/cuda-12.4/bin/nvcc")
    monkeypatch.setattr(runner.backends.subprocess, "run", fake_run)
    source = tmp_path / "k.cu"
    source.write_text("int main() { return 0; }\n")
    gpus = [{"index": 0, "compute_capability": "9.0"}, {"index": 1, "compute_capability": "8.0"}]
    runner.NvccBackend.build(str(tmp_path), gpus, runner.Emitter(Capture()), source=str(source))
    build = argv_seen[0]
    assert build[0] == "/usr/local/cuda-12.4/bin/nvcc"
    assert "-gencode=arch=compute_90,code=[sm_90,compute_90]" in build
    assert "-gencode=arch=compute_80,code=[sm_80,compute_80]" in build
