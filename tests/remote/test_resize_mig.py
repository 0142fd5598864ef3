"""MIG resize against the simulated host (its nvidia-smi on PATH, via LocalRunner), with a fault
injected at every step: each run ends in the target verified or the previous layout restored
and verified, and the result says which."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from gpuws.core.errors import NoNvidiaDriver
from gpuws.core.runner import CommandResult, LocalRunner
from gpuws.remote.resize import (
    ROLLED_BACK,
    TARGET_VERIFIED,
    MigResizer,
    Progress,
    ResizeRefused,
)
from gpuws.sim.state import Fault, SimStateStore
from tests.support.sshd import install_sim_nvidia_smi

A100 = 1  # GPU 1 of the default simulated host: NVIDIA A100-SXM4-80GB


@pytest.fixture
def sim(tmp_path: Path) -> tuple[MigResizer, SimStateStore]:
    bin_dir = tmp_path / "bin"
    install_sim_nvidia_smi(bin_dir)
    store = SimStateStore(tmp_path / "state")
    with store.update() as state:
        for gpu in state.gpus:
            gpu.set_load(0.0)  # no demo-scenario processes: the GPUs are free
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", GPUWS_SIM_STATE=str(store.dir))
    return MigResizer(LocalRunner(env)), store


def _arm(store: SimStateStore, fault: Fault, times: int = 1) -> None:
    with store.update() as state:
        state.gpu(A100).inject_fault(fault, times)


async def _layout(resizer: MigResizer) -> str:
    return (await resizer.read_state(A100)).layout.describe()


async def test_full_to_seven_slices_and_back_is_verified(sim: tuple[MigResizer, SimStateStore]) -> None:
    resizer, _ = sim
    events: list[Progress] = []
    result = await resizer.resize(A100, "7x1g.10gb", progress=events.append)
    assert result.ok and result.outcome == TARGET_VERIFIED
    assert result.after is not None and result.after.describe() == "7x1g.10gb"
    assert (await resizer.read_state(A100)).mig_device_names == ("1g.10gb",) * 7  # nvidia-smi -L agrees
    assert any(e.phase == "verify" and e.message == "verified: 7x1g.10gb" for e in events)
    assert max(e.done for e in events) == 9
    again = await resizer.resize(A100, "7x1g.10gb")
    assert again.outcome == "already at target" and again.plan.empty and not again.log
    back = await resizer.resize(A100, "full")
    assert back.outcome == TARGET_VERIFIED and await _layout(resizer) == "full"


async def test_busy_gpu_is_refused_and_nothing_changes(sim: tuple[MigResizer, SimStateStore]) -> None:
    resizer, store = sim
    _arm(store, Fault.BUSY, times=-1)
    with pytest.raises(ResizeRefused, match="in use by 1 compute process") as info:
        await resizer.resize(A100, "7x1g.10gb")
    assert info.value.processes and "--stop-processes" in str(info.value)
    # A pid the host cannot see (another pid namespace, or a simulation) is never signalled.
    with pytest.raises(ResizeRefused, match="no such process is visible"):
        await resizer.resize(A100, "7x1g.10gb", stop_processes=True)
    assert await _layout(resizer) == "full"


async def test_stop_processes_stops_a_real_process_then_resizes(sim: tuple[MigResizer, SimStateStore]) -> None:
    resizer, store = sim
    victim = subprocess.Popen(["sleep", "60"])
    with store.update() as state:
        state.gpu(A100).add_process("sleep", 512, pid=victim.pid)

    async def driver_notices_exit() -> None:
        # The simulated driver lists a process until it exits, as the real one does.
        while victim.poll() is None:
            await asyncio.sleep(0.05)
        with store.update() as state:
            state.remove_process(victim.pid)

    watcher = asyncio.create_task(driver_notices_exit())
    try:
        result = await resizer.resize(A100, "2x3g.40gb", stop_processes=True)
    finally:
        victim.kill()
        await watcher
    assert result.outcome == TARGET_VERIFIED and result.stopped_processes == [victim.pid]
    assert victim.returncode is not None


@pytest.mark.parametrize(
    ("fault", "start", "target"),
    [
        (Fault.CREATE_GI_FAILS, "full", "7x1g.10gb"),
        (Fault.CREATE_CI_FAILS, "full", "4g.40gb,2g.20gb,1g.10gb"),
        (Fault.SILENT_NOOP, "full", "7x1g.10gb"),
        (Fault.DESTROY_FAILS, "2x3g.40gb", "full"),
        (Fault.CREATE_GI_FAILS, "2x3g.40gb", "7x1g.10gb"),
    ],
)
async def test_a_failed_step_rolls_back_to_the_verified_previous_layout(
    sim: tuple[MigResizer, SimStateStore], fault: Fault, start: str, target: str
) -> None:
    resizer, store = sim
    if start != "full":
        assert (await resizer.resize(A100, start)).ok
    _arm(store, fault)
    result = await resizer.resize(A100, target)
    assert not result.ok
    assert result.outcome == ROLLED_BACK, result.log
    assert result.after is not None and result.after.describe() == start
    assert await _layout(resizer) == start
    assert result.error
    if fault is Fault.SILENT_NOOP:  # exit 0, but nothing was created: caught by verification
        assert "verification" in result.error and "6x1g.10gb" in result.error


async def test_pending_mode_change_gets_a_reset(sim: tuple[MigResizer, SimStateStore]) -> None:
    resizer, store = sim
    _arm(store, Fault.RESET_FAILS, times=1)  # the mode change stays pending; the reset then works
    result = await resizer.resize(A100, "7x1g.10gb")
    assert result.outcome == TARGET_VERIFIED
    assert any(line.startswith("$ nvidia-smi -i 1 -r -> exit 0") for line in result.log)


async def test_failed_reset_rolls_back(sim: tuple[MigResizer, SimStateStore]) -> None:
    resizer, store = sim
    _arm(store, Fault.RESET_FAILS, times=2)  # pending, and the reset fails too
    result = await resizer.resize(A100, "7x1g.10gb")
    assert result.outcome == ROLLED_BACK and "reset GPU 1" in (result.error or "")
    state = await resizer.read_state(A100)
    assert state.layout.describe() == "full" and not state.mode_pending


async def test_failed_rollback_says_what_the_host_has(sim: tuple[MigResizer, SimStateStore]) -> None:
    resizer, store = sim
    with store.update() as state:
        gpu = state.gpu(A100)
        gpu.inject_fault(Fault.CREATE_CI_FAILS, 1)  # the second 3g.40gb gets no compute instance
        gpu.inject_fault(Fault.DESTROY_FAILS, -1)  # and nothing can be destroyed afterwards
    first = await resizer.resize(A100, "3g.40gb")
    assert first.outcome == "rollback failed: host state is 3g.40gb"
    assert not first.ok and "rollback" in (first.error or "")


async def test_non_mig_gpu_and_bad_target_are_refused(sim: tuple[MigResizer, SimStateStore]) -> None:
    from gpuws.core.resize.layout import LayoutError

    resizer, _ = sim
    with pytest.raises(ResizeRefused, match="not MIG-capable"):
        await resizer.resize(2, "7x1g.10gb")  # the L40S
    with pytest.raises(LayoutError, match="at most 2"):
        await resizer.resize(A100, "3x3g.40gb")
    with pytest.raises(ResizeRefused, match="no GPU 9"):
        await resizer.resize(9, "full")


class _NoNvidiaSmiOverSsh:
    """A host's shell without nvidia-smi: "not found", exit status 127 (what SSH brings back)."""

    async def run(self, argv: list[str], **_: object) -> CommandResult:
        return CommandResult(tuple(argv), 127, "", f"sh: 1: {argv[0]}: not found\n")


async def test_no_nvidia_smi_is_no_driver_not_a_failed_step(tmp_path: Path) -> None:
    # `gpuws slices`/`advise`/`resize` on a host without a driver exited 1 ("nvidia-smi --query-gpu
    # failed") instead of 6, the table's "no NVIDIA driver", which probe and watch already gave.
    for runner in (_NoNvidiaSmiOverSsh(), LocalRunner(dict(os.environ, PATH=str(tmp_path)))):
        with pytest.raises(NoNvidiaDriver, match="no NVIDIA driver"):
            await MigResizer(runner).read_gpus()  # type: ignore[arg-type]
