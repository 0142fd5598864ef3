"""The RFB decoders on real bytes from TigerVNC's Xvnc (tests/fixtures/rfb, made by its record.py), and
on the bad input a hostile server could send."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from gpuws.core.rfb import protocol as p
from gpuws.core.rfb.decoders import DecoderState, Input, UpdateResult, read_update
from gpuws.core.rfb.errors import RfbClosed, RfbLimitExceeded, RfbUnsupported
from gpuws.core.rfb.framebuffer import Framebuffer, check_size

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rfb"
CAPTURES = json.loads((FIXTURES / "captures.json").read_text())
BLUE_BGR = (0xCC, 0x66, 0x33)  # xsetroot -solid '#3366cc' behind the windows


def _reader(data: bytes) -> tuple[io.BytesIO, object]:
    stream = io.BytesIO(data)

    async def read(n: int) -> bytes:
        chunk = stream.read(n)
        if len(chunk) != n:
            raise RfbClosed("the test's bytes")
        return chunk

    return stream, read


def _pil_jpeg(data: bytes, width: int, height: int) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        if image.size != (width, height):
            raise ValueError(f"a {image.size} JPEG in a {width}x{height} rectangle")
        return image.convert("RGB").tobytes("raw", "BGRX")


def _replay(name: str) -> tuple[Framebuffer, list[UpdateResult]]:
    meta = CAPTURES[name]
    fb = Framebuffer(meta["width"], meta["height"])
    stream, read = _reader(gzip.decompress((FIXTURES / f"{name}.rfb.gz").read_bytes()))
    state = DecoderState(jpeg=_pil_jpeg)
    results = []

    async def run() -> None:
        while stream.tell() < meta["bytes"]:
            assert (await read(1)) == b"\x00"  # type: ignore[operator]
            results.append(await read_update(read, fb, state))  # type: ignore[arg-type]

    asyncio.run(run())
    return fb, results


def test_lossless_encodings_of_one_screen_decode_to_the_same_pixels() -> None:
    raw, raw_results = _replay("raw")
    assert raw.pixels[700, 1000, :3].tolist() == list(BLUE_BGR)
    assert raw_results[0].extended_size and raw_results[0].size_status == 0
    # The tk gradient at +420+300: its top-left pixel is black-ish, bottom-right bright (not the background).
    assert raw.pixels[400, 600, :3].tolist() != list(BLUE_BGR)
    for name in ("zrle", "tight-lossless"):
        fb, results = _replay(name)
        assert sum(r.pixels for r in results) >= fb.width * fb.height
        differ = np.argwhere((fb.pixels != raw.pixels).any(axis=2))
        assert len(differ) == 0, f"{name}: {len(differ)} pixels differ from Raw, first at {differ[:3].tolist()}"


def test_tight_jpeg_is_close_to_the_raw_pixels() -> None:
    raw, _ = _replay("raw")
    fb, _ = _replay("tight-jpeg")
    diff = np.abs(fb.pixels[:, :, :3].astype(int) - raw.pixels[:, :, :3].astype(int))
    assert diff.mean() < 2.0 and np.percentile(diff, 99) < 40
    assert (fb.pixels[:, :, 3] == 0xFF).all()


def test_a_cut_capture_is_a_clear_error() -> None:
    data = gzip.decompress((FIXTURES / "zrle.rfb.gz").read_bytes())
    _, read = _reader(data[: len(data) // 2])
    fb = Framebuffer(CAPTURES["zrle"]["width"], CAPTURES["zrle"]["height"])

    async def run() -> None:
        while True:
            await read(1)  # type: ignore[operator]
            await read_update(read, fb, DecoderState())  # type: ignore[arg-type]

    with pytest.raises(RfbClosed):
        asyncio.run(run())


def _decode(body: bytes, fb: Framebuffer | None = None, state: DecoderState | None = None) -> UpdateResult:
    _, read = _reader(body)
    return asyncio.run(read_update(read, fb or Framebuffer(64, 64), state or DecoderState()))  # type: ignore[arg-type]


def _rect(x: int, y: int, w: int, h: int, encoding: int, payload: bytes, count: int = 1) -> bytes:
    return struct.pack(">xH", count) + struct.pack(">HHHHi", x, y, w, h, encoding) + payload


def test_a_rectangle_outside_the_framebuffer_is_refused_before_reading_its_pixels() -> None:
    with pytest.raises(RfbLimitExceeded, match=r"RAW rectangle.*65535x65535 at 0,0 is outside the 64x64"):
        _decode(_rect(0, 0, 65535, 65535, p.Encoding.RAW, b""))
    with pytest.raises(RfbLimitExceeded, match="CopyRect source"):
        _decode(_rect(0, 0, 32, 32, p.Encoding.COPY_RECT, struct.pack(">HH", 60, 60)))


def test_a_4_gib_framebuffer_is_refused_before_allocating() -> None:
    with pytest.raises(RfbLimitExceeded, match=r"framebuffer size.*32768x32768"):
        check_size(32768, 32768)
    with pytest.raises(RfbLimitExceeded, match="budget"):
        _decode(_rect(0, 0, 16384, 16384, p.Encoding.DESKTOP_SIZE, b""))
    assert check_size(3840, 2160) is None


def test_an_unknown_encoding_is_a_typed_error() -> None:
    with pytest.raises(RfbUnsupported, match="encoding 1234"):
        _decode(_rect(0, 0, 8, 8, 1234, b"\0" * 256))


def test_a_zlib_bomb_stops_at_the_rectangles_budget() -> None:
    bomb = zlib.compress(b"\0" * (64 * 1024 * 1024), 9)  # 64 MiB of zeros in ~64 KiB
    payload = struct.pack(">I", len(bomb)) + bomb
    with pytest.raises(RfbLimitExceeded, match=r"ZRLE zlib data.*budget"):
        _decode(_rect(0, 0, 512, 512, p.Encoding.ZRLE, payload), Framebuffer(512, 512))
    # Tight: a copy-filter rectangle of 4x4 pixels owes 48 bytes; a stream that inflates past that stops.
    tight = bytes([0x00]) + bytes([0x80 | (len(bomb) & 0x7F), 0x80 | ((len(bomb) >> 7) & 0x7F), len(bomb) >> 14])
    with pytest.raises(RfbLimitExceeded, match=r"Tight zlib data.*budget"):
        _decode(_rect(0, 0, 4, 4, p.Encoding.TIGHT, tight + bomb))


def test_zrle_tiles_that_lie_are_errors() -> None:
    for tile, match in ((bytes([1, 1, 2]), "ends inside a tile"),          # a solid tile cut short
                        (bytes([129]), "unknown subencoding 129"),
                        (bytes([130]) + b"\1\2\3\4\5\6" + bytes([0x85, 0]), "palette index")):
        data = zlib.compress(tile)
        with pytest.raises(RfbLimitExceeded, match=match):
            _decode(_rect(0, 0, 4, 4, p.Encoding.ZRLE, struct.pack(">I", len(data)) + data))


def test_cursor_and_tight_fill_and_palette() -> None:
    fb = Framebuffer(16, 16)
    cursor = bytes(range(4)) * 4 + bytes([0b1000_0000, 0b0100_0000])  # 2x2, one bit set per row
    fill = bytes([0x80, 0x11, 0x22, 0x33])
    palette = bytes([0x40, 0x01, 0x01, 0xFF, 0, 0, 0, 0xFF, 0, 0b1010_0000])  # red, green; 1 bit per pixel
    body = struct.pack(">xH", 3)
    body += struct.pack(">HHHHi", 1, 0, 2, 2, p.Encoding.CURSOR) + cursor
    body += struct.pack(">HHHHi", 0, 0, 4, 4, p.Encoding.TIGHT) + fill
    body += struct.pack(">HHHHi", 8, 8, 3, 1, p.Encoding.TIGHT) + palette
    result = _decode(body, fb)
    assert result.cursor is not None and (result.cursor.width, result.cursor.hot_x) == (2, 1)
    assert result.cursor.bgra[3] == 0xFF and result.cursor.bgra[7] == 0
    assert fb.pixels[3, 3, :3].tolist() == [0x33, 0x22, 0x11]
    assert [fb.pixels[8, x, :3].tolist() for x in (8, 9, 10)] == [[0, 0xFF, 0], [0, 0, 0xFF], [0, 0xFF, 0]]


def _replay_in_pieces(name: str, seed: int) -> Framebuffer:
    """A capture through `Input`, its bytes handed over in pieces of random sizes (1 byte to 64 KiB)."""
    import random

    data = gzip.decompress((FIXTURES / f"{name}.rfb.gz").read_bytes())
    pieces = random.Random(seed)
    at = 0

    async def fetch(_n: int) -> bytes:
        nonlocal at
        if at >= len(data):
            raise RfbClosed("the test's bytes")
        size = pieces.choice((1, 2, 3, 7, 13, 100, 1500, 65536))
        at += size
        return data[at - size:at]

    fb = Framebuffer(CAPTURES[name]["width"], CAPTURES[name]["height"])
    state = DecoderState(jpeg=_pil_jpeg)
    inp = Input(fetch)

    async def run() -> None:
        while at < len(data) or inp.buffered:
            assert (await inp.read(1)) == b"\x00"
            await read_update(inp, fb, state)

    asyncio.run(run())
    return fb


def test_bytes_arriving_in_any_pieces_decode_to_the_same_pixels() -> None:
    """The socket hands the decoders whatever has arrived: a rectangle cut anywhere (inside its header, its
    palette, its zlib data) is parsed again once the rest is there, and its zlib stream inflated once."""
    for seed, name in enumerate(("tight-lossless", "zrle", "tight-jpeg")):
        whole, _ = _replay(name)
        assert (_replay_in_pieces(name, seed).pixels == whole.pixels).all(), name


def _gradient_filtered(rgb: np.ndarray) -> bytes:
    """Tight's gradient filter as a server applies it: each pixel less left + above - above-left (clamped)."""
    h, w, _ = rgb.shape
    pixels = rgb.astype(int)
    out = np.zeros_like(pixels)
    for y in range(h):
        for x in range(w):
            left = pixels[y, x - 1] if x else 0
            above = pixels[y - 1, x] if y else 0
            corner = pixels[y - 1, x - 1] if x and y else 0
            out[y, x] = (pixels[y, x] - np.clip(left + above - corner, 0, 255)) & 0xFF
    return out.astype(np.uint8).tobytes()


def test_tight_gradient_filter_and_a_palette_index_past_its_colours() -> None:
    rgb = np.random.default_rng(7).integers(0, 256, (9, 13, 3), dtype=np.uint8)
    packed = zlib.compress(_gradient_filtered(rgb))
    length = bytes([0x80 | (len(packed) & 0x7F), len(packed) >> 7])
    body = _rect(2, 3, 13, 9, p.Encoding.TIGHT, bytes([0x40, 2]) + length + packed)  # stream 0, filter 2
    fb = Framebuffer(32, 32)
    _decode(body, fb)
    assert (fb.pixels[3:12, 2:15, 2::-1] == rgb).all()  # R, G, B sent; B, G, R, X in the framebuffer
    assert (fb.pixels[3:12, 2:15, 3] == 0xFF).all()
    # A palette of 3 colours, and an index 5 among its 16 pixels (one byte each, compressed).
    indices = zlib.compress(bytes([0, 1, 2, 5] * 4))
    palette = bytes([0x40, 1, 2]) + bytes(range(9))
    with pytest.raises(RfbLimitExceeded, match="palette index past its 3 colours"):
        _decode(_rect(0, 0, 4, 4, p.Encoding.TIGHT, palette + bytes([len(indices)]) + indices))
