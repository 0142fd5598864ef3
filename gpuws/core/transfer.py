"""What a copy between this computer and a host decides, with no network: which files to skip, which
to resume, which names are unsafe, and the progress event both front ends show.

The transfers themselves are `gpuws.remote.files`; `gpuws.app.files` is where front ends start.

A finished file always gets its source's modification time (to the second, SFTP's resolution):
that is how the next copy of the same tree knows the file is complete and identical (same size and
time) and skips it, while a partial file left by an interrupted copy (smaller, today's time) is
continued from its end. `-p` keeps the permission modes and access times as well.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from gpuws.core.errors import GpuwsError
from gpuws.core.terminal import printable


class TransferError(GpuwsError):
    """A file could not be copied (missing, no permission, no space, size mismatch, link lost)."""


class EntryKind(enum.Enum):
    """What a copied entry is; symlinks are copied as links, never followed."""

    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"


class Action(enum.Enum):
    """What a copy does with one file."""

    COPY = "copy"  # from the start
    RESUME = "resume"  # the destination is a prefix: continue from its end
    SKIP = "skip"  # already identical


@dataclass(frozen=True)
class EntryState:
    """An entry as one side sees it (lstat): kind, size, times in whole seconds, permission bits."""

    kind: EntryKind
    size: int = 0
    mtime: int = 0
    atime: int = 0
    mode: int = 0o644
    link: str = ""  # a symlink's target, as stored


def decide(source: EntryState, dest: EntryState | None, *, resume: bool = True,
           same_content: bool | None = None) -> tuple[Action, int]:
    """(what to do, the offset to start at) for a file `source` whose destination is `dest`.

    `same_content` is the --checksum answer for a destination of the same size (None: not asked).
    """
    if dest is None or dest.kind is not EntryKind.FILE:
        return Action.COPY, 0
    if dest.size == source.size:
        if same_content is not None:
            return (Action.SKIP, source.size) if same_content else (Action.COPY, 0)
        if dest.mtime == source.mtime:
            return Action.SKIP, source.size
        return Action.COPY, 0
    if resume and dest.size < source.size:
        return Action.RESUME, dest.size
    return Action.COPY, 0


def unsafe_name(name: str) -> str | None:
    """Why `name` (one entry of a directory listing) cannot be used as a file name, or None.

    A listing from a hostile host may name "..", ".", "" or a path with "/" in it: used as is, any
    of them would write outside the destination folder."""
    if name in ("", ".", ".."):
        return f"the name {name!r} is not a file name"
    if "/" in name or "\0" in name:
        return "the name holds '/' or a NUL byte"
    return None


def shown_path(path: str, limit: int = 160) -> str:
    """`path` for a message: control characters escaped (a newline in a name stays on one line) and a
    long path cut in the middle, with its length in bytes."""
    text = printable(path)
    if len(text) <= limit:
        return text
    half = (limit - 1) // 2
    size = len(path.encode("utf-8", "surrogateescape"))
    return f"{text[:half]}\u2026{text[-half:]} ({size} bytes)"


@dataclass(frozen=True)
class TransferProgress:
    """One progress report of a running copy (the service sends them; front ends draw them)."""

    file: str  # the file being copied, as the user named it (not escaped: front ends do that)
    file_index: int  # 1-based: file N ...
    file_count: int  # ... of M (the files this copy transfers)
    file_done: int  # bytes of this file that are in place (a resumed prefix included)
    file_size: int
    done: int  # bytes of the whole copy in place
    total: int
    elapsed: float  # seconds since the copy started
    rate: float  # bytes per second over the last few seconds
    eta: float | None  # seconds left at that rate; None until there is a rate

    @property
    def fraction(self) -> float:
        """Share of the copy's bytes in place, 0..1."""
        return self.done / self.total if self.total else 1.0

    def to_dict(self) -> dict[str, object]:
        """The JSON line `gpuws cp --json` prints."""
        return {"event": "progress", "file": self.file, "file_index": self.file_index,
                "file_count": self.file_count, "file_done": self.file_done, "file_size": self.file_size,
                "done": self.done, "total": self.total, "elapsed": round(self.elapsed, 3),
                "rate": round(self.rate), "eta": None if self.eta is None else round(self.eta, 1)}


ProgressCallback = Callable[[TransferProgress], None]

RATE_WINDOW_S = 5.0  # the rate is over this much recent time, so it follows a link that changes speed


class ProgressMeter:
    """Counts a copy's bytes and sends `TransferProgress` to `callback` (every call: front ends
    throttle what they draw)."""

    def __init__(self, callback: ProgressCallback | None, *, total: int, file_count: int,
                 already: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        self._callback = callback
        self.total = total
        self.file_count = file_count
        self.done = already
        self._clock = clock
        self._start = clock()
        self._moved = 0  # bytes sent by this copy: the rate counts only these, never a kept prefix
        self._samples: deque[tuple[float, int]] = deque([(self._start, 0)])
        self._file = ""
        self._index = 0
        self._file_done = 0
        self._file_size = 0

    def start_file(self, name: str, size: int, offset: int) -> None:
        """A file starts (at `offset`, its resumed prefix, which counts as done)."""
        self._index += 1
        self._file, self._file_size, self._file_done = name, size, offset
        self.done += offset
        self._emit()

    def advance(self, count: int) -> None:
        """`count` more bytes of the current file are in place."""
        self.done += count
        self._moved += count
        self._file_done += count
        self._emit()

    def skip(self, size: int) -> None:
        """A file of `size` bytes needs nothing (identical): it counts as done."""
        self.done += size

    def _emit(self) -> None:
        if self._callback is None:
            return
        now = self._clock()
        self._samples.append((now, self._moved))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW_S:
            self._samples.popleft()
        t0, d0 = self._samples[0]
        rate = (self._moved - d0) / (now - t0) if now > t0 else 0.0
        left = max(0, self.total - self.done)
        eta = left / rate if rate > 0 else (0.0 if left == 0 else None)
        self._callback(TransferProgress(
            self._file, self._index, self.file_count, self._file_done, self._file_size, self.done, self.total,
            now - self._start, rate, eta))


def rate_text(rate: float) -> str:
    """A transfer rate as people read it: '118 MB/s'."""
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if rate >= scale:
            return f"{rate / scale:.3g} {unit}"
    return f"{rate:.0f} B/s"


def eta_text(seconds: float | None) -> str:
    """Time left as 'h:mm:ss' or 'm:ss'; '--:--' when unknown."""
    if seconds is None:
        return "--:--"
    whole = int(seconds + 0.5)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def size_text(size: float) -> str:
    """A byte count in B, KiB, MiB, GiB or TiB."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
