"""The FramebufferUpdate decoders: Raw, CopyRect, ZRLE, Tight (fill, JPEG, basic with copy, palette and
gradient filters, its four zlib streams), and the pseudo-encodings Cursor, DesktopSize,
ExtendedDesktopSize and LastRect.

Network-free: they read from an `Input`, the server's bytes buffered. Each rectangle is parsed by a
plain (not async) function straight from that buffer, with numpy on whole rectangles and no Python
loop per pixel: a desktop's update is a hundred or more small rectangles, and an `await` per field
cost more than the pixels did. When a rectangle's bytes are not all there yet, its parser stops
(`_Short`) before it changed anything (zlib streams, pixels), the input reads more, and the parser
runs again from the rectangle's start.

Every length the server sends is checked before it is read or allocated: a rectangle must lie inside
the framebuffer, compressed data and what it inflates to have a budget per rectangle (a zlib bomb
stops at the budget), an unknown encoding is an error. JPEG is decoded by the `JpegDecoder` the
caller gives (Qt's image reader in the window): no Python loop touches a JPEG pixel.
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
RAW_CHUNK = 4 * 1024 * 1024  # Raw rectangles larger than this are read a chunk at a time, never whole
TILE = 64  # ZRLE's tile side
COMPACT_AT = 1024 * 1024  # the input drops bytes already parsed once this many have piled up

_RECT = struct.Struct(">HHHHi")
_U32 = struct.Struct(">I")
_COPY = struct.Struct(">HH")


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
    # Tight palettes seen, as framebuffer words: a desktop repeats a few (bounded: cleared when full).
    palettes: dict[bytes, npt.NDArray[np.uint32]] = field(default_factory=dict)


class _Short(Exception):
    """A parser ran out of buffered bytes: its rectangle needs `needed` bytes from its start."""

    def __init__(self, needed: int) -> None:
        super().__init__(needed)
        self.needed = needed


class Input:
    """The server's bytes, buffered: parsers take from the buffer without awaiting; when one runs short
    (`_Short`), the caller goes back to where it began, fetches more and runs it again.

    `fetch(n)` returns at least one byte of the next `n` or more (a socket gives what it has; a test's
    reader exactly `n`), and raises RfbClosed at the end of the stream."""

    def __init__(self, fetch: Read) -> None:
        self._fetch = fetch
        self.buf = bytearray()
        self.pos = 0
        self._mark = 0  # where the parse in progress began

    @classmethod
    def of(cls, source: Input | Read) -> Input:
        """`source` itself, or an Input over a `read(n)` that returns exactly n bytes."""
        return source if isinstance(source, Input) else cls(source)

    @property
    def buffered(self) -> int:
        """Bytes received and not parsed yet."""
        return len(self.buf) - self.pos

    def _short(self, end: int) -> _Short:
        return _Short(end - self._mark)

    def take(self, n: int) -> bytearray:
        """The next `n` bytes (a copy)."""
        pos = self.pos
        end = pos + n
        if end > len(self.buf):
            raise self._short(end)
        self.pos = end
        return self.buf[pos:end]

    def byte(self) -> int:
        """The next byte."""
        pos = self.pos
        if pos >= len(self.buf):
            raise self._short(pos + 1)
        self.pos = pos + 1
        return self.buf[pos]

    def unpack(self, form: struct.Struct) -> tuple[int, ...]:
        """The next `form.size` bytes unpacked."""
        pos = self.pos
        end = pos + form.size
        if end > len(self.buf):
            raise self._short(end)
        self.pos = end
        return form.unpack_from(self.buf, pos)  # type: ignore[no-any-return]

    def compact_length(self) -> int:
        """Tight's compact length: 1 to 3 bytes, 7 bits each (the third byte 8 bits)."""
        length = 0
        for shift in (0, 7, 14):
            b = self.byte()
            length |= (b & (0x7F if shift < 14 else 0xFF)) << shift
            if shift == 14 or not b & 0x80:
                break
        return length

    async def _fill(self, needed: int) -> None:
        """Until `needed` bytes from the parse's start are buffered."""
        if self._mark >= COMPACT_AT or (self._mark and self._mark == len(self.buf)):
            del self.buf[:self._mark]  # cheap: bytearray drops its front without moving the rest
            self.pos -= self._mark
            self._mark = 0
        while len(self.buf) - self._mark < needed:
            self.buf += await self._fetch(needed - (len(self.buf) - self._mark))

    async def read(self, n: int) -> bytes:
        """The next `n` bytes, waiting for them."""
        self._mark = self.pos
        if len(self.buf) - self.pos < n:
            await self._fill(n)
        return bytes(self.take(n))


def inflate(stream: zlib._Decompress, data: bytes | bytearray, expected_max: int, what: str) -> bytes:
    """Inflate `data` on a kept stream, never past `expected_max` bytes (a zlib bomb stops there)."""
    budget = expected_max if expected_max < MAX_INFLATED else MAX_INFLATED
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


_LAST = object()  # a rectangle parser's answer for LastRect: the update ends here


async def read_update(source: Input | Read, fb: Framebuffer, state: DecoderState) -> UpdateResult:
    """The body of one FramebufferUpdate (after its type byte), decoded into `fb`. `source` is the
    connection's `Input`, or a `read(n)` giving exactly n bytes (the update's bytes are then read exactly)."""
    inp = Input.of(source)
    left = struct.unpack(">xH", await inp.read(3))[0]
    result = UpdateResult()
    while left:
        # As many rectangles as are buffered, without an await between them; then wait for more.
        inp._mark = inp.pos
        try:
            while left:
                raw = _rect(inp, fb, state, result)
                left -= 1
                inp._mark = inp.pos
                if raw is not None:
                    break
        except _Short as short:
            inp.pos = inp._mark
            await inp._fill(short.needed)
            continue
        if raw is _LAST:
            break
        if raw is not None:  # a Raw rectangle too large to hold whole: a chunk at a time
            await _raw_chunks(inp, fb, *raw)  # type: ignore[misc]
    return result


_TIGHT = int(Encoding.TIGHT)  # a plain int: an enum member's lookup costs more than the comparison


def _rect(inp: Input, fb: Framebuffer, state: DecoderState, result: UpdateResult) -> object:
    """One rectangle, all at once; None when done, `_LAST`, or (x, y, width, height) of a large Raw one."""
    x, y, width, height, encoding = inp.unpack(_RECT)
    if encoding == _TIGHT:
        if x + width > fb.width or y + height > fb.height:
            fb.check(x, y, width, height, "TIGHT")
        _tight(inp, fb, state, x, y, width, height)
        result.rects += 1
        result.pixels += width * height
        return None
    result.rects += 1
    if encoding == Encoding.LAST_RECT:
        return _LAST
    if encoding == Encoding.DESKTOP_SIZE:
        with fb.lock:
            fb.resize(width, height)
        result.resized = True
        return None
    if encoding == Encoding.EXTENDED_DESKTOP_SIZE:
        count = inp.unpack(_U32)[0] >> 24
        raw = inp.take(16 * count)
        screens = tuple(Screen(*struct.unpack_from(">IHHHHI", raw, 16 * i)) for i in range(count))
        result.extended_size, result.size_reason, result.size_status = True, x, y
        result.screens = screens
        if y == 0:  # a refused SetDesktopSize repeats the current size, which needs no new buffer
            with fb.lock:
                fb.resize(width, height)
            result.resized = True
        return None
    if encoding == Encoding.CURSOR:
        result.cursor = _cursor(inp, x, y, width, height)
        return None
    fb.check(x, y, width, height, _name(encoding))
    if encoding == Encoding.RAW:
        if width * height * 4 > RAW_CHUNK:
            result.pixels += width * height
            return (x, y, width, height)
        data = inp.take(width * height * 4)
        with fb.lock:
            fb.put_bgrx(x, y, width, height, data)
    elif encoding == Encoding.COPY_RECT:
        src_x, src_y = inp.unpack(_COPY)
        fb.check(src_x, src_y, width, height, "CopyRect source")
        with fb.lock:
            fb.copy(x, y, width, height, src_x, src_y)
    elif encoding == Encoding.ZRLE:
        _zrle(inp, fb, state, x, y, width, height)
    else:
        raise RfbUnsupported(f"the VNC server sent encoding {encoding}, which was not asked for")
    result.pixels += width * height
    return None



def _name(encoding: int) -> str:
    try:
        return Encoding(encoding).name
    except ValueError:
        return f"encoding {encoding}"


async def _raw_chunks(inp: Input, fb: Framebuffer, x: int, y: int, width: int, height: int) -> None:
    rows = max(1, RAW_CHUNK // (width * 4))
    for top in range(y, y + height, rows):
        n = min(rows, y + height - top)
        data = await inp.read(n * width * 4)
        with fb.lock:
            fb.put_bgrx(x, top, width, n, data)


def _cursor(inp: Input, hot_x: int, hot_y: int, width: int, height: int) -> CursorShape:
    if width > MAX_CURSOR_SIDE or height > MAX_CURSOR_SIDE:
        raise RfbLimitExceeded("cursor", f"{width}x{height} is over {MAX_CURSOR_SIDE} pixels a side")
    pixels = inp.take(width * height * 4)
    row = (width + 7) // 8
    mask = inp.take(row * height)
    if width == 0 or height == 0:
        return CursorShape(0, 0, 0, 0, b"")
    bgra = np.frombuffer(pixels, dtype=np.uint8).reshape(height, width, 4).copy()
    bits = np.unpackbits(np.frombuffer(mask, dtype=np.uint8).reshape(height, row), axis=1)[:, :width]
    bgra[:, :, 3] = bits * 0xFF
    return CursorShape(width, height, min(hot_x, width - 1), min(hot_y, height - 1), bgra.tobytes())


# -- ZRLE ------------------------------------------------------------------------------------------------


def _zrle(inp: Input, fb: Framebuffer, state: DecoderState, x: int, y: int, width: int, height: int) -> None:
    length = inp.unpack(_U32)[0]
    tiles = -(-width // TILE) * -(-height // TILE)
    # The most a rectangle's tile data can be: every tile raw or palette-RLE with one run byte per pixel.
    most = tiles * (1 + 127 * 3) + width * height * 5
    if length > min(MAX_COMPRESSED, most + most // 100 + 1024):
        raise RfbLimitExceeded("ZRLE rectangle", f"{length} bytes of data for {width}x{height} pixels")
    data = inflate(state.zrle, inp.take(length), most, "ZRLE")
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
MAX_GRADIENT_PIXELS = 1 << 20  # the gradient filter is undone a diagonal at a time: servers use it on small rects


MAX_PALETTES = 1024  # Tight palettes kept as words


def _palette_words(rgb: bytes, colours: int) -> npt.NDArray[np.uint32]:
    """Tight's palette (R, G, B a colour) as framebuffer words."""
    bgrx = bytearray(b"\xff" * (4 * colours))
    bgrx[0::4], bgrx[1::4], bgrx[2::4] = rgb[2::3], rgb[1::3], rgb[0::3]
    return np.frombuffer(bytes(bgrx), dtype="<u4")


def _tight(inp: Input, fb: Framebuffer, state: DecoderState, x: int, y: int, width: int, height: int) -> None:
    # The hot path of a desktop's updates (a hundred small rectangles each): the buffer is read in place,
    # each length checked against what has arrived (`short`) before anything changes.
    buf, pos = inp.buf, inp.pos
    have = len(buf)
    if pos >= have:
        raise inp._short(pos + 1)
    control = buf[pos]
    pos += 1
    kind = control >> 4
    if kind == TIGHT_FILL:
        if pos + 3 > have:
            raise inp._short(pos + 3)
        r, g, b = buf[pos:pos + 3]
        inp.pos = pos + 3
        _reset(state, control)
        with fb.lock:
            fb.fill(x, y, width, height, (b, g, r))
        return
    if kind == TIGHT_JPEG:
        inp.pos = pos
        jpeg = inp.take(inp.compact_length())
        _reset(state, control)
        if state.jpeg is None:
            raise RfbUnsupported("the VNC server sent JPEG, and this client has no JPEG decoder")
        try:
            pixels = state.jpeg(bytes(jpeg), width, height)
        except ValueError as exc:
            raise RfbLimitExceeded("Tight JPEG rectangle", str(exc)[:200]) from None
        with fb.lock:
            fb.put_bgrx(x, y, width, height, pixels)
        return
    if kind > TIGHT_JPEG or kind & 0x08:
        raise RfbLimitExceeded("Tight rectangle", f"unknown compression control {control:#04x}")
    filter_id = FILTER_COPY
    if kind & 0x04:
        if pos >= have:
            raise inp._short(pos + 1)
        filter_id = buf[pos]
        pos += 1
    palette: npt.NDArray[np.uint32] | None = None
    if filter_id == FILTER_PALETTE:
        if pos >= have:
            raise inp._short(pos + 1)
        colours = buf[pos] + 1
        pos += 1
        if pos + 3 * colours > have:
            raise inp._short(pos + 3 * colours)
        key = bytes(buf[pos:pos + 3 * colours])
        pos += 3 * colours
        palette = state.palettes.get(key)
        if palette is None:
            if len(state.palettes) >= MAX_PALETTES:
                state.palettes.clear()
            palette = state.palettes[key] = _palette_words(key, colours)
        size = (width + 7) // 8 * height if colours == 2 else width * height
    elif filter_id in (FILTER_COPY, FILTER_GRADIENT):
        size = width * height * 3
    else:
        raise RfbLimitExceeded("Tight rectangle", f"unknown filter {filter_id}")
    inp.pos = pos
    if size < 12:
        data: bytes | bytearray = inp.take(size)
        _reset(state, control)
    else:
        compressed = inp.take(inp.compact_length())
        _reset(state, control)
        data = inflate(state.tight[kind & 0x03], compressed, size, "Tight")
    if len(data) != size:
        raise RfbLimitExceeded("Tight rectangle", f"{len(data)} bytes of pixels where {size} were due")
    if width == 0 or height == 0:
        return
    if palette is not None:
        packed = np.frombuffer(data, dtype=np.uint8)
        if len(palette) == 2:
            indices = np.unpackbits(packed.reshape(height, (width + 7) // 8), axis=1, count=width)
        else:
            indices = packed.reshape(height, width)
        try:
            words = palette.take(indices)
        except IndexError:
            raise RfbLimitExceeded("Tight rectangle", f"a palette index past its {len(palette)} colours") from None
        with fb.lock:
            fb.words[y:y + height, x:x + width] = words
            fb.mark(x, y, width, height)
    elif filter_id == FILTER_GRADIENT:
        rgb = _ungradient(data, width, height)
        with fb.lock:
            fb.put_rgb(x, y, width, height, rgb)
    else:
        with fb.lock:
            fb.put_rgb(x, y, width, height, data)


def _reset(state: DecoderState, control: int) -> None:
    """Tight's control byte: its low four bits reset the zlib streams (done once the rectangle is all here)."""
    if control & 0x0F:
        for i in range(4):
            if control & (1 << i):
                state.tight[i] = zlib.decompressobj()


def _ungradient(data: bytes | bytearray, width: int, height: int) -> bytes:
    """Undo Tight's gradient filter: each pixel was sent as its difference from left + above - above-left
    (clamped to 0..255), where those neighbours are the pixels already undone. A pixel needs only the
    diagonals before its own (row + column), so each diagonal is undone at once."""
    if width * height > MAX_GRADIENT_PIXELS:
        raise RfbLimitExceeded("Tight rectangle", f"a gradient-filtered {width}x{height} rectangle is too large")
    diff = np.frombuffer(data, dtype=np.uint8).reshape(height, width, 3).astype(np.int16)
    out = np.zeros((height + 1, width + 1, 3), dtype=np.int16)  # a zero row and column before the pixels
    for d in range(height + width - 1):
        rows = np.arange(max(0, d - width + 1), min(height, d + 1))
        cols = d - rows
        predicted = np.clip(out[rows, cols + 1] + out[rows + 1, cols] - out[rows, cols], 0, 255)
        out[rows + 1, cols + 1] = (diff[rows, cols] + predicted) & 0xFF
    return out[1:, 1:].astype(np.uint8).tobytes()
