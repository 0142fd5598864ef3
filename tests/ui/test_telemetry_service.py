"""TelemetryService end to end on a local simulated host: streaming, a drop leaves a gap, resume, alerts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuws.app.telemetry import TelemetryService
from gpuws.core.models import AlertThresholds, HostProfile
from gpuws.core.runner import CommandResult, LocalRunner
from gpuws.core.telemetry.alerts import AlertKind
from gpuws.remote.connection import ReconnectPolicy
from tests.remote.telemetry_hosts import install_nvml_python3
from tests.support.sshd import install_sim_nvidia_smi


def sim_host(tmp_path: Path) -> LocalRunner:
    """A LocalRunner whose PATH looks like a GPU host: simulated nvidia-smi and a python3 with fake NVML."""
    bin_dir = tmp_path / "bin"
    install_sim_nvidia_smi(bin_dir)
    install_nvml_python3(bin_dir)
    state = tmp_path / "state"
    state.mkdir()
    return LocalRunner(env={"PATH": f"{bin_dir}:/usr/bin:/bin", "GPUWS_SIM_STATE": str(state), "HOME": str(tmp_path)})


class DroppingRunner:
    """The real local runner, except that its first stream dies after `lines` lines, as on a lost link."""

    def __init__(self, inner: LocalRunner, lines: int) -> None:
        self.inner = inner
        self.lines = lines
        self.dropped = False

    async def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float | None = None,
                  env: Mapping[str, str] | None = None, max_output: int | None = None) -> CommandResult:
        return await self.inner.run(argv, input=input, timeout=timeout, env=env, max_output=max_output)

    async def stream(self, argv: Sequence[str], *, input: str | None = None,
                     env: Mapping[str, str] | None = None) -> AsyncIterator[str]:
        source = self.inner.stream(argv, input=input, env=env)
        seen = 0
        try:
            async for line in source:
                yield line
                seen += 1
                if not self.dropped and seen >= self.lines:
                    self.dropped = True
                    raise ConnectionResetError("connection lost")
        finally:
            await source.aclose()  # type: ignore[attr-defined]


async def wait_for(predicate: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


@pytest.mark.timeout(60)
def test_service_streams_marks_the_gap_and_resumes_after_a_drop(tmp_path: Path, monkeypatch: Any) -> None:
    runner = DroppingRunner(sim_host(tmp_path), lines=6)  # hello + a few batches, then the link drops
    profile = HostProfile(name="sim", host="127.0.0.1", simulated=True,
                          alerts=AlertThresholds(mem_used_pct=90.0, idle_minutes=1.0))
    service = TelemetryService(hz=5.0, retry=ReconnectPolicy(base_delay=0.3, max_delay=0.3))

    async def scenario() -> None:
        task = asyncio.create_task(service.watch(profile, runner))
        try:
            await wait_for(lambda: runner.dropped and service.store.status("sim").online
                           and any(not a.active for a in service.alert_log.entries()), 40)
            feed = service.feed("sim")
            assert feed is not None and feed.source == "nvml" and feed.simulated
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    keys = service.store.device_keys("sim")
    assert keys and keys[0] == "0"
    t, util = service.store.series("sim", "0", "util_gpu_pct", time.time() - 60, time.time() + 1)
    gaps = np.flatnonzero(np.isnan(util))
    # A gap row sits between samples from before and after the drop (and one at the final stop).
    assert gaps.size >= 1 and gaps[0] > 0 and gaps[0] < t.size - 1
    unreachable = [a for a in service.alert_log.entries() if a.kind is AlertKind.HOST_UNREACHABLE]
    assert len(unreachable) == 1 and "connection lost" in unreachable[0].message
    assert unreachable[0].cleared_at is not None  # samples came back: cleared
    assert not service.store.status("sim").online  # cancelled: marked offline
    assert service.feed("sim") is None


class _SwallowingStream:
    """A stream whose cleanup fails when it is interrupted: the CancelledError of an unwatch
    comes out as an ordinary error (as a channel closing under a cancelled read can)."""

    opened = 0

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        self.source, self.simulated = "nvml", True

    async def __aenter__(self) -> _SwallowingStream:
        type(self).opened += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is asyncio.CancelledError:
            raise OSError("channel closed while reading")

    def __aiter__(self) -> _SwallowingStream:
        return self

    async def __anext__(self) -> Any:
        await asyncio.sleep(3600)


@pytest.mark.timeout(60)
def test_an_unwatched_host_stops_streaming_even_when_the_cancel_is_swallowed(monkeypatch: Any) -> None:
    """Closing a session cancels its feed; a cancel that a stream's cleanup turned into an error
    left the task restarting streams for good (the hub's feed never went, seen as a flaky
    test_the_windows_hub_meters_a_host_session_from_connect_to_close)."""
    service = TelemetryService(stream_factory=_SwallowingStream,  # type: ignore[arg-type]
                               retry=ReconnectPolicy(base_delay=0.01, max_delay=0.01))
    profile = HostProfile(name="sim", host="127.0.0.1", simulated=True)

    async def scenario() -> None:
        task = asyncio.create_task(service.watch(profile, LocalRunner()))
        await wait_for(lambda: _SwallowingStream.opened == 1, 10)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)
        if not done:
            task.cancel()
        assert done, "the watch went on after it was cancelled"
        assert task.cancelled()

    asyncio.run(scenario())
    assert _SwallowingStream.opened == 1  # no stream started after the cancel
    assert service.feed("sim") is None
