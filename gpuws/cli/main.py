"""Entry point of the `gpuws` command.

Each subcommand lives in its own module under `gpuws.cli.commands` and exposes
`register(subparsers)`; handlers return an exit code. Only the module of the command given is
imported (see `LAZY_COMMANDS`), and heavy imports (Qt, asyncssh, paramiko, keyring) happen inside
handlers, so `gpuws --version`, `gpuws --help` and `gpuws hosts list` start quickly. The parsers
themselves are gpuws.cli.parsing's; the lines in `PLAIN_LINES` need none.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from gpuws.cli.output import fail, undecodable_argument
from gpuws.core.errors import GpuwsError

if TYPE_CHECKING:
    import argparse

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


# Command lines whose parse is known without a parser: the listing that scripts run most. A parser
# costs its build and, for each of its texts, argparse's translation lookup (gettext, importing
# locale): ~3 ms of `gpuws hosts list`'s start (#35). Each line maps to its command's module, the
# handler and the values argparse gives (tests/cli/test_lazy_imports.py holds them to argparse's).
PLAIN_LINES: dict[tuple[str, ...], tuple[str, str, dict[str, object]]] = {
    ("hosts", "list"): ("hosts", "cmd_list", {"hosts_action": "list", "json": False}),
    ("hosts", "list", "--json"): ("hosts", "cmd_list", {"hosts_action": "list", "json": True}),
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `gpuws` parser (gpuws.cli.parsing); given the command line, only the module of its command
    is imported."""
    from gpuws.cli import parsing

    return parsing.build_parser(argv)


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    """The command line parsed: a plain line (PLAIN_LINES) as known, any other by argparse
    (gpuws.cli.parsing.parse)."""
    plain = PLAIN_LINES.get(tuple(argv))
    if plain is None:
        from gpuws.cli import parsing

        return parsing.parse(argv)
    module, handler, values = plain
    commands = importlib.import_module(f"gpuws.cli.commands.{module}")
    # What argparse.Namespace is (an object of attributes), without importing argparse for it.
    parsed = SimpleNamespace(demo=False, screenshot=None, command=argv[0], handler=getattr(commands, handler), **values)
    return cast("argparse.Namespace", parsed)


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
