"""What the window shows follows the truth: a verified resize is reflected at once (re-probe,
telemetry restarts, MIG cards appear and go with the layout), and the header never says
"Connected" while the host's telemetry feed is dead (simulated host, local runner)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuws.app.resize import apply_mig
from gpuws.app.telemetry import TelemetryService
from gpuws.core.inventory import Inventory
from gpuws.core.models import HostProfile
from gpuws.core.runner import LocalRunner
from gpuws.remote.resize import MigResizer, ResizeOutcome
from gpuws.remote.telemetry import TelemetryStreamEnded
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.host_detail import HostDetail
from gpuws.ui.session_controller import HostSession
from gpuws.ui.tabs import HostContext
from gpuws.ui.telemetry.hub import TelemetryHub
from tests.support.local_connection import LocalConnection
from tests.ui.test_telemetry_service import sim_host

pytestmark = [pytest.mark.gui, pytest.mark.slow]

A100 = 1  # GPU 1 of the default simulated host


def _mig_keys(hub: TelemetryHub) -> list[str]:
    return [k for k in hub.store.device_keys("lab") if k.startswith(f"{A100}/")]


def _mig_devices(session: HostSession) -> int:
    inventory: Inventory | None = session.inventory
    return 0 if inventory is None else len(inventory.gpus[A100].mig_devices)


def _resize(bridge: AsyncBridge, runner: LocalRunner, profile: HostProfile, target: str) -> ResizeOutcome:
    async def go() -> ResizeOutcome:
        _, _, plan = await MigResizer(runner).plan(A100, target)
        applied = await apply_mig(runner, profile, plan, stop_processes=True)
        return applied.outcome

    outcome: ResizeOutcome = bridge.run_async(go()).result(timeout=60)
    return outcome


def test_mig_cards_follow_the_layout(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    runner = sim_host(tmp_path)
    profile = HostProfile(name="lab", host="127.0.0.1", user="me", simulated=True)
    session = HostSession(profile, bridge, connection_factory=lambda _p, **_kw: LocalConnection(runner))
    hub = TelemetryHub(bridge)  # the window's own hub, not a module-level one
    try:
        hub.watch_session(session)
        session.connect_host()
        qtbot.waitUntil(lambda: session.state == "connected", timeout=15000)
        qtbot.waitUntil(lambda: str(A100) in hub.store.device_keys("lab"), timeout=30000)
        assert _mig_keys(hub) == [] and _mig_devices(session) == 0

        assert _resize(bridge, runner, profile, "3g.40gb,3g.40gb") is ResizeOutcome.VERIFIED
        session.reprobe()  # what the Resize tab does after a verified resize
        qtbot.waitUntil(lambda: _mig_devices(session) == 2, timeout=30000)
        qtbot.waitUntil(lambda: len(_mig_keys(hub)) == 2, timeout=30000)

        assert _resize(bridge, runner, profile, "full") is ResizeOutcome.VERIFIED
        session.reprobe()
        qtbot.waitUntil(lambda: _mig_devices(session) == 0, timeout=30000)
        qtbot.waitUntil(lambda: _mig_keys(hub) == [], timeout=30000)
    finally:
        hub.shutdown()
        # The stream's task has ended (its host processes reaped) once its feed is gone.
        qtbot.waitUntil(lambda: hub.feed("lab") is None, timeout=15000)
        session.close()
        qtbot.waitUntil(lambda: bridge.pending_count == 0, timeout=15000)
        session.deleteLater()
        hub.deleteLater()


class _DeadStream:
    """A telemetry stream whose sampler dies at once (the connection itself stays fine)."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        self.source = None

    async def __aenter__(self) -> _DeadStream:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        return None

    def __aiter__(self) -> _DeadStream:
        return self

    async def __anext__(self) -> Any:
        raise TelemetryStreamEnded("the telemetry agent on the host stopped")


def test_the_header_never_says_connected_while_the_feed_is_dead(qtbot: Any, bridge: AsyncBridge,
                                                               tmp_path: Path) -> None:
    runner = sim_host(tmp_path)
    profile = HostProfile(name="lab", host="127.0.0.1", user="me", simulated=True)
    session = HostSession(profile, bridge, connection_factory=lambda _p, **_kw: LocalConnection(runner))
    hub = TelemetryHub(bridge, TelemetryService(stream_factory=_DeadStream))
    detail = HostDetail()
    qtbot.addWidget(detail)
    try:
        hub.watch_session(session)
        detail.set_host(HostContext(profile, session, bridge, hub))
        session.connect_host()
        qtbot.waitUntil(lambda: session.state == "connected", timeout=15000)
        qtbot.waitUntil(lambda: detail.status.label.text() == "Connected \u2014 telemetry interrupted", timeout=15000)
        assert "agent on the host stopped" in detail.status.toolTip()
    finally:
        detail.set_host(None)
        hub.shutdown()
        # The stream's task has ended (its host processes reaped) once its feed is gone.
        qtbot.waitUntil(lambda: hub.feed("lab") is None, timeout=15000)
        session.close()
        qtbot.waitUntil(lambda: bridge.pending_count == 0, timeout=15000)
        session.deleteLater()
        hub.deleteLater()
