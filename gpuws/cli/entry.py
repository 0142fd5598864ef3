"""The process entry point of the `gpuws` command: Ctrl-C at any moment is exit 130 and one line;
stdout closed by its reader (`gpuws ... | head`) is exit 1 without a traceback.

`gpuws.cli.main.main` turns a KeyboardInterrupt into 130 once it runs; this wrapper covers the
moment before, while the command's modules are still being imported, where a KeyboardInterrupt
would otherwise end in a traceback.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

from gpuws import __version__

VERSION_LINE = f"gpuws {__version__}"  # what `gpuws --version` prints (also gpuws.cli.main's parser)
EXIT_INTERRUPTED = 130
INTERRUPTED_LINE = "gpuws: interrupted\n"
EXIT_BROKEN_PIPE = 1  # "other error" in the one exit-status table


def _interrupted_while_starting(_signum: int, _frame: FrameType | None) -> None:
    # Nothing is open yet: leave at once rather than unwinding half-imported modules.
    os.write(2, INTERRUPTED_LINE.encode())
    os._exit(EXIT_INTERRUPTED)


def run() -> None:
    """Import and run the command line; exits with its status."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.default_int_handler:  # not when Ctrl-C is ignored (a background job)
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    try:
        if sys.argv[1:] == ["--version"]:
            # What argparse's version action prints, without importing the parser and every
            # module it needs to say it (#35).
            print(VERSION_LINE, flush=True)
            sys.exit(0)
        from gpuws.cli.main import main

        # Inside the try (issue 27): a Ctrl-C that was pending while the handler is put back is
        # raised as soon as `signal.signal` returns, and must be caught here, not end in a traceback.
        if previous is signal.default_int_handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        code = main()
    except KeyboardInterrupt:  # while the parser imports the subcommands, before main's own guard
        sys.stderr.write(INTERRUPTED_LINE)
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout left (`gpuws ... | head`): nothing more to say to anyone. Point stdout
        # at /dev/null so the flush at exit does not fail again, and exit "other error".
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = EXIT_BROKEN_PIPE
    if code == EXIT_INTERRUPTED:
        _exit_interrupted()
    sys.exit(code)


def _exit_interrupted() -> None:
    """Exit 130 after a caught Ctrl-C, without the interpreter's own exit.

    CPython remembers a KeyboardInterrupt raised inside `exec`/`eval` of a string (dataclasses and
    namedtuple build their methods that way while modules import) as "unhandled" even when it was
    caught, and at the end of a `-m` run kills the process with SIGINT instead of exiting with
    the status asked for: -2, not 130 (issue 27: seen once in 30 under load). So the exit
    handlers run and the standard streams are flushed here, then the process ends at once.
    """
    import atexit
    import contextlib

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or its reader left: nothing to say
            stream.flush()
    os._exit(EXIT_INTERRUPTED)
