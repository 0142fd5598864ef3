"""The FramebufferUpdate decoders: Raw, CopyRect, ZRLE, Tight (fill, JPEG, basic with copy, palette and
gradient filters, its four zlib streams), and the pseudo-encodings Cursor, DesktopSize,
ExtendedDesktopSize and LastRect.

Network-free: they read through an async `Read` (n bytes exactly) given by the socket side. Every
length the server sends is checked before it is read or allocated: a rectangle must lie inside the
framebuffer, compressed data and what it inflates to have a budget per rectangle (a zlib bomb stops at
the budget), an unknown encoding is an error. JPEG is decoded by the `JpegDecoder` the caller gives
(Qt's image reader in the window): no Python loop touches a JPEG pixel.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpuws.core.rfb.errors import RfbLimitExceeded, RfbUnsupported
from gpuws.core.rfb.framebuffer import Framebuffer
from gpuws.core.rfb.protocol import Encoding

Read = Callable[[int], Awaitable[bytes]]
# (JPEG bytes, width, height) -> width*height*4 bytes of B, G, R, X; raises ValueError on a bad image.
JpegDecoder = Callable[[bytes, int, int], bytes]

MAX_INFLATED = 64 * 1024 * 1024  # what one rectangle's zlib data may inflate to
MAX_COMPRESSED = 64 * 1024 * 1024  # one rectangle's compressed data (ZRLE's length is 32 bits)
MAX_CURSOR_SIDE = 1024
RAW_CHUNK = 4 * 1024 * 1024  # Raw rectangles are read this much at a time, never whole
TILE = 64  # ZRLE's tile side


@dataclass(frozen=True)
class CursorShape:
    """The remote pointer's shape, to be drawn locally: B, G, R, A bytes and its hot spot."""

    width: int
    height: int
    hot_x: int
    hot_y: int
    bgra: bytes


@dataclass(frozen=True)
class Screen:
    """One screen of ExtendedDesktopSize."""

    id: int
    x: int
    y: int
    width: int
    height: int
    flags: int


@dataclass
class UpdateResult:
    """What one FramebufferUpdate said besides pixels."""

    rects: int = 0
    pixels: int = 0  # pixels drawn (a measure of the work; overlapping rectangles count twice)
    resized: bool = False
    cursor: CursorShape | None = None
    extended_size: bool = False  # the server speaks ExtendedDesktopSize
    size_reason: int | None = None  # 0 server, 1 this client, 2 another client
    size_status: int | None = None  # 0 ok; else why a SetDesktopSize was refused
    screens: tuple[Screen, ...] = ()


@dataclass
class DecoderState:
    """What lives across rectangles: the zlib streams (ZRLE's one, Tight's four) and the JPEG decoder."""

    jpeg: JpegDecoder | None = None
    zrle: zlib._Decompress = field(default_factory=zlib.decompressobj)
    tight: list[zlib._Decompress] = field(default_factory=lambda: [zlib.decompressobj() for _ in range(4)])


def inflate(stream: zlib._Decompress, data: bytes, expected_max: int, what: str) -> bytes:
    """Inflate `data` on a kept stream, never past `expected_max` bytes (a zlib bomb stops there)."""
    budget = min(expected_max, MAX_INFLATED)
    try:
        out = stream.decompress(data, budget + 1)
        tail = stream.unconsumed_tail
        while tail and len(out) <= budget:  # a sync-flush marker left over inflates to nothing
            more = stream.decompress(tail, 1)
            out += more
            tail = stream.unconsumed_tail
            if more:
                break
    except zlib.error as exc:
        raise RfbLimitExceeded(f"{what} zlib data", str(exc)) from None
    if len(out) > budget:
        raise RfbLimitExceeded(f"{what} zlib data", f"inflates past the {budget}-byte budget of its rectangle")
    return out


async def read_update(read: Read, fb: Framebuffer, state: DecoderState) -> UpdateResult:
    """The body of one FramebufferUpdate (after its type byte), decoded into `fb`."""
    count = struct.unpack(">xH", await read(3))[0]
    result = UpdateResult()
    for _ in range(count):
        x, y, width, height, encoding = struct.unpack(">HHHHi", await read(12))
        result.rects += 1
        if encoding == Encoding.LAST_RECT:
            break
        await _rect(read, fb, state, result, x, y, width, height, encoding)
    return result


async def _rect(read: Read, fb: Framebuffer, state: DecoderState, result: UpdateResult,
                x: int, y: int, width: int, height: int, encoding: int) -> None:
    if encoding == Encoding.DESKTOP_SIZE:
        with fb.lock:
            fb.resize(width, height)
        result.resized = True
        return
    if encoding == Encoding.EXTENDED_DESKTOP_SIZE:
        count = (await read(4))[0]
        raw = await read(16 * count)
        screens = tuple(Screen(*struct.unpack_from(">IHHHHI", raw, 16 * i)) for i in range(count))
        result.extended_size, result.size_reason, result.size_status = True, x, y
        result.screens = screens
        if y == 0:  # a refused SetDesktopSize repeats the current size, which needs no new buffer
            with fb.lock:
                fb.resize(width, height)
            result.resized = True
        return
    if encoding == Encoding.CURSOR:
        result.cursor = await _cursor(read, x, y, width, height)
        return
    fb.check(x, y, width, height, _name(encoding))
    result.pixels += width * height
    if encoding == Encoding.RAW:
        await _raw(read, fb, x, y, width, height)
    elif encoding == Encoding.COPY_RECT:
        src_x, src_y = struct.unpack(">HH", await read(4))
        fb.check(src_x, src_y, width, height, "CopyRect source")
        with fb.lock:
            fb.copy(x, y, width, height, src_x, src_y)
    elif encoding == Encoding.ZRLE:
        await _zrle(read, fb, state, x, y, width, height)
    elif encoding == Encoding.TIGHT:
        await _tight(read, fb, state, x, y, width, height)
    else:
        raise RfbUnsupported(f"the VNC server sent encoding {encoding}, which was not asked for")


def _name(encoding: int) -> str:
    try:
        return Encoding(encoding).name
    except ValueError:
        return f"encoding {encoding}"


async def _raw(read: Read, fb: Framebuffer, x: int, y: int, width: int, height: int) -> None:
    if width == 0 or height == 0:
        return
    rows = max(1, RAW_CHUNK // (width * 4))
    for top in range(y, y + height, rows):
        n = min(rows, y + height - top)
        data = await read(n * width * 4)
        with fb.lock:
            fb.put_bgrx(x, top, width, n, data)


async def _cursor(read: Read, hot_x: int, hot_y: int, width: int, height: int) -> CursorShape | None:
    if width > MAX_CURSOR_SIDE or height > MAX_CURSOR_SIDE:
        raise RfbLimitExceeded("cursor", f"{width}x{height} is over {MAX_CURSOR_SIDE} pixels a side")
    pixels = await read(width * height * 4)
    row = (width + 7) // 8
    mask = await read(row * height)
    if width == 0 or height == 0:
        return CursorShape(0, 0, 0, 0, b"")
    bgra = np.frombuffer(pixels, dtype=np.uint8).reshape(height, width, 4).copy()
    bits = np.unpackbits(np.frombuffer(mask, dtype=np.uint8).reshape(height, row), axis=1)[:, :width]
    bgra[:, :, 3] = bits * 0xFF
    return CursorShape(width, height, min(hot_x, width - 1), min(hot_y, height - 1), bgra.tobytes())


# -- ZRLE ------------------------------------------------------------------------------------------------


async def _zrle(read: Read, fb: Framebuffer, state: DecoderState, x: int, y: int, width: int, height: int) -> None:
    length = struct.unpack(">I", await read(4))[0]
    tiles = -(-width // TILE) * -(-height // TILE)
    # The most a rectangle's tile data can be: every tile raw or palette-RLE with one run byte per pixel.
    most = tiles * (1 + 127 * 3) + width * height * 5
    if length > min(MAX_COMPRESSED, most + most // 100 + 1024):
        raise RfbLimitExceeded("ZRLE rectangle", f"{length} bytes of data for {width}x{height} pixels")
    data = inflate(state.zrle, await read(length), most, "ZRLE")
    with fb.lock:
        _zrle_tiles(memoryview(data), fb, x, y, width, height)


class _Cursor:
    """Reads a ZRLE rectangle's inflated bytes; running off the end is a clear error."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> memoryview:
        """The next `n` bytes."""
        if self.pos + n > len(self.data):
            raise RfbLimitExceeded("ZRLE data", "it ends inside a tile")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def byte(self) -> int:
        """The next byte."""
        return int(self.take(1)[0])

    def run(self) -> int:
        """A run length: 1 + bytes summed up to the first that is not 255."""
        total = 1
        while True:
            b = self.byte()
            total += b
            if b != 255:
                return total


def _cpixels(raw: memoryview, n: int) -> npt.NDArray[np.uint8]:
    """`n` CPIXELs (3 bytes: the pixel's low bytes, B, G, R for our format) as an (n, 3) array."""
    return np.frombuffer(raw, dtype=np.uint8, count=n * 3).reshape(n, 3)


def _packed_indices(raw: memoryview, bits: int, tw: int, th: int, colours: int) -> npt.NDArray[np.intp]:
    row = (tw * bits + 7) // 8
    packed = np.frombuffer(raw, dtype=np.uint8, count=row * th).reshape(th, row)
    per_byte = 8 // bits
    shifts = np.array([8 - bits * (i + 1) for i in range(per_byte)], dtype=np.uint8)
    indices = ((packed[:, :, None] >> shifts) & ((1 << bits) - 1)).reshape(th, row * per_byte)[:, :tw]
    if int(indices.max(initial=0)) >= colours:
        raise RfbLimitExceeded("ZRLE tile", f"a palette index past its {colours} colours")
    return indices.astype(np.intp)


def _zrle_tiles(data: memoryview, fb: Framebuffer, x: int, y: int, width: int, height: int) -> None:
    src = _Cursor(data)
    for ty in range(y, y + height, TILE):
        th = min(TILE, y + height - ty)
        for tx in range(x, x + width, TILE):
            tw = min(TILE, x + width - tx)
            sub = src.byte()
            n = tw * th
            if sub == 0:
                fb.put_colours(tx, ty, _cpixels(src.take(n * 3), n).reshape(th, tw, 3))
            elif sub == 1:
                b, g, r = src.take(3)
                fb.fill(tx, ty, tw, th, (b, g, r))
            elif 2 <= sub <= 16:
                colours = _cpixels(src.take(sub * 3), sub)
                bits = 1 if sub == 2 else 2 if sub <= 4 else 4
                indices = _packed_indices(src.take((tw * bits + 7) // 8 * th), bits, tw, th, sub)
                fb.put_colours(tx, ty, colours[indices])
            elif sub == 128 or sub >= 130:
                palette = _cpixels(src.take((sub - 128) * 3), sub - 128) if sub >= 130 else None
                tile = np.empty((n, 3), dtype=np.uint8)
                i = 0
                while i < n:
                    if palette is None:
                        colour = np.frombuffer(src.take(3), dtype=np.uint8)
                        length = src.run()
                    else:
                        index = src.byte()
                        length = src.run() if index & 0x80 else 1
                        index &= 0x7F
                        if index >= len(palette):
                            raise RfbLimitExceeded("ZRLE tile", f"a palette index past its {len(palette)} colours")
                        colour = palette[index]
                    if i + length > n:
                        raise RfbLimitExceeded("ZRLE tile", f"a run of {length} past the tile's {n} pixels")
                    tile[i:i + length] = colour
                    i += length
                fb.put_colours(tx, ty, tile.reshape(th, tw, 3))
            else:
                raise RfbLimitExceeded("ZRLE tile", f"unknown subencoding {sub}")


# -- Tight -----------------------------------------------------------------------------------------------

TIGHT_FILL, TIGHT_JPEG = 8, 9
FILTER_COPY, FILTER_PALETTE, FILTER_GRADIENT = 0, 1, 2
MAX_GRADIENT_PIXELS = 1 << 20  # the gradient filter is undone pixel by pixel: servers use it on small rects


async def _compact_length(read: Read) -> int:
    length = 0
    for shift in (0, 7, 14):
        b = (await read(1))[0]
        length |= (b & (0x7F if shift < 14 else 0xFF)) << shift
        if shift == 14 or not b & 0x80:
            break
    return length


async def _tight(read: Read, fb: Framebuffer, state: DecoderState, x: int, y: int, width: int, height: int) -> None:
    control = (await read(1))[0]
    for i in range(4):
        if control & (1 << i):
            state.tight[i] = zlib.decompressobj()
    kind = control >> 4
    if kind == TIGHT_FILL:
        r, g, b = await read(3)
        with fb.lock:
            fb.fill(x, y, width, height, (b, g, r))
        return
    if kind == TIGHT_JPEG:
        length = await _compact_length(read)
        data = await read(length)
        if state.jpeg is None:
            raise RfbUnsupported("the VNC server sent JPEG, and this client has no JPEG decoder")
        try:
            pixels = state.jpeg(data, width, height)
        except ValueError as exc:
            raise RfbLimitExceeded("Tight JPEG rectangle", str(exc)[:200]) from None
        with fb.lock:
            fb.put_bgrx(x, y, width, height, pixels)
        return
    if kind > TIGHT_JPEG or kind & 0x08:
        raise RfbLimitExceeded("Tight rectangle", f"unknown compression control {control:#04x}")
    stream = kind & 0x03
    filter_id = (await read(1))[0] if kind & 0x04 else FILTER_COPY
    palette: npt.NDArray[np.uint8] | None = None
    if filter_id == FILTER_PALETTE:
        colours = (await read(1))[0] + 1
        palette = np.frombuffer(await read(colours * 3), dtype=np.uint8).reshape(colours, 3)[:, ::-1]
        size = (width + 7) // 8 * height if colours == 2 else width * height
    elif filter_id in (FILTER_COPY, FILTER_GRADIENT):
        size = width * height * 3
    else:
        raise RfbLimitExceeded("Tight rectangle", f"unknown filter {filter_id}")
    if size < 12:
        data = await read(size)
    else:
        length = await _compact_length(read)
        data = inflate(state.tight[stream], await read(length), size, "Tight")
    if len(data) != size:
        raise RfbLimitExceeded("Tight rectangle", f"{len(data)} bytes of pixels where {size} were due")
    if width == 0 or height == 0:
        return
    if palette is not None:
        if len(palette) == 2:
            row = (width + 7) // 8
            bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8).reshape(height, row), axis=1)[:, :width]
            indices: npt.NDArray[np.intp] = bits.astype(np.intp)
        else:
            indices = np.frombuffer(data, dtype=np.uint8).reshape(height, width).astype(np.intp)
            if int(indices.max(initial=0)) >= len(palette):
                raise RfbLimitExceeded("Tight rectangle", f"a palette index past its {len(palette)} colours")
        with fb.lock:
            fb.put_colours(x, y, palette[indices])
    elif filter_id == FILTER_GRADIENT:
        rgb = _ungradient(data, width, height)
        with fb.lock:
            fb.put_rgb(x, y, width, height, rgb)
    else:
        with fb.lock:
            fb.put_rgb(x, y, width, height, data)


def _ungradient(data: bytes, width: int, height: int) -> bytes:
    """Undo Tight's gradient filter: each pixel was sent as its difference from left + above - above-left."""
    if width * height > MAX_GRADIENT_PIXELS:
        raise RfbLimitExceeded("Tight rectangle", f"a gradient-filtered {width}x{height} rectangle is too large")
    out = bytearray(data)
    stride = width * 3
    for row in range(height):
        for col in range(width):
            for c in range(3):
                i = row * stride + col * 3 + c
                left = out[i - 3] if col else 0
                above = out[i - stride] if row else 0
                corner = out[i - stride - 3] if row and col else 0
                predicted = min(255, max(0, left + above - corner))
                out[i] = (data[i] + predicted) & 0xFF
    return bytes(out)
