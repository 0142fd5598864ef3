"""The process entry point of the `gpuws` command: Ctrl-C at any moment is exit 130 and one line.

`gpuws.cli.main.main` turns a KeyboardInterrupt into 130 once it runs; this wrapper covers the
moment before, while the command's modules are still being imported, where a KeyboardInterrupt
would otherwise end in a traceback.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

EXIT_INTERRUPTED = 130
INTERRUPTED_LINE = "gpuws: interrupted\n"


def _interrupted_while_starting(_signum: int, _frame: FrameType | None) -> None:
    # Nothing is open yet: leave at once rather than unwinding half-imported modules.
    os.write(2, INTERRUPTED_LINE.encode())
    os._exit(EXIT_INTERRUPTED)


def run() -> None:
    """Import and run the command line; exits with its status."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.default_int_handler:  # not when Ctrl-C is ignored (a background job)
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    from gpuws.cli.main import main

    if previous is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = main()
    except KeyboardInterrupt:  # while the parser imports the subcommands, before main's own guard
        sys.stderr.write(INTERRUPTED_LINE)
        code = EXIT_INTERRUPTED
    sys.exit(code)
