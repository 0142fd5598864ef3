"""The one byte budget for output read from a remote party (a host's commands, a Prometheus).

Each connection (an `SshRunner`, a `PrometheusClient`) owns one `OutputBudget`: every read takes
its bytes from it as they arrive and gives them back when the reader is done with them, so the
bytes held at once from one remote party stay under the cap whatever reads run concurrently,
and a reader stops (with an error naming who sent what) the moment the cap would be passed,
before the bytes are kept.
"""

from __future__ import annotations

from typing import Final

DEFAULT_MAX_OUTPUT: Final = 64 * 1024 * 1024  # bytes held at once from one remote party
DEFAULT_MAX_LINE: Final = 1024 * 1024  # bytes of one streamed line


class OutputBudget:
    """The bytes of remote output one connection may hold at once, shared by all its reads."""

    def __init__(self, limit: int = DEFAULT_MAX_OUTPUT) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        """Reserve `size` more bytes; False (and nothing reserved) when that would pass the limit."""
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Return bytes reserved with `take`."""
        self.held = max(0, self.held - size)


def size_text(size: int) -> str:
    """A cap for people: "64 MiB", or "65536 bytes" below one MiB."""
    return f"{size // (1024 * 1024)} MiB" if size >= 1024 * 1024 else f"{size} bytes"
