"""The one byte budget for output read from a remote party (a host's commands, a Prometheus).

Each connection (an `SshRunner`, a `PrometheusClient`) owns one `OutputBudget`: every read takes
its bytes from it as they arrive and gives them back when the reader is done with them, so the
bytes held at once from one remote party stay under the cap whatever reads run concurrently,
and a reader stops (with an error naming who sent what) the moment the cap would be passed,
before the bytes are kept.

A single command whose answer is known to be small (`nvidia-smi -q -x`, a `--query-gpu` line per
GPU) reads under a tighter cap, a child budget that also draws on its connection's: a flooding
host then costs the client a few MiB per read rather than the whole connection budget, which the
allocator may keep after the read (freed buffers are reused, not always returned to the system).
"""

from __future__ import annotations

from typing import Final

DEFAULT_MAX_OUTPUT: Final = 64 * 1024 * 1024  # bytes held at once from one remote party
DEFAULT_MAX_LINE: Final = 1024 * 1024  # bytes of one streamed line
# A one-shot nvidia-smi answer (`-q -x`, `--query-gpu`, the inventory probe around them): a real
# 8-GPU `-q -x` is well under 1 MiB.
SMALL_ANSWER: Final = 4 * 1024 * 1024


class OutputBudget:
    """The bytes of remote output one connection may hold at once, shared by all its reads."""

    def __init__(self, limit: int = DEFAULT_MAX_OUTPUT, parent: OutputBudget | None = None) -> None:
        self.limit = limit
        self.held = 0
        self.parent = parent  # a child budget (one command's) also takes from its connection's
        self.refused_by = limit  # the cap that refused the last `take`, for the error message

    def take(self, size: int) -> bool:
        """Reserve `size` more bytes; False (and nothing reserved) when that would pass the limit
        (this one's or its parent's)."""
        if self.held + size > self.limit:
            self.refused_by = self.limit
            return False
        if self.parent is not None and not self.parent.take(size):
            self.refused_by = self.parent.refused_by
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Return bytes reserved with `take` (to the parent too)."""
        size = min(size, self.held)
        self.held -= size
        if self.parent is not None:
            self.parent.give(size)

    def child(self, limit: int | None) -> OutputBudget:
        """A budget for one command: at most `limit` bytes, drawn from this one (itself when None)."""
        return self if limit is None else OutputBudget(min(limit, self.limit), parent=self)


def size_text(size: int) -> str:
    """A cap for people: "64 MiB", or "65536 bytes" below one MiB."""
    return f"{size // (1024 * 1024)} MiB" if size >= 1024 * 1024 else f"{size} bytes"
