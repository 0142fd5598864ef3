"""`gpuws shell NAME [-- CMD]`: a terminal on the host inside tmux, which survives a dropped connection.

A thin adapter over `gpuws.app.desktop.ShellSession`: this module only puts the local terminal in raw
mode and passes keys, output and size changes through.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

from gpuws.cli.connecting import add_accept_new, tty_prompts
from gpuws.cli.output import Subcommands, fail, print_json

_EPILOG = """Without CMD: an interactive terminal in the host's tmux session `gpuws` (`tmux new -A -s gpuws`);
after a dropped connection gpuws attaches to the same session again, so what runs there goes on. Without
tmux on the host: a plain shell, with a warning that its work will not survive a drop.
With CMD: runs CMD once on the host, next to that tmux session (created first), e.g.
`gpuws shell NAME -- tmux capture-pane -p -t gpuws`. Exit status: CMD's, or see `gpuws --help`."""


def register(sub: Subcommands) -> None:
    """Register `gpuws shell`."""
    p = sub.add_parser("shell", help="a terminal on the host inside tmux, which survives a dropped connection",
                       description="Open a terminal on the host of profile NAME inside its tmux session "
                       "'gpuws'. NAME 'demo' without such a profile uses the built-in simulated GPU host.",
                       epilog=_EPILOG)
    p.add_argument("name", metavar="NAME", help="host profile name")
    p.add_argument("--list", action="store_true", help="list the windows of the host's gpuws tmux session "
                   "and what runs in each")
    p.add_argument("--json", action="store_true", help="with --list: print JSON")
    p.add_argument("command", nargs="*", metavar="CMD",
                   help="run CMD on the host instead of an interactive terminal")
    add_accept_new(p)
    p.set_defaults(handler=run_shell)


def run_shell(args: argparse.Namespace) -> int:
    """`gpuws shell NAME [-- CMD]`: a tmux terminal on the host (or, with --list, its tmux windows)."""
    command = args.command
    if args.list and command:
        return fail("give --list or a command, not both", 2)
    if not args.list and not command and not sys.stdin.isatty():
        return fail("gpuws shell: the interactive terminal needs a terminal (stdin is not one); "
                    "give a command after --", 2)
    return int(asyncio.run(_shell(args)))


async def _shell(args: argparse.Namespace) -> int:
    from gpuws.app import desktop
    from gpuws.app.targets import open_target
    from gpuws.core.terminal import printable

    async with open_target(args.name, accept_new=args.accept_new, **tty_prompts()) as conn:
        if args.list:
            windows = await desktop.list_windows(conn)
            if args.json:
                print_json({"session": "gpuws", "windows": [w.to_dict() for w in windows]})
            elif not windows:
                print("no gpuws tmux session on the host (gpuws shell NAME starts one)")
            for w in windows:
                mark = "*" if w.active else " "
                print(f"{mark}{w.index}: {printable(w.name)}  running {printable(w.command)}")
            return 0
        if args.command:
            result = await desktop.run_in_shell(conn, args.command)
            sys.stdout.write(result.stdout)
            sys.stderr.write(result.stderr)
            return result.exit_status
        return await _interactive(conn)


def _size() -> tuple[int, int]:
    size = os.get_terminal_size(sys.stdout.fileno()) if sys.stdout.isatty() else os.terminal_size((80, 24))
    return size.columns, size.lines


@contextlib.contextmanager
def _raw_terminal(fd: int) -> Iterator[None]:
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def _keyboard(fd: int) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        """Queue what the terminal typed (an empty read: it closed)."""
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        queue.put_nowait(data)
        if not data:
            loop.remove_reader(fd)

    loop.add_reader(fd, readable)
    try:
        while data := await queue.get():
            yield data
    finally:
        loop.remove_reader(fd)


async def _interactive(conn: Any) -> int:
    from gpuws.app.desktop import ShellSession

    out = sys.stdout.buffer

    def output(data: bytes) -> None:
        """Write the host's output to the terminal."""
        out.write(data)
        out.flush()

    def notice(text: str) -> None:
        """Show a gpuws notice on its own line."""
        out.write(f"\r\n[gpuws] {text}\r\n".encode())
        out.flush()

    session = ShellSession(conn, output=output, notice=notice, term_type=os.environ.get("TERM", "xterm-256color"),
                           size=_size())
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGWINCH, lambda: session.resize(_size()))
    fd = sys.stdin.fileno()
    with _raw_terminal(fd):
        return await session.run(_keyboard(fd))
