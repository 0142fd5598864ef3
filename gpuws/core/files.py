"""Reading the local files gpuws trusts (profiles, ssh_config and its Includes, known_hosts), bounded.

A file that is not a regular file (a FIFO, a device such as `/dev/zero` behind a symlink) or that
is larger than its cap is refused with a message before a byte is read, so no config file can
make gpuws read until the machine runs out of memory or block forever on a pipe.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpuws.core.errors import GpuwsError


class LocalFileRefused(GpuwsError):
    """A local file gpuws was asked to read is not a regular file, or is too large."""


def read_regular_file(path: Path, max_bytes: int, *, what: str = "file") -> bytes:
    """The bytes of `path` if it is a regular file of at most `max_bytes`.

    Raises FileNotFoundError when it does not exist (callers decide what absence means) and
    LocalFileRefused for anything else that cannot be read safely.
    """
    try:
        # O_NONBLOCK so opening a FIFO does not wait for a writer; fstat decides on the opened file.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise LocalFileRefused(f"cannot read {what} {_shown(path)}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LocalFileRefused(f"{what} {_shown(path)} is not a regular file; not read")
        if info.st_size > max_bytes:
            raise LocalFileRefused(
                f"{what} {_shown(path)} is {info.st_size} bytes, more than the {max_bytes} allowed; not read"
            )
        chunks: list[bytes] = []
        size = 0
        # Read at most one byte past the cap: a file that grows while we read is refused too.
        while chunk := os.read(fd, min(1 << 20, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise LocalFileRefused(f"{what} {_shown(path)} is larger than the {max_bytes} bytes allowed; not read")
        return b"".join(chunks)
    except OSError as exc:
        raise LocalFileRefused(f"cannot read {what} {_shown(path)}: {exc.strerror}") from None
    finally:
        os.close(fd)


def is_regular_file(path: Path) -> bool:
    """`Path.is_file()` that is False, not an exception, for any path the OS refuses to look at
    (a component longer than NAME_MAX, a symlink loop, no permission)."""
    try:
        return path.is_file()
    except (OSError, RuntimeError, ValueError):
        return False


def _shown(path: Path) -> str:
    # A path may hold any bytes (surrogate escapes); show it printable, on one line.
    from gpuws.core.terminal import printable

    return printable(os.fsdecode(path))
