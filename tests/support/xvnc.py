"""A bare TigerVNC `Xvnc` on 127.0.0.1 for the RFB client's own tests: no password (security type None),
its X display number picked by the server itself (`-displayfd`), its log kept for the test to read.

The desktop tests (tests/ui/test_vnc_viewer.py) reach Xvnc through `gpuws desktop demo`; these need
only the server, so they start it directly, in a second or two.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import end


@dataclass
class Xvnc:
    """A running Xvnc: where the viewer connects (port) and what its programs use (env)."""

    port: int
    display: str
    env: dict[str, str]
    log: Path

    def run(self, *argv: str, input: bytes | None = None) -> str:
        """A command on the server's X display; its stdout."""
        done = subprocess.run(argv, env=self.env, input=input, capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout.decode(errors="replace")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def xvnc(tmp: Path, width: int = 800, height: int = 600, *extra: str) -> Iterator[Xvnc]:
    """Run Xvnc (width x height, depth 24) until the block ends."""
    assert shutil.which("Xvnc"), "install the test packages (scripts/install-deps.sh test)"
    port = _free_port()
    log = tmp / "xvnc.log"
    read_end, write_end = os.pipe()
    with log.open("w") as log_file:
        server = subprocess.Popen(
            ["Xvnc", "-displayfd", str(write_end), "-geometry", f"{width}x{height}", "-depth", "24",
             "-SecurityTypes", "None", "-localhost", "-interface", "127.0.0.1", "-rfbport", str(port),
             "-UseIPv6=0", *extra],
            pass_fds=(write_end,), stdout=subprocess.DEVNULL, stderr=log_file,
        )  # fmt: skip
    os.close(write_end)
    try:
        number = b""
        deadline = time.monotonic() + 30
        while not number.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([read_end], [], [], 1)
            chunk = os.read(read_end, 16) if ready else b""
            if ready and not chunk:
                break
            number += chunk
        assert number.endswith(b"\n"), f"Xvnc did not start: {log.read_text(errors='replace')[-800:]}"
        display = f":{int(number)}"
        while time.monotonic() < deadline:  # the RFB port listens a moment after the display is up
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.05)
        env = {**os.environ, "DISPLAY": display}
        env.pop("XAUTHORITY", None)
        yield Xvnc(port, display, env, log)
    finally:
        os.close(read_end)
        end(server)
