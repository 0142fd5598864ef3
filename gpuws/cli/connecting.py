"""What every host-connecting command shares: exit statuses by failure kind, and TTY prompts.

Scripts tell failures apart by exit status; `exit_code_for` is the one mapping, applied by
`gpuws.cli.main` to any error a command lets through.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
from collections.abc import Sequence
from typing import Any

EXIT_ERROR = 1
EXIT_AUTH = 3
EXIT_HOST_KEY = 4
EXIT_UNREACHABLE = 5
EXIT_NO_DRIVER = 6
EXIT_TIMEOUT = 7

EXIT_STATUS_HELP = (
    "exit status: 0 ok, 1 other error, 3 authentication failed, 4 unknown or changed host key, "
    "5 host unreachable, 6 no NVIDIA driver on the host, 7 timed out"
)


def exit_code_for(exc: BaseException) -> int:
    """The exit status for an error that ended a command."""
    # Imported here: a command that never connects should not pay for asyncssh.
    from gpuws.core.runner import CommandTimeout
    from gpuws.remote.auth import AuthFailed
    from gpuws.remote.connection import HostUnreachable, NotConnected
    from gpuws.remote.hostkeys import HostKeyChanged, HostKeyRevoked, UnknownHostKey
    from gpuws.remote.probe import NoDriverFound
    from gpuws.remote.telemetry import TelemetryStreamEnded

    kinds: tuple[tuple[tuple[type[BaseException], ...], int], ...] = (
        ((AuthFailed,), EXIT_AUTH),
        ((UnknownHostKey, HostKeyChanged, HostKeyRevoked), EXIT_HOST_KEY),
        ((HostUnreachable, NotConnected, TelemetryStreamEnded), EXIT_UNREACHABLE),
        ((NoDriverFound,), EXIT_NO_DRIVER),
        ((CommandTimeout, TimeoutError), EXIT_TIMEOUT),
    )
    for classes, code in kinds:
        if isinstance(exc, classes):
            return code
    return EXIT_ERROR


def tty_prompts() -> dict[str, Any]:
    """HostConnection options that ask on a terminal (host key, keyboard-interactive); none otherwise."""
    if sys.stdin.isatty() and sys.stderr.isatty():
        return {"confirm_host_key": ask_host_key, "kbdint_prompt": ask_kbdint}
    return {}


async def ask_host_key(question: object) -> bool:
    """OpenSSH's question on a TTY; only a typed "yes" trusts the key."""

    def ask() -> bool:
        print(question, file=sys.stderr)
        answer = input("Are you sure you want to continue connecting (yes/no)? ")
        return answer.strip().lower() == "yes"

    return await asyncio.to_thread(ask)


async def ask_kbdint(title: str, instructions: str, prompts: Sequence[tuple[str, bool]]) -> list[str]:
    """Keyboard-interactive prompts on a TTY (answers that should not echo are hidden)."""

    def ask() -> list[str]:
        print(title, file=sys.stderr)
        if instructions:
            print(instructions, file=sys.stderr)
        return [input(text) if echo else getpass.getpass(text) for text, echo in prompts]

    return await asyncio.to_thread(ask)
