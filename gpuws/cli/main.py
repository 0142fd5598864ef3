"""Entry point of the `gpuws` command.

Each subcommand lives in its own module under `gpuws.cli.commands` and exposes
`register(subparsers)`; handlers return an exit code. Heavy imports (Qt, asyncssh) happen inside
handlers so `gpuws hosts list` stays quick.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gpuws import __version__
from gpuws.cli.output import fail
from gpuws.core.errors import GpuwsError
from gpuws.core.runner import CommandTimeout

# One module per concern; each registers its own subcommands.
COMMAND_MODULES = (
    "hosts",
    "secret",
    "probe",
    "demo_host",
    "watch",
    "bench",
    "resize",
    "session",
    "mig_parted",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuws",
        description="Workstation manager for cloud GPU sessions. Run without a command to open the window.",
    )
    parser.add_argument("--version", action="version", version=f"gpuws {__version__}")
    parser.add_argument(
        "--demo", action="store_true", help="open the window connected to the built-in simulated GPU host"
    )
    parser.add_argument("--screenshot", metavar="PATH", help="render the main window offscreen to a PNG and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"gpuws.cli.commands.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        from gpuws.ui.app import run_gui

        return run_gui(demo=args.demo, screenshot=args.screenshot)
    handler = getattr(args, "handler", None)
    if handler is None:  # a command group given without its subcommand
        parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "--help"])
        return 2
    try:
        return int(handler(args))
    except (GpuwsError, CommandTimeout) as exc:  # every user-facing error is one clear line, never a traceback
        from gpuws.cli.connecting import exit_code_for

        return fail(str(exc), exit_code_for(exc))
    except KeyboardInterrupt:
        return 130
