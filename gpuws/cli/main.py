"""Entry point of the `gpuws` command.

Each subcommand lives in its own module under `gpuws.cli.commands` and exposes
`register(subparsers)`; handlers return an exit code. Only the module of the command given is
imported (see `LAZY_COMMANDS`), and heavy imports (Qt, asyncssh, paramiko, keyring) happen inside
handlers, so `gpuws --version`, `gpuws --help` and `gpuws hosts list` start quickly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from gpuws.cli.entry import VERSION_LINE
from gpuws.cli.output import OneLineParser, fail, undecodable_argument
from gpuws.core.errors import GpuwsError

# The one table (gpuws.app.errors), applied below to every error a command lets through, and
# printed by `gpuws --help`: imported for those only (a quick command needs neither, #35).

# One module per concern; each registers its own subcommands.
COMMAND_MODULES = (
    "hosts",
    "secret",
    "probe",
    "demo_host",
    "watch",
    "bench",
    "health",
    "resize",
    "session",
    "advise",
    "fleet",
    "mig_parted",
    "desktop",
    "shell",
)

# command -> (its module in COMMAND_MODULES, its one-line help), so that `gpuws X` imports only X's
# module and `gpuws --help` imports none (each module costs its own imports: numpy, YAML, ...).
# A module of COMMAND_MODULES none of whose commands is listed here is imported as before, so a new
# command works without an entry; tests/cli/test_lazy_imports.py checks the help texts match.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "hosts": ("hosts", "manage host profiles"),
    "secret": ("secret", "store credentials in the OS keyring"),
    "probe": ("probe", "show a host's GPUs and facts (nvidia-smi -q -x over SSH)"),
    "demo-host": (
        "demo_host",
        "run the SIMULATED GPU host (SSH on 127.0.0.1) and print how to connect as one JSON line",
    ),
    "watch": ("watch", "live GPU telemetry of a host (NVML agent, or nvidia-smi as fallback)"),
    "bench": ("bench", "run the GPU sanity benchmark on a host and score it against the datasheet"),
    "health": (
        "health",
        "passive health check of a host's GPUs in seconds (ECC, XIDs, remapped rows, links, power cap)",
    ),
    "slices": ("resize", "list the layouts each GPU of a host can be resized to (a cloud host with --instance-type: "
               "its instance types, priced)"),
    "resize": ("resize", "resize a GPU between MIG layouts and the full card, or change the instance type"),
    "tunnel": ("session", "forward a local port to a service on the host (Jupyter, TensorBoard, VNC...)"),
    "cost": ("session", "what your hosts cost: running session, today, this month, budget"),
    "cp": ("session", "copy files and folders to or from a host over SFTP (resumes partial copies)"),
    "start": ("session", "start the host's instance through its cloud provider"),
    "stop": ("session", "stop the host's instance through its cloud provider"),
    "fleet": ("fleet", "fleets of GPUs read from Prometheus (dcgm-exporter metrics)"),
    "demo-fleet": ("fleet", "run SIMULATED dcgm-exporters on loopback for a Prometheus to scrape"),
    "mig-parted": ("mig_parted", "export, apply and assert NVIDIA mig-parted v1 MIG configs"),
    "desktop": ("desktop", "start or reuse a remote desktop (VNC) on the host and open it through a tunnel"),
    "shell": ("shell", "a terminal on the host inside tmux, which survives a dropped connection"),
    "advise": (
        "advise",
        "right-size advice per GPU from measured use: keep, smaller, larger or stop, with the price change",
    ),
}
_OPTIONS_WITH_VALUE = frozenset({"--screenshot"})


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand named in `argv` (the first word that is not a top-level option), if any."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--":
            continue
        elif word.startswith("-"):
            skip = word in _OPTIONS_WITH_VALUE
        else:
            return word
    return None


class _TopParser(OneLineParser):
    """`gpuws` itself: its help ends with the exit-status table, read from the error table only
    when the help is printed."""

    def format_help(self) -> str:
        """Qt-free argparse: the help text, the exit-status table as its epilog."""
        from gpuws.app.errors import EXIT_STATUS_TABLE

        self.epilog = EXIT_STATUS_TABLE
        return super().format_help()


def _top_parser(cls: type[_TopParser]) -> tuple[_TopParser, argparse._SubParsersAction[_TopParser]]:
    """`gpuws` and its options, with the group its commands are added to."""
    parser = cls(
        prog="gpuws",
        description="Workstation manager for cloud GPU sessions. Run without a command to open the window.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=VERSION_LINE)
    parser.add_argument(
        "--demo", action="store_true", help="open the window connected to the built-in simulated GPU host"
    )
    parser.add_argument("--screenshot", metavar="PATH", help="render the main window offscreen to a PNG and exit")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `gpuws` parser; given the command line, only the module of its command is imported."""
    parser, sub = _top_parser(_TopParser)
    wanted = LAZY_COMMANDS.get(_command_in(argv) or "", ("",))[0] if argv is not None else None
    lazy_modules = {module for module, _ in LAZY_COMMANDS.values()}
    for name in COMMAND_MODULES:
        if wanted is not None and name in lazy_modules and name != wanted:
            # Listed in `gpuws --help`, never run: the command given belongs to another module.
            for command, (module, text) in LAZY_COMMANDS.items():
                if module == name:
                    sub.add_parser(command, help=text, add_help=False)
            continue
        importlib.import_module(f"gpuws.cli.commands.{name}").register(sub)
    return parser


class _ParseAgain(Exception):
    """The quick parser met something it cannot judge alone: `build_parser`'s parses the line again."""


class _QuickParser(_TopParser):
    """The quick parser's class, and its sub-parsers' (argparse makes them of their parent's class)."""

    def error(self, message: str) -> NoReturn:
        """Not said here: the whole parser says it, with every command listed (#35)."""
        raise _ParseAgain(message)


# The modules whose `register(sub, action)` can build only the action a command line names.
ONE_ACTION_AT_A_TIME = frozenset({"hosts"})


def _quick_parser(argv: Sequence[str]) -> argparse.ArgumentParser | None:
    """For a command line that starts with a command: a parser of that command alone (of its action
    alone where its module can), None for any other line. `gpuws hosts list` built 30 parsers
    (every command listed, every hosts action) for the one it runs: ~5 ms of a 40 ms start (#35).
    It is right for every line that parses; at any error `main` parses the line again with the
    whole parser (`build_parser`), so messages and listings are exactly as before."""
    if not argv or argv[0] not in LAZY_COMMANDS:  # a top-level option first (--help) needs the whole parser
        return None
    module = LAZY_COMMANDS[argv[0]][0]
    parser, sub = _top_parser(_QuickParser)
    register = importlib.import_module(f"gpuws.cli.commands.{module}").register
    if module in ONE_ACTION_AT_A_TIME and len(argv) > 1:
        register(sub, argv[1])
    else:
        register(sub)
    return parser


# Command lines whose parse is known without a parser: the listing that scripts run most. A parser
# costs its build and, for each of its texts, argparse's translation lookup (gettext, importing
# locale): ~3 ms of `gpuws hosts list`'s start (#35). Each line maps to its command's module, the
# handler and the values argparse gives (tests/cli/test_lazy_imports.py holds them to argparse's).
PLAIN_LINES: dict[tuple[str, ...], tuple[str, str, dict[str, object]]] = {
    ("hosts", "list"): ("hosts", "cmd_list", {"hosts_action": "list", "json": False}),
    ("hosts", "list", "--json"): ("hosts", "cmd_list", {"hosts_action": "list", "json": True}),
}


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    """The command line parsed: a plain line (PLAIN_LINES) as known, else by the quick parser where
    there is one and it takes the line, else (`--help`, an error, no command) by the whole parser,
    which also says any error."""
    plain = PLAIN_LINES.get(tuple(argv))
    if plain is not None:
        module, handler, values = plain
        commands = importlib.import_module(f"gpuws.cli.commands.{module}")
        return argparse.Namespace(demo=False, screenshot=None, command=argv[0],
                                  handler=getattr(commands, handler), **values)
    quick = _quick_parser(argv)
    if quick is not None:
        try:
            return quick.parse_args(argv)
        except _ParseAgain:
            pass
    return build_parser(argv).parse_args(argv)


def _is_timeout(exc: BaseException) -> bool:
    runner = sys.modules.get("gpuws.core.runner")  # only a command that ran something can time out
    return runner is not None and isinstance(exc, runner.CommandTimeout)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `gpuws` with `argv`; the exit status comes from the one table (a bare `gpuws` opens the window)."""
    undecodable = undecodable_argument(sys.argv[1:] if argv is None else argv)
    if undecodable is not None:  # issue 13: refused here rather than a traceback on save or print
        return fail(undecodable, 2)
    args = _parse(list(argv) if argv is not None else sys.argv[1:])
    if args.command is None:
        from gpuws.ui.app import run_gui

        return run_gui(demo=args.demo, screenshot=args.screenshot)
    handler = getattr(args, "handler", None)
    if handler is None:  # a command group given without its subcommand
        return fail(f"gpuws {args.command}: a subcommand is required (see gpuws {args.command} --help)", 2)
    try:
        return int(handler(args))
    except OSError as exc:
        if isinstance(exc, TimeoutError) or type(exc).__module__.startswith("asyncssh"):
            raise
        # A local file the user named cannot be used (a name too long, no permission, a full
        # disk): one line naming it, never a traceback.
        where = f": {os.fsdecode(exc.filename)}" if exc.filename is not None else ""
        return fail(f"{exc.strerror or type(exc).__name__}{where}", 1)
    except Exception as exc:
        if not isinstance(exc, GpuwsError | TimeoutError) and not _is_timeout(exc):
            raise
        # Every user-facing error is one clear line, never a traceback.
        from gpuws.cli.connecting import exit_code_for

        return fail(str(exc) or "timed out", int(exit_code_for(exc)))
    except KeyboardInterrupt:
        print("gpuws: interrupted", file=sys.stderr, flush=True)
        return 130
