"""Tunnels through a real OpenSSH sshd to a small HTTP server on the host side."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuws.core.tunnels import LocalPortBusy, Preset, RemoteServiceDown, TunnelSpec
from gpuws.remote.connection import ConnectionState, HostConnection, ReconnectPolicy
from gpuws.remote.tunnels import Tunnel, TunnelState
from tests.remote.helpers import key_profile, trust
from tests.support.sshd import SshdServer, free_port

pytestmark = pytest.mark.sshd

FAST_RETRY = ReconnectPolicy(base_delay=0.2, max_delay=1.0, max_retries=30)


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[int]:
    """`python -m http.server` on 127.0.0.1 (the host side of the tunnel), serving one file."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "hello.txt").write_text("hello through the tunnel\n")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    try:
        yield port
    finally:
        proc.kill()
        proc.wait(5)


def fetch(port: int, path: str = "/hello.txt") -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return str(response.read().decode())


async def test_http_through_the_tunnel(sshd: SshdServer, isolated_home: Path, http_server: int) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd)) as conn:
        tunnel = Tunnel(conn, TunnelSpec(remote_port=http_server, local_port=free_port()))
        async with tunnel:
            # Listening, but "open" only once a connection reached the service on the host.
            assert tunnel.state is TunnelState.LISTENING
            await tunnel.probe()
            assert tunnel.state is TunnelState.OPEN
            assert await asyncio.to_thread(fetch, tunnel.local_port or 0) == "hello through the tunnel\n"
            assert tunnel.url == f"http://127.0.0.1:{tunnel.local_port}/"
            assert tunnel.last_activity is not None
        assert tunnel.state is TunnelState.CLOSED
        with pytest.raises(OSError):  # the local port is released
            await asyncio.to_thread(fetch, tunnel.local_port or 0)


async def test_busy_local_port_is_a_clear_error(sshd: SshdServer, isolated_home: Path, http_server: int) -> None:
    trust(sshd, isolated_home)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        async with HostConnection(key_profile(sshd)) as conn:
            with pytest.raises(LocalPortBusy) as info:
                await Tunnel(conn, TunnelSpec(remote_port=http_server, local_port=busy)).open()
            assert str(info.value) == (
                f"local port {busy} is in use by another program; choose another or leave --local empty"
            )
            # Without --local, a taken port number is not an error: another free port is used.
            async with Tunnel(conn, TunnelSpec(remote_port=busy)) as fallback:
                assert fallback.local_port not in (None, busy)


async def test_dead_remote_service_is_reported(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    dead = free_port()
    async with HostConnection(key_profile(sshd)) as conn:
        states: list[TunnelState] = []
        # An explicit local port: the "host" is this machine, so the same number would loop back.
        spec = TunnelSpec(remote_port=dead, local_port=free_port(), preset=Preset.TENSORBOARD)
        async with Tunnel(conn, spec,
                          on_state=lambda _t, s, _d: states.append(s)) as tunnel:
            with pytest.raises(RemoteServiceDown, match=rf"^nothing is listening on 127\.0\.0\.1:{dead}$"):
                await tunnel.probe()
            # A browser hitting the tunnel gets a closed connection and the tunnel says why.
            with pytest.raises(OSError):
                await asyncio.to_thread(fetch, tunnel.local_port or 0)
            assert tunnel.state is TunnelState.FAILED
            assert tunnel.last_error == f"nothing is listening on 127.0.0.1:{dead}"
        assert TunnelState.FAILED in states


async def test_tunnel_comes_back_after_sshd_restart(sshd: SshdServer, isolated_home: Path, http_server: int) -> None:
    trust(sshd, isolated_home)
    conn = HostConnection(key_profile(sshd), reconnect=FAST_RETRY)
    await conn.connect()
    try:
        async with Tunnel(conn, TunnelSpec(remote_port=http_server, local_port=free_port())) as tunnel:
            port = tunnel.local_port or 0
            assert "tunnel" in await asyncio.to_thread(fetch, port)
            sshd.kill_sessions()
            sshd.stop()
            for _ in range(200):
                if conn.state is ConnectionState.RECONNECTING:
                    break
                await asyncio.sleep(0.05)
            assert tunnel.sync_state() is TunnelState.WAITING
            await asyncio.to_thread(sshd.start)
            # The same local port (the URL in the browser) works again once SSH is back.
            assert await asyncio.to_thread(fetch, port) == "hello through the tunnel\n"
            assert conn.state is ConnectionState.CONNECTED
            assert tunnel.sync_state() is TunnelState.OPEN
    finally:
        await conn.close()
