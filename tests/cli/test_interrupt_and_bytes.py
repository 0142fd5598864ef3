"""No traceback from any input: non-UTF-8 arguments are refused, Ctrl-C is exit 130 and one line
(issue 13). Run as a user runs them: `python -m gpuws` in a subprocess."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuws.core.models import HostProfile
from gpuws.core.profiles import ProfileStore

REPO = Path(__file__).resolve().parents[2]


def gpuws_env(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "PYTHONPATH": str(REPO)}


@pytest.mark.parametrize(
    "argv",
    [
        [b"hosts", b"add", b"rig", b"--host", b"rig.example", b"--notes", b"\xff"],
        [b"hosts", b"add", b"rig", b"--host", b"rig.example", b"--key", b"/tmp/key\xff"],
        [b"probe", b"r\xffig"],
    ],
)
def test_non_utf8_arguments_are_refused_in_one_line(argv: list[bytes], isolated_home: Path) -> None:
    done = subprocess.run([sys.executable.encode(), b"-m", b"gpuws", *argv], capture_output=True,
                          env=gpuws_env(isolated_home), stdin=subprocess.DEVNULL, timeout=60)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, err
    assert b"Traceback" not in done.stderr and err.count("\n") == 1 and "not valid UTF-8" in err
    assert ProfileStore().load() == []


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word (an SSH handshake that hangs)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("delay", [0.3, 0.8, 2.5])
def test_ctrl_c_at_any_moment_is_130_and_one_line(delay: float, silent_server: int, isolated_home: Path) -> None:
    # 0.3 s: still importing the command's modules; 2.5 s: waiting for the SSH handshake.
    ProfileStore().add(HostProfile(name="hang", host="127.0.0.1", port=silent_server))
    process = subprocess.Popen([sys.executable, "-m", "gpuws", "bench", "hang"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=gpuws_env(isolated_home))
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert err == "gpuws: interrupted\n"
