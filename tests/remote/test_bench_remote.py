"""The benchmark end to end: sent through a real sshd, streamed, scored; cancel and timeout leave
nothing behind on the host (no process, no temporary directory)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuws.core.bench.report import build_report
from gpuws.core.runner import LocalRunner
from gpuws.remote import bench as remote_bench
from gpuws.remote.bench import run_benchmark
from gpuws.remote.connection import HostConnection
from tests.remote.helpers import key_profile, remote_processes, trust
from tests.support.bare_python import make_bare_python
from tests.support.sshd import SshdServer, install_sim_nvidia_smi

NO_TOOLCHAIN = (
    "no CUDA toolchain: install PyTorch with CUDA (pip install torch) or CuPy, or the CUDA toolkit (nvcc)"
)


class Host:
    """A real sshd with its own scratch TMPDIR; `python` is the interpreter the runner gets.

    The interpreter is passed by absolute path: the account's shell start-up files may put
    another python3 first on PATH (pyenv does), whatever sshd's environment says.
    """

    def __init__(self, root: Path, python: str) -> None:
        self.python = python
        self.scratch = root / "tmp"
        self.scratch.mkdir(parents=True)
        self.server = SshdServer(root / "sshd", env={"PATH": "/usr/bin:/bin", "TMPDIR": str(self.scratch)})

    def leftovers(self, timeout: float = 5.0) -> tuple[list[str], list[str]]:
        """Processes still running from the scratch dir, and what is left in it (after waiting)."""
        deadline = time.monotonic() + timeout
        while True:
            procs = remote_processes(str(self.scratch))
            files = sorted(p.name for p in self.scratch.iterdir())
            if (not procs and not files) or time.monotonic() > deadline:
                return procs, files
            time.sleep(0.1)


@pytest.fixture
def cpu_host(tmp_path: Path, isolated_home: Path) -> Iterator[Host]:
    """A CPU-only host whose python3 has NumPy (the venv's)."""
    host = Host(tmp_path / "cpuhost", sys.executable)
    host.server.start()
    trust(host.server, isolated_home)
    try:
        yield host
    finally:
        host.server.stop()


def bare_host(tmp_path: Path, isolated_home: Path, python: str) -> Host:
    host = Host(tmp_path / "barehost", python)
    host.server.start()
    trust(host.server, isolated_home)
    return host


@pytest.mark.sshd
async def test_cpu_harness_end_to_end_through_sshd(cpu_host: Host) -> None:
    events: list[dict[str, Any]] = []
    async with HostConnection(key_profile(cpu_host.server)) as conn:
        run = await run_benchmark(conn.runner, "quick", python=cpu_host.python, host="cpu-box",
                                  on_event=events.append, timeout=60)
    assert run.error is None and not run.timed_out
    assert run.harness == "cpu" and not run.simulated
    kinds = {e["type"] for e in events}
    assert {"progress", "log", "result", "summary"} <= kinds
    report = build_report(run)
    assert report["label"] == "CPU harness check \u2014 not a GPU measurement"
    assert report["verdict"] == "inconclusive", "a CPU-only host is never a pass"
    cpu = {c["check"]: c for c in report["checks"] if c["harness"] == "cpu"}
    assert cpu["gemm_fp32"]["measured"] > 0 and cpu["gemm_fp32"]["datasheet"] is None
    assert cpu["stress"]["measured"] == 0 and cpu["stress"]["details"]["iterations"] > 0
    assert all(c["verdict"] in ("inconclusive", "skipped") for c in cpu.values())
    assert cpu_host.leftovers() == ([], [])


@pytest.mark.sshd
async def test_no_toolchain_host_says_what_to_install(tmp_path: Path, isolated_home: Path) -> None:
    host = bare_host(tmp_path, isolated_home, make_bare_python(tmp_path / "bare-venv"))  # no NumPy/torch/CuPy
    try:
        async with HostConnection(key_profile(host.server)) as conn:
            run = await run_benchmark(conn.runner, "quick", python=host.python, host="bare", timeout=60)
        report = build_report(run)
        toolchain = next(c for c in report["checks"] if c["check"] == "toolchain")
        assert (toolchain["verdict"], toolchain["reason"]) == ("inconclusive", NO_TOOLCHAIN)
        assert report["verdict"] == "inconclusive"
        assert not any(c["verdict"] == "pass" for c in report["checks"] if not c["check"].startswith("env."))
        assert host.leftovers() == ([], [])
    finally:
        host.server.stop()


@pytest.mark.sshd
async def test_host_without_python3_is_a_clear_error(tmp_path: Path, isolated_home: Path) -> None:
    host = bare_host(tmp_path, isolated_home, str(tmp_path / "no-such-dir" / "python3"))
    try:
        async with HostConnection(key_profile(host.server)) as conn:
            run = await run_benchmark(conn.runner, "quick", python=host.python, host="nopy", timeout=30)
        assert run.error == f"no {host.python} on the host"
        assert build_report(run)["verdict"] == "inconclusive"
        assert host.leftovers() == ([], [])
    finally:
        host.server.stop()


@pytest.mark.sshd
@pytest.mark.slow
async def test_cancel_stops_the_remote_run_and_removes_its_directory(cpu_host: Host) -> None:
    stress_started = asyncio.Event()

    def on_event(event: dict[str, Any]) -> None:
        if event.get("type") == "progress" and event.get("check") == "stress":
            stress_started.set()

    async with HostConnection(key_profile(cpu_host.server)) as conn:
        task = asyncio.create_task(run_benchmark(conn.runner, "full", python=cpu_host.python, host="cpu-box",
                                                 on_event=on_event))
        await asyncio.wait_for(stress_started.wait(), 60)
        procs = remote_processes(str(cpu_host.scratch))
        assert any("gpuws_bench.pyz" in p for p in procs), "the runner is running from the scratch dir"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cpu_host.leftovers() == ([], [])


@pytest.mark.sshd
@pytest.mark.slow
async def test_client_timeout_kills_the_run_and_cleans_up(cpu_host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    # The runner is told it has 30 s; the client gives up after 2 s (as if the runner hung).
    monkeypatch.setattr(remote_bench, "GRACE_S", -28.0)
    async with HostConnection(key_profile(cpu_host.server)) as conn:
        # The client gives up before the runner's own 30 s (a guard against a hang, not a timing).
        run = await asyncio.wait_for(
            run_benchmark(conn.runner, "full", python=cpu_host.python, host="cpu-box", timeout=30), 25)
    assert run.timed_out and run.error and "stopped" in run.error
    assert build_report(run)["verdict"] == "inconclusive"
    assert cpu_host.leftovers() == ([], [])


@pytest.mark.sshd
async def test_runner_time_limit_ends_the_run_with_a_summary(cpu_host: Host) -> None:
    async with HostConnection(key_profile(cpu_host.server)) as conn:
        run = await run_benchmark(conn.runner, "full", python=cpu_host.python, host="cpu-box", timeout=1.0)
    assert run.summary.get("timed_out") is True and run.timed_out
    assert run.verdict().value == "inconclusive"
    assert cpu_host.leftovers() == ([], [])


def sim_runner(tmp_path: Path, **env: str) -> LocalRunner:
    """The simulated GPU host on this machine: emulated nvidia-smi, GPUWS_SIMULATED=1."""
    bin_dir = tmp_path / "simbin"
    install_sim_nvidia_smi(bin_dir)
    (bin_dir / "python3").symlink_to(sys.executable)
    state = tmp_path / "simstate"
    state.mkdir()
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GPUWS_SIMULATED": "1", "GPUWS_SIM_STATE": str(state),
            "TMPDIR": str(tmp_path), "HOME": os.environ.get("HOME", str(tmp_path))}
    return LocalRunner({**base, **env})


@pytest.mark.parametrize(("degraded", "gpu0_bf16"), [("-1", "pass"), ("0", "fail")])
async def test_simulated_backend_gives_a_labelled_full_run(tmp_path: Path, degraded: str, gpu0_bf16: str) -> None:
    runner = sim_runner(tmp_path, GPUWS_SIM_BENCH_DEGRADED=degraded)
    run = await run_benchmark(runner, "quick", python=sys.executable, host="demo", timeout=60)
    assert run.simulated and run.harness == "simulated"
    assert run.results and all(r["simulated"] for r in run.results)
    report = build_report(run)
    assert report["label"].startswith("SIMULATED")
    checks = {(c["check"], c["gpu"]): c for c in report["checks"]}
    assert checks[("gemm_bf16", 0)]["verdict"] == gpu0_bf16
    assert checks[("gemm_bf16", 0)]["datasheet"] == 989.5  # the emulated H100 80GB HBM3
    assert checks[("gemm_bf16", 1)]["verdict"] == "pass"  # A100 80GB
    assert checks[("gemm_fp8", 1)]["verdict"] == "skipped"  # the A100 has no FP8
    assert checks[("mem_copy", 2)]["verdict"] == "pass"  # L40S
    # A vGPU ("GRID A100-10C"): a time slice of the whole 40 GB A100, never a framebuffer share (issue 25).
    assert (checks[("gemm_bf16", 3)]["verdict"], checks[("gemm_bf16", 3)]["datasheet"]) == ("pass", 312.0)
    assert {c["check"] for c in report["checks"]} >= {"env.ecc", "env.pcie", "p2p", "scaling", "stress"}
    assert not list(tmp_path.glob("gpuws-bench.*")), "the temporary directory is removed"
