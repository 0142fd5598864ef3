"""The built-in VNC viewer's session, Qt-free: one RFB connection to a desktop's tunnel, kept up.

It runs on a thread of its own with its own event loop, so decoding a frame never delays the app's
SSH loop (telemetry, tunnels) nor the GUI thread. It rides the host's connection: when the tunnel's
far side drops, the session says RECONNECTING and tries again until the tunnel answers; a refused
password, a server that breaks the protocol, or a first connection that fails stops it with that
error. Input (keys, pointer,
clipboard, size, quality) may be sent from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from gpuws.core.rfb import protocol
from gpuws.core.rfb.decoders import CursorShape, JpegDecoder, UpdateResult
from gpuws.core.rfb.errors import (
    RfbAuthFailed,
    RfbClosed,
    RfbError,
    RfbLimitExceeded,
    RfbTooManyFailures,
    RfbUnsupported,
)
from gpuws.core.rfb.framebuffer import Framebuffer
from gpuws.remote.rfb import RfbCallbacks, RfbClient

__all__ = ["CursorShape", "JpegDecoder", "RfbAuthFailed", "RfbClosed", "RfbError", "RfbLimitExceeded",
           "RfbTooManyFailures", "RfbUnsupported", "ViewerEvents", "ViewerSession", "ViewerState"]

RETRY_S = (0.5, 1.0, 2.0, 3.0)  # waits between tries after a drop; the last repeats


class ViewerState(Enum):
    """Where the viewer's connection stands."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    FAILED = "failed"  # a refused password, a protocol error: not tried again
    CLOSED = "closed"


@dataclass
class ViewerEvents:
    """What the session reports, called on its own thread (a Qt adapter turns them into signals)."""

    on_state: Callable[[ViewerState, str], None]
    on_frame: Callable[[], None]  # pixels changed; called again only after `frame_taken`
    on_cursor: Callable[[CursorShape], None]
    on_clipboard: Callable[[str], None]
    on_size: Callable[[int, int], None]


class ViewerSession:
    """A kept-up RFB connection to 127.0.0.1:`port` (a desktop's tunnel)."""

    def __init__(self, port: int, password: str, events: ViewerEvents, *, host: str = "127.0.0.1",
                 jpeg: JpegDecoder | None = None, quality: int | None = protocol.DEFAULT_QUALITY) -> None:
        self._host, self._port, self._password = host, port, password
        self._events = events
        self._jpeg = jpeg
        self.quality = quality if jpeg is not None else None
        self.state = ViewerState.CONNECTING
        self.detail = ""
        self.error: RfbError | None = None
        self.framebuffer: Framebuffer | None = None
        self.desktop_name = ""
        self._client: RfbClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._frame_pending = threading.Event()
        self._wanted_size: tuple[int, int] | None = None
        self.connects = 0  # how many times the handshake succeeded

    def __repr__(self) -> str:  # the password stays out
        return f"ViewerSession({self._host}:{self._port}, {self.state.value})"

    # -- life ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the session's thread; returns at once."""
        ready = threading.Event()

        def run() -> None:
            """The session's thread: its own loop, until closed."""
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._stop = asyncio.Event()
            loop.call_soon(ready.set)
            try:
                loop.run_until_complete(self._keep_up())
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name=f"gpuws-vnc-{self._port}", daemon=True)
        self._thread.start()
        ready.wait()

    def close(self, timeout: float = 5.0) -> None:
        """Disconnect and end the thread (the desktop keeps running on the host)."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        """Whether the session's thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def _set_state(self, state: ViewerState, detail: str = "") -> None:
        self.state, self.detail = state, detail
        self._events.on_state(state, detail)

    async def _keep_up(self) -> None:
        assert self._stop is not None
        tries = 0
        while not self._stop.is_set():
            try:
                await self._once()
                tries = 0
            except (RfbAuthFailed, RfbLimitExceeded, RfbUnsupported) as exc:
                self.error = exc
                self._set_state(ViewerState.FAILED, str(exc))
                return
            except RfbError as exc:  # closed: the tunnel or the host went away
                self.error = exc
                if self._stop.is_set():
                    break
                # Never got in: the server is not one, or closes on us (its blacklist passes: tried again).
                if self.connects == 0 and not isinstance(exc, RfbTooManyFailures):
                    self._set_state(ViewerState.FAILED, str(exc))
                    return
                wait = RETRY_S[min(tries, len(RETRY_S) - 1)]
                if isinstance(exc, RfbTooManyFailures):
                    wait = exc.retry_after
                tries += 1
                self._set_state(ViewerState.RECONNECTING, f"reconnecting… ({exc})")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), wait)
        self._set_state(ViewerState.CLOSED)

    async def _once(self) -> None:
        assert self._stop is not None
        client = await RfbClient.open(self._host, self._port, self._password, jpeg=self._jpeg)
        if self.quality != client.quality:
            client.set_quality(self.quality)
        self._client = client
        self.connects += 1
        self.framebuffer = client.framebuffer
        self.desktop_name = client.name
        self.error = None
        assert client.framebuffer is not None
        self._events.on_size(client.framebuffer.width, client.framebuffer.height)
        self._set_state(ViewerState.CONNECTED, client.name)
        self._notify_frame()
        callbacks = RfbCallbacks(on_update=self._updated, on_cursor=self._events.on_cursor,
                                 on_clipboard=self._events.on_clipboard)
        reader = asyncio.ensure_future(client.run(callbacks))
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._client = None
            for task in (reader, stopper):
                task.cancel()
            with contextlib.suppress(BaseException):
                await stopper
            await client.close()
        if reader.done() and not reader.cancelled():
            exc = reader.exception()
            if exc is not None:
                raise exc

    def _updated(self, result: UpdateResult) -> None:
        fb = self.framebuffer
        if result.resized and fb is not None:
            self._events.on_size(fb.width, fb.height)
        if result.extended_size and self._wanted_size is not None and result.size_reason == 0:
            self._send_size()  # the server announced it only now: ask for the waiting size
        self._notify_frame()

    def _notify_frame(self) -> None:
        if not self._frame_pending.is_set():
            self._frame_pending.set()
            self._events.on_frame()

    def frame_taken(self) -> None:
        """The painter took the changed region: report the next change again."""
        self._frame_pending.clear()

    # -- input (any thread) ----------------------------------------------------------------------------

    def _call(self, action: Callable[[RfbClient], object]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def run() -> None:
            """On the session's loop: with the client of the moment, if connected."""
            if self._client is not None:
                action(self._client)

        with contextlib.suppress(RuntimeError):  # the loop just closed
            loop.call_soon_threadsafe(run)

    def key(self, keysym: int, down: bool) -> None:
        """A key press or release (an X keysym)."""
        self._call(lambda c: c.send(protocol.key_event(keysym, down)))

    def pointer(self, buttons: int, x: int, y: int) -> None:
        """The pointer at framebuffer pixel (x, y) with the buttons' mask."""
        self._call(lambda c: c.send(protocol.pointer_event(buttons, x, y)))

    def clipboard(self, text: str) -> None:
        """This computer's clipboard text, for the remote desktop."""
        self._call(lambda c: c.send_clipboard(text))

    def set_quality(self, quality: int | None) -> None:
        """Tight's JPEG quality 0..9, or None for lossless."""
        self.quality = quality
        self._call(lambda c: c.set_quality(quality))

    def request_size(self, width: int, height: int) -> None:
        """Ask the remote desktop to take this size (it follows the window); kept until the server can."""
        self._wanted_size = (max(1, width), max(1, height))
        self._call(lambda _c: self._send_size())

    def _send_size(self) -> None:
        client, wanted = self._client, self._wanted_size
        fb = self.framebuffer
        if client is None or wanted is None or fb is None:
            return
        if wanted != (fb.width, fb.height):
            with contextlib.suppress(RfbError):
                client.request_size(*wanted)
