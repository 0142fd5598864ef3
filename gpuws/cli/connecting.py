"""What every host-connecting command shares: the exit-status table, `--accept-new`, TTY prompts.

Scripts tell failures apart by exit status; the app's error table (`gpuws.app.errors`) is the one
mapping from error class to status, applied only by `gpuws.cli.main` to any error a command lets
through. Commands never catch `GpuwsError` to pick a status themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpuws.app.errors import EXIT_STATUS_HELP as EXIT_STATUS_HELP  # re-exported: the commands print it
from gpuws.app.errors import ExitStatus as ExitStatus
from gpuws.app.errors import exit_status_for

if TYPE_CHECKING:
    from gpuws.core.resize.outcome import ResizeOutcome

# Kept for the commands that name them (the values are the app's one table, gpuws.app.errors).
EXIT_ERROR = ExitStatus.ERROR
EXIT_USAGE = ExitStatus.USAGE
EXIT_AUTH = ExitStatus.AUTH
EXIT_HOST_KEY = ExitStatus.HOST_KEY
EXIT_UNREACHABLE = ExitStatus.UNREACHABLE
EXIT_NO_DRIVER = ExitStatus.NO_DRIVER
EXIT_TIMEOUT = ExitStatus.TIMEOUT


def exit_code_for(exc: BaseException) -> ExitStatus:
    """The exit status for an error that ended a command: the app's error table decides it."""
    return exit_status_for(exc)


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
        return _typed("Are you sure you want to continue connecting (yes/no)? ").strip().lower() == "yes"

    return await asyncio.to_thread(ask)


async def ask_kbdint(title: str, instructions: str, prompts: Sequence[tuple[str, bool]]) -> list[str]:
    """Keyboard-interactive prompts on a TTY (answers that should not echo are hidden)."""

    def ask() -> list[str]:
        print(title, file=sys.stderr)
        if instructions:
            print(instructions, file=sys.stderr)
        return [_typed(text) if echo else getpass.getpass(text) for text, echo in prompts]

    return await asyncio.to_thread(ask)


def _typed(prompt: str) -> str:
    """A line typed at the terminal, through the one bounded stdin reader."""
    from gpuws.core.stdin import read_answer

    print(prompt, end="", file=sys.stderr, flush=True)
    return read_answer(sys.stdin)


def add_accept_new(parser: argparse.ArgumentParser) -> None:
    """The same `--accept-new` on every command that connects."""
    parser.add_argument("--accept-new", action="store_true",
                        help="trust the host key if this host has none recorded yet (never a changed key)")
