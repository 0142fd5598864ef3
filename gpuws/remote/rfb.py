"""An RFB 3.8 client on an asyncio stream: the handshake (VNC authentication), then the server's
messages decoded into a `Framebuffer` (`gpuws.core.rfb`), and the client's input messages.

Flow control is TigerVNC's where the server speaks it (Xvnc does): ContinuousUpdates, so the server
sends each change as it happens, with no request a round trip after the last update, and Fence, whose
requests the client answers in turn as it reads them: the server times those answers and sends no
faster than the client decodes. Elsewhere the classic one: one incremental FramebufferUpdateRequest per
update, sent as that update begins, so a server is never more than one update ahead of the decoder.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable
from dataclasses import dataclass

from gpuws.core.rfb import protocol as p
from gpuws.core.rfb.decoders import CursorShape, DecoderState, Input, JpegDecoder, UpdateResult, read_update
from gpuws.core.rfb.errors import (
    RfbAuthFailed,
    RfbClosed,
    RfbError,
    RfbLimitExceeded,
    RfbTooManyFailures,
    RfbUnsupported,
)
from gpuws.core.rfb.framebuffer import Framebuffer, check_size

MAX_CUT_TEXT = 16 * 1024 * 1024  # clipboard text longer than this is skipped (read in chunks, never kept)
HANDSHAKE_TIMEOUT = 30.0
READ_SIZE = 1024 * 1024  # the most one read takes from the socket's buffer (the decoders parse from it)
STREAM_LIMIT = 1024 * 1024  # asyncio's reader pauses the socket past twice this buffered


@dataclass
class RfbCallbacks:
    """What the client reports, called on its loop's thread."""

    on_update: Callable[[UpdateResult], None]
    on_cursor: Callable[[CursorShape], None]
    on_clipboard: Callable[[str], None]


class RfbClient:
    """One connection to a VNC server."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 jpeg: JpegDecoder | None = None) -> None:
        self._reader = reader
        self._writer = writer
        self._stage = "the greeting"
        self.state = DecoderState(jpeg=jpeg)
        self.framebuffer: Framebuffer | None = None
        self.name = ""
        self.extended_size = False  # the server said it speaks ExtendedDesktopSize
        self.screen_id = 0
        self.screen_flags = 0
        self.quality: int | None = p.DEFAULT_QUALITY if jpeg is not None else None
        self.continuous = False  # the server sends updates as they happen (ContinuousUpdates is on)
        # Extended Clipboard (UTF-8 text): the server's caps once it said them, and the text copied here
        # that it was told of and may ask for.
        self.clipboard_caps: p.ClipboardMessage | None = None
        self._local_text: str | None = None
        self._sent_as_latin1 = False  # copied before the server said its caps: sent again in UTF-8 then
        self.fences_answered = 0
        self.requests_sent = 0  # FramebufferUpdateRequests

    @classmethod
    async def open(cls, host: str, port: int, password: str, *, jpeg: JpegDecoder | None = None,
                   timeout: float = HANDSHAKE_TIMEOUT, encodings: list[int] | None = None) -> RfbClient:
        """Connect, authenticate and initialise; the first full update is requested (with `encodings`,
        else the best this client speaks)."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=STREAM_LIMIT), timeout)
        except OSError as exc:
            raise RfbClosed(f"connecting to {host}:{port} ({exc.strerror or exc})") from None
        client = cls(reader, writer, jpeg=jpeg)
        try:
            await asyncio.wait_for(client._handshake(password, encodings), timeout)
        except TimeoutError:
            await client.close()
            raise RfbClosed(f"{client._stage} (no answer in {timeout:.0f} s)") from None
        except BaseException:
            await client.close()
            raise
        return client

    async def _read(self, n: int) -> bytes:
        try:
            return await self._reader.readexactly(n)
        except asyncio.IncompleteReadError:
            raise RfbClosed(self._stage) from None
        except OSError as exc:
            raise RfbClosed(f"{self._stage} ({exc.strerror or exc})") from None

    async def _fetch(self, n: int) -> bytes:
        """What the socket has (at least one byte; `n` or more when there): the decoders' input."""
        try:
            data = await self._reader.read(max(n, READ_SIZE))
        except OSError as exc:
            raise RfbClosed(f"{self._stage} ({exc.strerror or exc})") from None
        if not data:
            raise RfbClosed(self._stage)
        return data

    async def _reason(self) -> str:
        length = struct.unpack(">I", await self._read(4))[0]
        text = await self._read(min(length, p.MAX_REASON))
        return text.decode("utf-8", errors="replace") or "no reason given"

    async def _refused(self) -> RfbError:
        """The error for a refusal with a reason: TigerVNC's blacklist is temporary, a wrong password is not."""
        reason = await self._reason()
        if reason.startswith("Too many security failures"):
            return RfbTooManyFailures(reason)
        return RfbAuthFailed(reason)

    async def _handshake(self, password: str, encodings: list[int] | None) -> None:
        major, minor = p.parse_version(await self._read(12))
        version = min((major, minor), (3, 8))
        if version not in ((3, 3), (3, 7), (3, 8)):
            version = (3, 3)  # RFC 6143: anything else between is spoken as 3.3
        self._writer.write(f"RFB {version[0]:03d}.{version[1]:03d}\n".encode())
        self._stage = "the security handshake"
        if version == (3, 3):
            chosen = struct.unpack(">I", await self._read(4))[0]
            if chosen == p.Security.INVALID:
                raise await self._refused()
        else:
            count = (await self._read(1))[0]
            if count == 0:
                raise await self._refused()
            offered = set(await self._read(count))
            if p.Security.VNC_AUTH in offered:
                chosen = p.Security.VNC_AUTH
            elif p.Security.NONE in offered:
                chosen = p.Security.NONE
            else:
                raise RfbUnsupported(f"the VNC server offers security types {sorted(offered)}; this client "
                                     "speaks None (1) and VNC authentication (2)")
            self._writer.write(bytes([chosen]))
        if chosen == p.Security.VNC_AUTH:
            self._stage = "VNC authentication"
            challenge = await self._read(16)
            self._writer.write(p.vnc_auth_response(password, challenge))
        elif chosen != p.Security.NONE:
            raise RfbUnsupported(f"the VNC server chose security type {chosen}")
        if chosen == p.Security.VNC_AUTH or version == (3, 8):
            self._stage = "the security result"
            if struct.unpack(">I", await self._read(4))[0] != 0:
                raise await self._refused() if version == (3, 8) else RfbAuthFailed("wrong password")
        self._stage = "the initialisation"
        self._writer.write(b"\x01")  # ClientInit: shared, other viewers stay connected
        width, height = struct.unpack(">HH", await self._read(4))
        await self._read(16)  # the server's pixel format: replaced by ours below
        length = struct.unpack(">I", await self._read(4))[0]
        if length > p.MAX_NAME:
            raise RfbLimitExceeded("desktop name", f"{length} bytes long")
        self.name = (await self._read(length)).decode("utf-8", errors="replace")
        check_size(width, height)
        self.framebuffer = Framebuffer(width, height)
        self._writer.write(p.set_pixel_format())
        self._writer.write(p.set_encodings(encodings if encodings is not None else p.encodings(self.quality)))
        self._request(False, width, height)
        await self._writer.drain()
        self._stage = "the session"

    async def run(self, callbacks: RfbCallbacks) -> None:
        """Read the server's messages until it closes (RfbClosed) or breaks the protocol (RfbError)."""
        fb = self.framebuffer
        assert fb is not None
        inp = Input(self._fetch)
        read = inp.read
        while True:
            kind = (await read(1))[0]
            if kind == p.ServerMessage.FRAMEBUFFER_UPDATE:
                if not self.continuous:
                    # Ask for the next update before decoding this one: the server prepares it meanwhile.
                    self._request(True, fb.width, fb.height)
                result = await read_update(inp, fb, self.state)
                if result.extended_size:
                    self.extended_size = True
                    if result.screens:
                        self.screen_id, self.screen_flags = result.screens[0].id, result.screens[0].flags
                if result.cursor is not None:
                    callbacks.on_cursor(result.cursor)
                if result.resized:  # the request above, or continuous updates, named the old size
                    if self.continuous:
                        self.send(p.enable_continuous_updates(True, 0, 0, fb.width, fb.height))
                    else:
                        self._request(True, fb.width, fb.height)
                callbacks.on_update(result)
                # A server that floods keeps the input's buffer full, and reading it then never waits:
                # let the loop run the input, the close and the writes queued meanwhile.
                await asyncio.sleep(0)
            elif kind == p.ServerMessage.SET_COLOUR_MAP_ENTRIES:
                count = struct.unpack(">xHH", await read(5))[1]
                await read(count * 6)  # true colour was asked for: nothing to map
            elif kind == p.ServerMessage.BELL:
                continue
            elif kind == p.ServerMessage.SERVER_FENCE:
                flags, length = struct.unpack(">3xIB", await read(8))
                if length > p.MAX_FENCE_PAYLOAD:
                    raise RfbLimitExceeded("fence", f"a {length}-byte payload (at most {p.MAX_FENCE_PAYLOAD})")
                payload = await read(length)
                if flags & p.FenceFlag.REQUEST:
                    # Everything before the fence is decoded (BlockBefore), nothing after it has started
                    # (BlockAfter, SyncNext): answered at once, with the flags understood.
                    self.send(p.fence(flags & p.FENCE_UNDERSTOOD, payload))
                    self.fences_answered += 1
            elif kind == p.ServerMessage.END_OF_CONTINUOUS_UPDATES:
                # Sent once in answer to SetEncodings naming ContinuousUpdates (the server speaks it: turn
                # it on), and again when the server stops them (back to requests).
                if self.continuous:
                    self.continuous = False
                    self._request(True, fb.width, fb.height)
                else:
                    self.continuous = True
                    self.send(p.enable_continuous_updates(True, 0, 0, fb.width, fb.height))
            elif kind == p.ServerMessage.SERVER_CUT_TEXT:
                length = struct.unpack(">3xi", await read(7))[0]
                if abs(length) > MAX_CUT_TEXT:
                    for left in range(abs(length), 0, -65536):
                        await read(min(left, 65536))
                    continue
                if length >= 0:
                    callbacks.on_clipboard((await read(length)).decode("latin-1"))
                else:
                    self._clipboard_message(p.parse_clipboard(await read(-length), MAX_CUT_TEXT), callbacks)
            else:
                raise RfbUnsupported(f"the VNC server sent message type {kind}, which RFB 3.8 does not have")

    def _clipboard_message(self, message: p.ClipboardMessage, callbacks: RfbCallbacks) -> None:
        """Extended Clipboard: caps (answered with this client's), notify (text there: ask for it), request
        (send the text copied here), peek (say whether there is any), provide (the text)."""
        action, has_text = message.action, bool(message.flags & p.ClipFlag.TEXT)
        if action & p.ClipFlag.CAPS:
            self.clipboard_caps = message
            self.send(p.clipboard_caps(MAX_CUT_TEXT))
            if self._sent_as_latin1 and self._local_text is not None:
                self.send_clipboard(self._local_text)
        elif action == p.ClipFlag.NOTIFY and has_text:
            self.send(p.clipboard_action(p.ClipFlag.REQUEST))
        elif action == p.ClipFlag.REQUEST and has_text and self._local_text is not None:
            self.send(p.clipboard_provide(self._local_text))
        elif action == p.ClipFlag.PEEK:
            self.send(p.clipboard_action(p.ClipFlag.NOTIFY, p.ClipFlag.TEXT if self._local_text is not None else 0))
        elif action == p.ClipFlag.PROVIDE and message.text is not None:
            callbacks.on_clipboard(message.text)

    def send_clipboard(self, text: str) -> None:
        """Text copied on this computer, for the server: in UTF-8 where it speaks Extended Clipboard (sent
        at once when short enough for it, else announced and sent when it asks), else as Latin-1."""
        caps = self.clipboard_caps
        self._local_text = text
        self._sent_as_latin1 = caps is None
        if caps is None:
            self.send(p.client_cut_text(text))
            return
        text_max = caps.sizes[0] if caps.flags & p.ClipFlag.TEXT and caps.sizes else 0
        if caps.flags & p.ClipFlag.PROVIDE and len(p.text_for_clipboard(text)) <= text_max:
            self.send(p.clipboard_provide(text))
        elif caps.flags & p.ClipFlag.NOTIFY:
            self.send(p.clipboard_action(p.ClipFlag.NOTIFY))
        else:
            self.send(p.client_cut_text(text))

    def _request(self, incremental: bool, width: int, height: int) -> None:
        self.requests_sent += 1
        self.send(p.update_request(incremental, 0, 0, width, height))

    def send(self, data: bytes) -> None:
        """Queue a client message (on the client's loop thread)."""
        if not self._writer.is_closing():
            self._writer.write(data)

    def set_quality(self, quality: int | None) -> None:
        """Announce the encodings again with another JPEG quality (None: lossless)."""
        if self.state.jpeg is None:
            quality = None
        self.quality = quality
        self.send(p.set_encodings(p.encodings(quality)))

    def request_size(self, width: int, height: int) -> bool:
        """Ask the server to resize its screen (False when it does not speak ExtendedDesktopSize)."""
        if not self.extended_size:
            return False
        check_size(width, height)
        self.send(p.set_desktop_size(width, height, self.screen_id, self.screen_flags))
        return True

    async def close(self) -> None:
        """Close the connection."""
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()


__all__ = ["RfbAuthFailed", "RfbCallbacks", "RfbClient", "RfbClosed", "RfbError"]
