"""The `gpuws` command line's parsers (argparse), apart from gpuws.cli.main so that a command line
parsed without them (gpuws.cli.main.PLAIN_LINES) imports no argparse (#35).

Usage errors are one printable line (`OneLineParser`); a command line that names a command gets a
parser of that command alone (`parse`), the whole tree only for `--help` or an error.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import NoReturn

from gpuws.cli.entry import VERSION_LINE
from gpuws.cli.main import COMMAND_MODULES, LAZY_COMMANDS, _command_in


class OneLineParser(argparse.ArgumentParser):
    """argparse with usage errors as one printable line (`gpuws: error: ...`, exit status 2): the
    user's own arguments are echoed escaped (no ESC, OSC or bidi override reaches the terminal),
    and the usage text is left to `--help`. Subcommand parsers inherit it."""

    def error(self, message: str) -> NoReturn:
        """Exit with status 2 and one printable line naming the command."""
        from gpuws.core.terminal import printable

        command = self.prog.removeprefix("gpuws").strip()
        text = f"{command}: {message}" if command else message
        self.exit(2, f"gpuws: error: {printable(text)} (see {printable(self.prog)} --help)\n")


class _TopParser(OneLineParser):
    """`gpuws` itself: its help ends with the exit-status table, read from the error table only
    when the help is printed."""

    def format_help(self) -> str:
        """Qt-free argparse: the help text, then the exit-status table as it is written (a command's
        parser is of this class too, but not of the top's raw formatter, which reflowed the table
        into one paragraph)."""
        from gpuws.app.errors import EXIT_STATUS_TABLE

        return f"{super().format_help()}\n{EXIT_STATUS_TABLE}\n"


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


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """`argv` parsed by the quick parser where there is one and it takes the line, else (`--help`,
    an error, no command) by the whole parser, which also says any error."""
    quick = _quick_parser(argv)
    if quick is not None:
        try:
            return quick.parse_args(argv)
        except _ParseAgain:
            pass
    return build_parser(argv).parse_args(argv)
