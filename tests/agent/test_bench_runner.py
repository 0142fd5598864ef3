"""The on-host benchmark runner run as gpuws runs it on a host: the package `gpuws.agent.bench` as
one zipapp, by a python3 that has only what it has (issue 32: the runner became a package)."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.bare_python import make_bare_python

RUNNER = Path(__file__).resolve().parents[2] / "gpuws" / "agent" / "bench"  # the package (and its .cu)
NO_TOOLCHAIN = (
    "no CUDA toolchain: install PyTorch with CUDA (pip install torch) or CuPy, or the CUDA toolkit (nvcc)"
)

@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A python3 without NumPy, PyTorch or CuPy (the venv's has NumPy)."""
    return make_bare_python(tmp_path_factory.mktemp("bare-venv"))


def runner_zip(tmp_path: Path) -> Path:
    """The zipapp gpuws sends to hosts, written where a host's wrapper writes it."""
    from gpuws.remote.bench import runner_zip as build

    path = tmp_path / "gpuws_bench.pyz"
    path.write_bytes(build())
    return path


def run_runner(python: str, *args: str, tmp_path: Path, timeout: float = 60) -> list[dict[str, Any]]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}  # no nvidia-smi here
    proc = subprocess.run([python, str(runner_zip(tmp_path)), "--json", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[-1]["type"] == "summary", "the summary always comes last"
    return events


def load_runner() -> ModuleType:
    """The runner package (its __init__ names every module's public names)."""
    return importlib.import_module("gpuws.agent.bench")


def test_runner_is_standalone() -> None:
    """Only the standard library and the package's own modules (relative imports: the package is
    `gpuws_bench` in the zip) at the top; optional toolchains are imported inside guards."""
    modules = sorted(RUNNER.glob("*.py"))
    assert {m.stem for m in modules} >= {"__init__", "__main__", "output", "host", "timing", "verify", "backends",
                                         "checks", "sim", "runner"}
    for module in modules:
        tree = ast.parse(module.read_text())
        top = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
        top |= {node.module.split(".")[0] for node in tree.body
                if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        assert top <= set(sys.stdlib_module_names) | {"__future__"}, module.name
        everywhere = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        everywhere |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                       and not node.level}
        assert not {m for m in everywhere if m.split(".")[0] == "gpuws"}, f"no gpuws import in {module.name}"
        assert {m.split(".")[0] for m in everywhere} - set(sys.stdlib_module_names) <= {
            "torch", "cupy", "numpy", "pynvml", "__future__"}, module.name
        assert module.read_text().isascii(), module.name


def test_the_zipapp_holds_the_package_and_its_cuda_source(tmp_path: Path) -> None:
    """One file to send and run; nothing installed on the host."""
    import zipfile

    names = set(zipfile.ZipFile(runner_zip(tmp_path)).namelist())
    expected = {f"gpuws_bench/{p.name}" for p in RUNNER.iterdir() if p.suffix in (".py", ".cu")}
    assert names == {"__main__.py", *expected} and "gpuws_bench/bench_kernels.cu" in names


def test_cpu_harness_runs_timing_and_correctness_on_numpy(tmp_path: Path) -> None:
    events = run_runner(sys.executable, "--quick", tmp_path=tmp_path)
    results = [e for e in events if e["type"] == "result"]
    summary = events[-1]
    assert (summary["backend"], summary["harness"], summary["simulated"]) == ("numpy-cpu", "cpu", False)
    toolchain = next(r for r in results if r["check"] == "toolchain")
    assert (toolchain["status"], toolchain["reason"]) == ("inconclusive", NO_TOOLCHAIN)
    cpu = {r["check"]: r for r in results if r["harness"] == "cpu"}
    assert all(r["label"] == "CPU harness check \u2014 not a GPU measurement" for r in cpu.values())
    gemm = cpu["gemm_fp32"]
    assert gemm["status"] == "ok" and gemm["value"] > 0
    assert gemm["details"]["repeats"] == 5 and gemm["details"]["min_s"] <= gemm["details"]["median_s"]
    assert gemm["details"]["sustained_p10"] <= gemm["value"] <= gemm["details"]["peak"]
    assert cpu["mem_copy"]["value"] > 0 and cpu["mem_triad"]["value"] > 0
    stress = cpu["stress"]
    assert stress["value"] == 0 and stress["details"]["iterations"] > 0
    assert stress["details"]["reference_rel_error"] < 1e-4
    # GPU parts are never a pass on a CPU-only host.
    gpu_parts = [r for r in results if r["harness"] == "gpu" and r["check"] not in ("env.driver", "toolchain")]
    assert gpu_parts and all(r["status"] == "inconclusive" for r in gpu_parts)
    assert [e["step"] for e in events if e["type"] == "progress"] == list(range(1, 9))


def test_no_toolchain_and_no_numpy_is_inconclusive_with_what_to_install(tmp_path: Path, bare_python: str) -> None:
    probe = subprocess.run([bare_python, "-c", "import numpy"], capture_output=True, check=False)
    assert probe.returncode != 0, f"{bare_python} must lack NumPy for this test"
    events = run_runner(bare_python, "--quick", tmp_path=tmp_path)
    results = [e for e in events if e["type"] == "result"]
    toolchain = next(r for r in results if r["check"] == "toolchain")
    assert toolchain["reason"] == NO_TOOLCHAIN
    assert all(r["status"] != "ok" or r["check"].startswith("env.") for r in results)
    assert not [r for r in results if r["harness"] == "cpu"]
    assert events[-1]["backend"] is None


def test_overall_timeout_stops_the_run_and_says_so(tmp_path: Path) -> None:
    events = run_runner(sys.executable, "--full", "--timeout", "0.3", tmp_path=tmp_path)
    summary = events[-1]
    assert summary["timed_out"] is True
    results = [e for e in events if e["type"] == "result"]
    assert any(r["check"] == "timeout" and r["status"] == "inconclusive" for r in results) or any(
        r["status"] == "inconclusive" and "zero iterations" in (r["reason"] or "") for r in results)


def test_correctness_check_counts_mismatches() -> None:
    """A GEMM that starts giving different answers is caught, as gpu-burn does."""
    runner = load_runner()
    import numpy

    state = runner.NumpyStress(runner.NumpyBackend(numpy), 64)
    answers = state.verify_reference()
    assert answers["wrong"] == 0 and answers["max_rel_error"] < 1e-4  # the reference agrees with float64
    state.step()
    assert state.mismatches() == 0
    state.b[3, 5] += 10.0  # a flipped value in device memory: column 5 of every row changes
    state.step()
    # Every row whose a[i, 3] is not tiny now differs from the reference.
    assert 48 <= state.mismatches() <= 64


def test_zero_iterations_is_inconclusive_not_a_figure() -> None:
    runner = load_runner()
    import numpy

    harness = runner.Harness(runner.NumpyBackend(numpy), runner.Emitter(), "quick", time.monotonic() + 5, [])
    assert harness.figure([], 1e9, 1e9)["status"] == "inconclusive"
    assert harness.figure([0.5, 0.25, 1.0], 1e9, 1e9)["value"] == 2.0


def test_malformed_expected_profile_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(runner_zip(tmp_path)), "--json", "--expected", "{nope"],
                          capture_output=True,
                          text=True, check=False, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert json.loads(proc.stdout.splitlines()[-1])["error"] == "--expected is not valid JSON"


@pytest.mark.parametrize("mask", [0x1, 0x44, 0x1000])
def test_throttle_reasons_are_decoded(mask: int) -> None:
    runner = load_runner()
    names = runner.decode_throttle(mask)
    assert {0x1: ["gpu_idle"], 0x44: ["sw_power_cap", "hw_thermal_slowdown"],
            0x1000: ["unknown_0x1000"]}[mask] == names


def test_the_nvcc_backend_takes_its_cuda_source_out_of_the_zip(tmp_path: Path) -> None:
    """The CUDA C source travels inside the zip; the nvcc backend writes it into its work directory
    and compiles that (here a stand-in nvcc that records what it was given)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    nvcc = bindir / "nvcc"
    nvcc.write_text('#!/bin/sh\nfor a in "$@"; do case "$a" in *.cu) cp "$a" "$(dirname "$0")/seen.cu";; esac; done\n'
                    'echo "error: stand-in nvcc" >&2; exit 1\n')
    nvcc.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from gpuws_bench.backends import NvccBackend; "
            "from gpuws_bench.output import Emitter, CheckError\n"
            "try:\n    NvccBackend.build(sys.argv[2], [{'index': 0, 'compute_capability': '9.0'}], Emitter())\n"
            "except CheckError as exc:\n    print('refused:', exc)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(runner_zip(tmp_path)), str(work)], capture_output=True,
                          text=True, check=False, env={"PATH": f"{bindir}:/usr/bin:/bin"}, timeout=60)
    assert "refused: nvcc build failed: error: stand-in nvcc" in proc.stdout, proc.stdout + proc.stderr
    source = (RUNNER / "bench_kernels.cu").read_text()
    assert (work / "bench_kernels.cu").read_text() == source == (bindir / "seen.cu").read_text()
