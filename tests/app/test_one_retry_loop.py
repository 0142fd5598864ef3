"""One telemetry retry loop (#23): the window's feed (`TelemetryService.watch`) and `gpuws watch`
both run `gpuws.app.feeds.follow_telemetry`, so they treat a failure the same way.

Found: two loops (`app/feeds.py` and `remote/telemetry_service.py`) that had drifted: the window's
retried a host without a driver for ever ("Telemetry interrupted ... It resumes when the host is
back"), where `gpuws watch` stopped at once with exit status 6.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gpuws.app.errors import ExitStatus, exit_status_for
from gpuws.app.feeds import follow_telemetry
from gpuws.app.telemetry import TelemetryService
from gpuws.core.models import HostProfile
from gpuws.core.runner import LocalRunner
from gpuws.core.telemetry.alerts import AlertKind
from gpuws.remote.connection import ReconnectPolicy
from gpuws.remote.telemetry import TelemetryNoDriver


class _NoDriverStream:
    """A stream on a host whose nvidia-smi is missing."""

    opened = 0

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        self.source, self.simulated = None, False

    async def __aenter__(self) -> _NoDriverStream:
        type(self).opened += 1
        return self

    async def __aexit__(self, *_exc: object) -> None:
        return None

    def __aiter__(self) -> _NoDriverStream:
        return self

    async def __anext__(self) -> Any:
        raise TelemetryNoDriver("nvidia-smi not found on the host")


class _Local:
    runner = LocalRunner()


@pytest.mark.timeout(60)
def test_the_window_and_watch_stop_alike_on_a_host_without_a_driver() -> None:
    service = TelemetryService(stream_factory=_NoDriverStream,  # type: ignore[arg-type]
                               retry=ReconnectPolicy(base_delay=0.01, max_delay=0.01))
    profile = HostProfile(name="lab", host="127.0.0.1")

    async def window() -> None:
        await asyncio.wait_for(service.watch(profile, LocalRunner()), 30)  # ends by itself

    asyncio.run(window())
    assert _NoDriverStream.opened == 1  # not retried for ever
    (alert,) = [a for a in service.alert_log.active() if a.kind is AlertKind.HOST_UNREACHABLE]
    assert "nvidia-smi not found" in alert.message

    async def cli() -> BaseException:
        try:
            async for _event in follow_telemetry(_Local(), hz=1.0, stream_factory=_NoDriverStream):
                pass
        except Exception as exc:
            return exc
        raise AssertionError("watch went on")

    assert exit_status_for(asyncio.run(cli())) is ExitStatus.NO_DRIVER
    assert _NoDriverStream.opened == 2
