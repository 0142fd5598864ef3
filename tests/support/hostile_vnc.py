"""A small VNC server on 127.0.0.1 that speaks bad RFB on purpose, for the viewer's bounds tests.

Modes: `close-in-handshake` (greets, then hangs up when the client answers), `huge-rect` (a 65535x65535
Raw rectangle on an 800x600 screen), `4gib` (a 32768x32768 framebuffer: 4 GiB at 32 bits a pixel),
`unknown-encoding`, `zlib-bomb` (a ZRLE rectangle inflating to 64 MiB) and `flood` (unasked-for
updates as fast as the socket takes them, each a full-screen Tight fill of a new colour).
It accepts any password (security type None).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib

from gpuws.core.rfb.protocol import PIXEL_FORMAT, Encoding

MODES = ("close-in-handshake", "huge-rect", "4gib", "unknown-encoding", "zlib-bomb", "flood")


def zlib_bomb(mib: int = 64) -> bytes:
    """`mib` MiB of zeros, deflated (about 64 KiB), made a MiB at a time."""
    packer = zlib.compressobj(9)
    zeros = bytes(1024 * 1024)
    return b"".join(packer.compress(zeros) for _ in range(mib)) + packer.flush()


class HostileServer:
    """Serves one mode on a free port; `sent_updates` counts what `flood` sent."""

    def __init__(self, mode: str) -> None:
        assert mode in MODES, mode
        self.mode = mode
        self.port = 0
        self.sent_updates = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> HostileServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._speak(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _speak(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"RFB 003.008\n")
        await reader.readexactly(12)
        if self.mode == "close-in-handshake":
            return
        writer.write(b"\x01\x01")  # one security type: None
        await reader.readexactly(1)
        writer.write(struct.pack(">I", 0))  # SecurityResult: ok
        await reader.readexactly(1)  # ClientInit
        width, height = (32768, 32768) if self.mode == "4gib" else (800, 600)
        writer.write(struct.pack(">HH", width, height) + PIXEL_FORMAT + struct.pack(">I", 7) + b"hostile")
        await writer.drain()
        rect = struct.Struct(">BxHHHHHi")
        if self.mode == "huge-rect":
            writer.write(rect.pack(0, 1, 0, 0, 65535, 65535, Encoding.RAW))
        elif self.mode == "unknown-encoding":
            writer.write(rect.pack(0, 1, 0, 0, 16, 16, 0x7EADBEEF))
        elif self.mode == "zlib-bomb":
            bomb = zlib_bomb()
            writer.write(rect.pack(0, 1, 0, 0, 512, 512, Encoding.ZRLE) + struct.pack(">I", len(bomb)) + bomb)
        elif self.mode == "flood":
            while True:
                colour = self.sent_updates % 256
                writer.write(rect.pack(0, 1, 0, 0, width, height, Encoding.TIGHT) + bytes([0x80, colour, 0, 255]))
                self.sent_updates += 1
                await writer.drain()
        await writer.drain()
        with contextlib.suppress(Exception):
            await reader.read()  # hold the line until the client hangs up
