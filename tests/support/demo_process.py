"""The demo host as a process of its own, with a password that survives a restart (a cloud host
keeps its password across a reboot; `gpuws demo-host` draws a new one each start).

Run as `python -m tests.support.demo_process PORT STATE_DIR PASSWORD`: prints the connection JSON
line, serves until SIGTERM. Tests kill it, freeze it (SIGSTOP) and start it again on the same port
with the same state directory (same host key).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


def _serve(port: int, state_dir: Path, password: str) -> int:
    """`gpuws demo-host --port PORT --state-dir DIR`, with this password instead of a new one."""
    import secrets

    from gpuws.sim.models import DEFAULT_GPU_SPEC
    from gpuws.sim.server import serve_forever

    # The demo host draws its password from here; in this process only, it is always the same.
    secrets.token_urlsafe = lambda nbytes=None: password  # type: ignore[assignment]
    return asyncio.run(serve_forever(DEFAULT_GPU_SPEC, port, state_dir))


def start(port: int, state_dir: Path, password: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """Start the demo host process; returns it and its connection info (once it listens)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.demo_process", str(port), str(state_dir), password],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the connection JSON line (its "listening" line goes to stderr)
    if not line:
        proc.wait(10)
        raise RuntimeError(f"the demo host did not start (exit status {proc.returncode})")
    info: dict[str, Any] = json.loads(line)
    return proc, info


def stop(proc: subprocess.Popen[str]) -> None:
    """End the process for good (also when it is frozen)."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGCONT)
        proc.kill()
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
