"""The one reader of local files gpuws is given (profiles, ssh_config and its Includes, known_hosts,
mig-parted configs, any file a command takes as a path), bounded.

A file that is not a regular file (a FIFO, a device such as `/dev/zero` behind a symlink) or that
is larger than its cap is refused with a message before a byte is read, so no config file can
make gpuws read until the machine runs out of memory or block forever on a pipe.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpuws.core.errors import RefusedInput


class LocalFileRefused(RefusedInput):
    """A local file gpuws was asked to read is missing, not a regular file, too large or not text."""


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
    except ValueError:  # a NUL byte: no file has such a name
        raise LocalFileRefused(f"{what} {_shown(path)} is not a usable path") from None
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


def read_text_file(path: Path, max_bytes: int, *, what: str = "file") -> str:
    """The UTF-8 text of `path` (a regular file of at most `max_bytes`); LocalFileRefused says why not,
    a missing file included."""
    try:
        data = read_regular_file(path, max_bytes, what=what)
    except FileNotFoundError:
        raise LocalFileRefused(f"{what} {_shown(path)} does not exist") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise LocalFileRefused(f"{what} {_shown(path)} is not UTF-8 text; not read") from None


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
