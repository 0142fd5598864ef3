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


async def _serve(port: int, state_dir: Path, password: str) -> None:
    from gpuws.sim.server import DemoHost

    host = DemoHost(port=port, state_dir=state_dir)
    host.password = password
    info = await host.start()
    print(info.to_json(), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await host.stop()


def start(port: int, state_dir: Path, password: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """Start the demo host process; returns it and its connection info (once it listens)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.demo_process", str(port), str(state_dir), password],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
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
    asyncio.run(_serve(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
