"""Everything follows a reconnect: the window against a real sshd, Ctrl+R and a restarted sshd.

Before the fix, Host → Reconnect left the telemetry task streaming over the closed connection
(the hub thought the host was still watched), so no sample ever arrived again.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.paths import known_hosts_path
from gpuws.core.profiles import ProfileStore
from gpuws.core.tunnels import TunnelSpec
from gpuws.remote.tunnels import Tunnel
from tests.support.sshd import free_port

pytestmark = [
    pytest.mark.gui,
    pytest.mark.sshd,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:unclosed file <_io.BufferedWriter name='[^']*sshd.log'>:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <_io.FileIO name='[^']*sshd.log'.*:pytest.PytestUnraisableExceptionWarning"
    ),
]


class _Pong(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"pong\n")


@contextlib.contextmanager
def _service_on_the_host() -> Iterator[int]:
    """A TCP service on the host (loopback, where sshd runs) that answers "pong"."""
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Pong) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield int(server.server_address[1])
        finally:
            server.shutdown()
            thread.join(5)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            return conn.recv(16) == b"pong\n"
    except OSError:
        return False


def _newest_sample_t(window: Any) -> float:
    latest = window.telemetry.store.latest("gpu1")
    return max((s.t for s in latest.values()), default=0.0)


def _samples_after(window: Any, qtbot: Any, t: float) -> None:
    qtbot.waitUntil(lambda: _newest_sample_t(window) > t, timeout=60000)


def test_telemetry_and_tunnels_come_back_after_reconnect_and_sshd_restart(sshd: Any, make_window: Any,
                                                                          qtbot: Any) -> None:
    with _service_on_the_host() as remote_port:
        _scenario(sshd, make_window, qtbot, remote_port)


def _scenario(sshd: Any, make_window: Any, qtbot: Any, remote_port: int) -> None:
    ProfileStore().add(HostProfile(name="gpu1", host="127.0.0.1", port=sshd.port, user=sshd.user,
                                   auth=AuthMethod.KEY, key_path=str(sshd.client_key)))
    known_hosts_path().write_text(sshd.known_hosts_line())
    window = make_window()
    window.reconnect_current()
    qtbot.waitUntil(lambda: window.sidebar.entry("gpu1").state == "connected", timeout=30000)
    _samples_after(window, qtbot, 0.0)
    # A tunnel opened the way the Session tab opens one, kept with its host by the Workspace.
    local_port = free_port()
    tunnel = window.bridge.run_async(_open_tunnel(window.sessions["gpu1"].connection, remote_port, local_port))
    tunnel = tunnel.result(timeout=30)
    window.workspace.add_tunnel("gpu1", tunnel)
    assert _answers(local_port)

    # Host → Reconnect (Ctrl+R): a new connection replaces the old one; the stream follows it.
    first = window.sessions["gpu1"].connection
    window.reconnect_current()
    qtbot.waitUntil(lambda: window.sidebar.entry("gpu1").state == "connected"
                    and window.sessions["gpu1"].connection is not first, timeout=30000)
    _samples_after(window, qtbot, time.time())
    qtbot.waitUntil(lambda: tunnel.connection is window.sessions["gpu1"].connection, timeout=10000)
    assert _answers(local_port)

    # sshd killed and restarted on the same port: the connection reconnects, samples come back.
    sshd.restart()
    restarted = time.time()
    _samples_after(window, qtbot, restarted)
    assert window.sidebar.entry("gpu1").state == "connected"
    assert _answers(local_port)
    window.bridge.run_async(tunnel.close()).result(timeout=10)


async def _open_tunnel(connection: Any, remote_port: int, local_port: int) -> Tunnel:
    tunnel = Tunnel(connection, TunnelSpec(remote_port=remote_port, local_port=local_port))
    await tunnel.open()
    return tunnel
