"""A hostile VNC server (tests/support/hostile_vnc.py) against the built-in viewer: each bad message is
a typed error in words, memory stays bounded, and the GUI thread keeps running through a flood."""

from __future__ import annotations

import asyncio
import threading
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QTimer

from gpuws.app.viewer import RfbClosed, RfbLimitExceeded, RfbUnsupported, ViewerState
from gpuws.ui.vnc.window import VncWindow
from tests.support.hostile_vnc import HostileServer

pytestmark = [pytest.mark.gui]
WAIT_MS = 60_000


class ServerThread:
    """A HostileServer on an event loop of its own thread."""

    def __init__(self, mode: str) -> None:
        self.server = HostileServer(mode)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._stop = asyncio.Event()
            async with self.server:
                self._ready.set()
                await self._stop.wait()

        self._loop.run_until_complete(main())
        self._loop.close()

    def __enter__(self) -> HostileServer:
        self._thread.start()
        assert self._ready.wait(30)
        return self.server

    def __exit__(self, *_: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    yield
    tracemalloc.stop()


@pytest.mark.parametrize(("mode", "error", "words"), [
    ("close-in-handshake", RfbClosed, "closed the connection during the security handshake"),
    ("huge-rect", RfbLimitExceeded, "65535x65535 at 0,0 is outside the 800x600 framebuffer"),
    ("4gib", RfbLimitExceeded, "32768x32768 is outside 1..16384 pixels a side"),
    ("unknown-encoding", RfbUnsupported, "encoding 2125315823"),
    ("zlib-bomb", RfbLimitExceeded, "inflates past the"),
])
def test_a_bad_server_is_a_clear_error_within_bounds(qtbot: Any, traced: None, mode: str,
                                                     error: type[Exception], words: str) -> None:
    with ServerThread(mode) as server:
        window = VncWindow("hostile", server.port, "any", display=None)
        qtbot.addWidget(window)
        tracemalloc.reset_peak()
        window.start()
        try:
            qtbot.waitUntil(lambda: window.view.session.state is ViewerState.FAILED, timeout=WAIT_MS)
            assert isinstance(window.view.session.error, error)
            assert words in str(window.view.session.error)
            # The label follows on the GUI thread (a queued signal), maybe a moment after the session's state.
            qtbot.waitUntil(lambda: words in window.state_label.text() + window.state_label.toolTip(), timeout=WAIT_MS)
            # Nothing near the sizes asked for was allocated (a 4 GiB framebuffer, 64 MiB of inflated zeros).
            assert tracemalloc.get_traced_memory()[1] < 48 * 1024 * 1024
        finally:
            window.close()


def test_a_flood_of_updates_neither_freezes_the_gui_nor_grows_memory(qtbot: Any, traced: None) -> None:
    with ServerThread("flood") as server:
        window = VncWindow("hostile", server.port, "any", display=None)
        qtbot.addWidget(window)
        ticks = []
        clock = QTimer(interval=10)
        clock.timeout.connect(lambda: ticks.append(server.sent_updates))
        window.start()
        clock.start()
        try:
            qtbot.waitUntil(lambda: window.view.session.state is ViewerState.CONNECTED, timeout=WAIT_MS)
            qtbot.waitUntil(lambda: server.sent_updates > 2000, timeout=WAIT_MS)
            tracemalloc.reset_peak()
            start = server.sent_updates
            # The GUI thread's clock keeps ticking while thousands more updates arrive, and the updates
            # are coalesced: far fewer paints than updates.
            qtbot.waitUntil(lambda: server.sent_updates > start + 5000 and len(ticks) > 50, timeout=WAIT_MS)
            assert len({t for t in ticks if t > start}) > 10
            assert window.view.frames_shown < server.sent_updates
            assert tracemalloc.get_traced_memory()[1] < 32 * 1024 * 1024
        finally:
            clock.stop()
            window.close()
