"""What every host-connecting command shares: the exit-status table, `--accept-new`, TTY prompts.

Scripts tell failures apart by exit status; `exit_code_for` is the one mapping from error class
to status, applied only by `gpuws.cli.main` to any error a command lets through. Commands never
catch `GpuwsError` to pick a status themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from collections.abc import Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuws.core.resize.outcome import ResizeOutcome

class ExitStatus(IntEnum):
    """The one exit-status table of every `gpuws` command (documented in `gpuws --help`)."""

    OK = 0
    ERROR = 1  # any other error
    USAGE = 2  # usage or refused input (a bad value, an unknown profile, a refused confirmation)
    AUTH = 3  # authentication failed
    HOST_KEY = 4  # host key unknown, changed or revoked
    UNREACHABLE = 5  # unreachable, or the connection was lost past the reconnect timeout
    NO_DRIVER = 6  # no NVIDIA driver on the host
    TIMEOUT = 7  # a command on the host (or the connection) timed out
    RESIZE_REFUSED = 8  # resize refused by preflight: nothing changed
    RESIZE_ROLLED_BACK = 9  # resize failed and the verified previous layout is back
    RESIZE_ROLLBACK_FAILED = 10  # the rollback failed too: the host needs attention
    # Verdicts, not errors: a benchmark that ran and found a bad card, or could not decide. Kept
    # apart from 8/9 so a script never reads "a check failed" as "a resize was refused".
    CHECK_FAILED = 11  # `gpuws bench`: a check failed
    INCONCLUSIVE = 12  # `gpuws bench`: something could not be measured (never a pass)


# Kept for the commands that name them (the values are the table's).
EXIT_ERROR = ExitStatus.ERROR
EXIT_USAGE = ExitStatus.USAGE
EXIT_AUTH = ExitStatus.AUTH
EXIT_HOST_KEY = ExitStatus.HOST_KEY
EXIT_UNREACHABLE = ExitStatus.UNREACHABLE
EXIT_NO_DRIVER = ExitStatus.NO_DRIVER
EXIT_TIMEOUT = ExitStatus.TIMEOUT

EXIT_STATUS_HELP = (
    "exit status: 0 ok, 1 other error, 2 usage or refused input, 3 authentication failed, "
    "4 host key unknown/changed/revoked, 5 unreachable or connection lost past the reconnect timeout, "
    "6 no NVIDIA driver on the host, 7 timed out, 8 resize refused by preflight, "
    "9 resize rolled back to the verified previous layout, 10 resize rollback failed (host needs attention)"
)


def exit_code_for(exc: BaseException) -> ExitStatus:
    """The exit status for an error that ended a command (by class, never by message)."""
    # Imported here: a command that never connects should not pay for asyncssh.
    from gpuws.core.errors import ConnectionLost, NoNvidiaDriver, RefusedInput
    from gpuws.core.resize.layout import LayoutError
    from gpuws.core.runner import CommandTimeout
    from gpuws.remote.auth import AuthFailed
    from gpuws.remote.connection import HostUnreachable, JumpHostError, NotConnected
    from gpuws.remote.hostkeys import HostKeyChanged, HostKeyRevoked, UnknownHostKey
    from gpuws.remote.prometheus import PrometheusAuthFailed, PrometheusUnreachable
    from gpuws.remote.resize import ResizeRefused

    kinds: tuple[tuple[tuple[type[BaseException], ...], ExitStatus], ...] = (
        ((AuthFailed, PrometheusAuthFailed), ExitStatus.AUTH),
        ((UnknownHostKey, HostKeyChanged, HostKeyRevoked), ExitStatus.HOST_KEY),
        ((HostUnreachable, NotConnected, ConnectionLost, PrometheusUnreachable), ExitStatus.UNREACHABLE),
        ((NoNvidiaDriver,), ExitStatus.NO_DRIVER),
        ((CommandTimeout, TimeoutError), ExitStatus.TIMEOUT),
        ((ResizeRefused,), ExitStatus.RESIZE_REFUSED),
        ((RefusedInput, LayoutError, JumpHostError), ExitStatus.USAGE),
    )
    for classes, code in kinds:
        if isinstance(exc, classes):
            return code
    return ExitStatus.ERROR


def resize_exit_status(outcome: ResizeOutcome) -> ExitStatus:
    """The exit status of a resize that ran: verified or nothing to do 0, rolled back 9, else 10."""
    from gpuws.core.resize.outcome import ResizeOutcome

    return {
        ResizeOutcome.VERIFIED: ExitStatus.OK,
        ResizeOutcome.ALREADY_AT_TARGET: ExitStatus.OK,
        ResizeOutcome.DRY_RUN: ExitStatus.OK,
        ResizeOutcome.REFUSED: ExitStatus.RESIZE_REFUSED,
        ResizeOutcome.ROLLED_BACK: ExitStatus.RESIZE_ROLLED_BACK,
    }.get(outcome, ExitStatus.RESIZE_ROLLBACK_FAILED)


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


def add_accept_new(parser: argparse.ArgumentParser) -> None:
    """The same `--accept-new` on every command that connects."""
    parser.add_argument("--accept-new", action="store_true",
                        help="trust the host key if this host has none recorded yet (never a changed key)")
