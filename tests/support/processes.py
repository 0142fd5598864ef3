"""Ending a server process a test started."""

from __future__ import annotations

import subprocess
from typing import Any


def end(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGTERM (so a server removes its locks and sockets), SIGKILL if it is still running after
    `grace_s`; waited for either way. Nothing to do if it already ended."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
