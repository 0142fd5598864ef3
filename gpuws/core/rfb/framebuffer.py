"""The client's copy of the remote screen: B, G, R, X bytes per pixel (Qt's Format_RGB32), bounded.

The decoder thread writes under `lock`; the painter reads under it and takes the changed region
with `take_dirty`, so updates arriving faster than the screen repaints are coalesced into one paint.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuws.core.rfb.errors import RfbLimitExceeded

MAX_SIDE = 16384  # pixels, either way: more than any real screen
MAX_BYTES = 256 * 1024 * 1024  # the framebuffer's memory budget (8192x8192, or 4 x 4K)


@dataclass(frozen=True)
class Rect:
    """A rectangle in framebuffer pixels."""

    x: int
    y: int
    width: int
    height: int


def check_size(width: int, height: int) -> None:
    """Refuse a framebuffer size over the bounds (a hostile server's 4 GiB screen) before allocating."""
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
        raise RfbLimitExceeded("framebuffer size", f"{width}x{height} is outside 1..{MAX_SIDE} pixels a side")
    if width * height * 4 > MAX_BYTES:
        raise RfbLimitExceeded("framebuffer size", f"{width}x{height} needs {width * height * 4 >> 20} MiB, "
                               f"over the {MAX_BYTES >> 20} MiB budget")


OPAQUE = 0xFF000000  # Format_RGB32 wants the unused byte at 0xFF


def _black(width: int, height: int) -> npt.NDArray[np.uint8]:
    pixels = np.empty((height, width, 4), dtype=np.uint8)
    pixels.view("<u4")[:] = OPAQUE
    return pixels


def word(r: int, g: int, b: int) -> int:
    """One pixel as the 32-bit little-endian word of `Framebuffer.words`."""
    return OPAQUE | r << 16 | g << 8 | b


def _words(pixels: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """The same memory as one 32-bit word a pixel (X << 24 | R << 16 | G << 8 | B): a rectangle of one
    colour, or of palette colours, is one numpy assignment."""
    return pixels.view("<u4").reshape(pixels.shape[0], pixels.shape[1])


class Framebuffer:
    """The remote screen's pixels and what changed since the last paint."""

    def __init__(self, width: int, height: int) -> None:
        check_size(width, height)
        self.lock = threading.Lock()
        self.pixels: npt.NDArray[np.uint8] = _black(width, height)
        self.words = _words(self.pixels)
        self.width = width  # pixels (plain attributes: the decoders read them per rectangle)
        self.height = height
        self._dirty: tuple[int, int, int, int] | None = (0, 0, width, height)
        self.generation = 0  # counts resizes, so a painter knows its QImage is stale

    def resize(self, width: int, height: int) -> None:
        """A new size (DesktopSize): new black pixels, all of them dirty. Call with `lock` held."""
        check_size(width, height)
        if (width, height) != (self.width, self.height):
            self.pixels = _black(width, height)
            self.words = _words(self.pixels)
            self.width, self.height = width, height
            self.generation += 1
        self._dirty = (0, 0, width, height)

    def check(self, x: int, y: int, width: int, height: int, what: str) -> None:
        """Refuse a rectangle that is not inside the framebuffer."""
        if width < 0 or height < 0 or x + width > self.width or y + height > self.height:
            raise RfbLimitExceeded(f"{what} rectangle", f"{width}x{height} at {x},{y} is outside the "
                                   f"{self.width}x{self.height} framebuffer")

    def mark(self, x: int, y: int, width: int, height: int) -> None:
        """Add a rectangle to the region changed since the last paint."""
        if width <= 0 or height <= 0:
            return
        dirty = self._dirty
        if dirty is None:
            self._dirty = (x, y, x + width, y + height)
        else:
            x0, y0, x1, y1 = dirty
            right, bottom = x + width, y + height
            self._dirty = (x if x < x0 else x0, y if y < y0 else y0, right if right > x1 else x1,
                           bottom if bottom > y1 else y1)

    def take_dirty(self) -> Rect | None:
        """The region changed since the last call (one bounding rectangle), or None. Call with `lock` held."""
        dirty, self._dirty = self._dirty, None
        if dirty is None:
            return None
        return Rect(dirty[0], dirty[1], dirty[2] - dirty[0], dirty[3] - dirty[1])

    def put_bgrx(self, x: int, y: int, width: int, height: int, data: bytes | bytearray | memoryview) -> None:
        """Pixels already in the framebuffer's format (Raw, a decoded JPEG); the unused byte is set to 0xFF
        whatever the sender left there (one pass, in numpy)."""
        words = np.frombuffer(data, dtype="<u4", count=width * height).reshape(height, width)
        np.bitwise_or(words, OPAQUE, out=self.words[y:y + height, x:x + width])
        self.mark(x, y, width, height)

    def put_words(self, x: int, y: int, words: npt.NDArray[np.uint32]) -> None:
        """A (height, width) array of pixels as `words` (opaque)."""
        height, width = words.shape
        self.words[y:y + height, x:x + width] = words
        self.mark(x, y, width, height)

    def put_rgb(self, x: int, y: int, width: int, height: int, data: bytes | bytearray | memoryview) -> None:
        """Pixels as R, G, B bytes (Tight's TPIXEL)."""
        rgb = np.frombuffer(data, dtype=np.uint8).reshape(height, width, 3)
        self.pixels[y:y + height, x:x + width, :3] = rgb[:, :, ::-1]
        self.mark(x, y, width, height)

    def put_colours(self, x: int, y: int, colours: npt.NDArray[np.uint8]) -> None:
        """A (height, width, 3) array of B, G, R pixels."""
        height, width = colours.shape[0], colours.shape[1]
        self.pixels[y:y + height, x:x + width, :3] = colours
        self.mark(x, y, width, height)

    def fill(self, x: int, y: int, width: int, height: int, bgr: tuple[int, int, int]) -> None:
        """One colour over a rectangle."""
        self.words[y:y + height, x:x + width] = word(bgr[2], bgr[1], bgr[0])
        self.mark(x, y, width, height)

    def copy(self, x: int, y: int, width: int, height: int, src_x: int, src_y: int) -> None:
        """CopyRect: pixels from elsewhere on the screen (numpy copies overlapping slices correctly)."""
        self.words[y:y + height, x:x + width] = self.words[src_y:src_y + height, src_x:src_x + width].copy()
        self.mark(x, y, width, height)
