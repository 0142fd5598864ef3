"""Shared CLI output helpers: JSON for scripts, one clear line for people. No argparse here: a
command line parsed without it (gpuws.cli.main.PLAIN_LINES) prints through this module (#35)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from gpuws.core.simulation import SIM_LABEL

if TYPE_CHECKING:
    import argparse

    from gpuws.cli.parsing import OneLineParser


def print_json(obj: Any) -> None:
    """Print one JSON document (or one JSON line) to stdout."""
    import json  # for --json only: `gpuws hosts list` prints text (#35)

    print(json.dumps(obj, default=str, sort_keys=False), flush=True)


def fail(message: str, code: int = 1) -> int:
    """Report a one-line error on stderr and return the exit code to use.

    Messages can carry host or profile strings: they are made printable, so one error is one line.
    """
    from gpuws.core.terminal import printable

    print(f"gpuws: error: {printable(message)}", file=sys.stderr, flush=True)
    return code


def whole_number(text: str) -> int:
    """argparse `type` of every whole-number option: ASCII digits only, through the one number
    parser (`int` would take "٣" as 3); a refusal is argparse's one-line usage error, status 2."""
    import argparse

    from gpuws.core.errors import ValidationError
    from gpuws.core.validation import parse_whole_number

    try:
        return parse_whole_number(text, "value")
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(exc.reason) from None


def decimal_number(text: str) -> float:
    """argparse `type` of every decimal option (seconds, prices): ASCII digits and one '.', no
    exponent, nan or inf, through the one number parser."""
    import argparse

    from gpuws.core.errors import ValidationError
    from gpuws.core.validation import parse_decimal

    try:
        return parse_decimal(text, "value")
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(exc.reason) from None


# What each command module's `register(sub)` is given: the subcommands of `gpuws` (OneLineParsers).
Subcommands: TypeAlias = "argparse._SubParsersAction[OneLineParser]"


def undecodable_argument(argv: Sequence[str]) -> str | None:
    """Why an argument cannot be used, when one holds bytes that are not UTF-8 (Python keeps them
    as lone surrogates, which no profile, keyring or terminal can take); None when all are fine."""
    for position, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            from gpuws.core.terminal import printable  # only for a bad one: the sanitiser costs a start (#35)

            return f"argument {position} ({printable(arg, 60)}) is not valid UTF-8; gpuws takes only UTF-8 text"
        if "\x00" in arg:  # no real command line holds one (C strings); main() called in-process may
            from gpuws.core.terminal import printable

            return f"argument {position} ({printable(arg, 60)}) holds a NUL character"
    return None


def sim_banner(simulated: bool) -> str:
    """The label every human-readable output from the simulated host carries."""
    return f"[{SIM_LABEL} GPU HOST] " if simulated else ""
