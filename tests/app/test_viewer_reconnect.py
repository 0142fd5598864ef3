"""The built-in viewer's session rides the host's connection: the demo host's SSH connection is killed
under it, it says "reconnecting", and comes back by itself through the same tunnel when the
connection does; closing it leaves the desktop running on the host."""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuws.app import desktop
from gpuws.app.targets import open_target
from gpuws.app.viewer import CursorShape, ViewerEvents, ViewerSession, ViewerState
from gpuws.core.paths import data_dir
from gpuws.remote.connection import ReconnectPolicy
from gpuws.sim.server import kill_leftovers
from tests.support.waiting import until

pytestmark = [pytest.mark.keyring, pytest.mark.slow, pytest.mark.xdist_group("x-display")]
FAST_RETRY = ReconnectPolicy(base_delay=0.2, max_delay=1.0, max_retries=30)


@pytest.fixture
def demo_state(isolated_home: Path) -> Iterator[Path]:
    assert shutil.which("Xvnc"), "install the test packages (scripts/install-deps.sh test)"
    state = data_dir() / "demo-host"
    try:
        yield state
    finally:
        kill_leftovers(state)


class Recorder:
    """The session's events, as they came (from its thread)."""

    def __init__(self) -> None:
        self.states: list[ViewerState] = []
        self.frames = 0
        self.lock = threading.Lock()

    def events(self) -> ViewerEvents:
        def state(s: ViewerState, _detail: str) -> None:
            with self.lock:
                self.states.append(s)

        def frame() -> None:
            self.frames += 1

        def cursor(_c: CursorShape) -> None:
            return None

        return ViewerEvents(on_state=state, on_frame=frame, on_cursor=cursor, on_clipboard=lambda _t: None,
                            on_size=lambda _w, _h: None)


def test_the_viewer_reconnects_when_the_connection_comes_back(demo_state: Path) -> None:
    async def scenario() -> None:
        async with open_target("demo", reconnect=FAST_RETRY) as conn:
            session = await desktop.open_desktop(conn, geometry="800x600")
            seen = Recorder()
            viewer = ViewerSession(session.local_port, session.password, seen.events())
            viewer.start()
            try:
                await until(lambda: viewer.state is ViewerState.CONNECTED and seen.frames > 0, 90)
                (await conn.ssh()).abort()  # the host's connection is killed under the viewer
                await until(lambda: ViewerState.RECONNECTING in seen.states, 90)
                assert "reconnecting" in viewer.detail
                await until(lambda: viewer.state is ViewerState.CONNECTED and viewer.connects == 2, 90)
                fb = viewer.framebuffer
                assert fb is not None and (fb.width, fb.height) == (800, 600)
            finally:
                await asyncio.to_thread(viewer.close)
                await session.tunnel.close()
            assert seen.states[-1] is ViewerState.CLOSED
            # Closing the viewer left the desktop running: it is reused.
            again = await desktop.open_desktop(conn, geometry="800x600")
            try:
                assert again.desktop.reused is True
            finally:
                await again.tunnel.close()
                assert await desktop.stop(conn) is True

    asyncio.run(scenario())
