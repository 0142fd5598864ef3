"""An interactive terminal on the host: a command under a pseudo-terminal, over the host's connection."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import asyncssh

from gpuws.core.desktop import DesktopError
from gpuws.remote.connection import HostConnection

TerminalProcess = asyncssh.SSHClientProcess[bytes]


async def open_terminal(connection: HostConnection, argv: Sequence[str] | None, term_type: str,
                        size: tuple[int, int], timeout: float = 60.0) -> TerminalProcess:
    """Start `argv` (None: the login shell) with a pseudo-terminal of `size` (columns, rows)."""
    ssh = await connection.ssh(timeout)
    try:
        return await ssh.create_process(shlex.join(argv) if argv else None, term_type=term_type,
                                        term_size=size, encoding=None)
    except (asyncssh.ChannelOpenError, asyncssh.Error) as exc:
        raise DesktopError(f"shell: cannot open a terminal on {connection.profile.name}: {exc}") from None


def lost(process: TerminalProcess) -> bool:
    """True when the terminal ended without an exit status: the connection went away under it."""
    return process.exit_status is None and process.exit_signal is None


def resize(process: TerminalProcess, size: tuple[int, int]) -> None:
    """Tell the host the local terminal's new size (columns, rows)."""
    process.change_terminal_size(*size)
