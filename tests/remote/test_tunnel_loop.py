"""Tunnels to a host on this machine (the demo host) never loop into themselves, say "open" only once
the host's listener was reached, and keep their descriptors bounded (issue 24)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from gpuws.app.targets import open_target
from gpuws.core.tunnels import Preset, RemoteServiceDown, TunnelLoop, TunnelSpec
from gpuws.remote import tunnels as tunnels_module
from gpuws.remote.tunnels import Tunnel, TunnelState
from tests.support.sshd import free_port


def _read_all(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.settimeout(10)
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
        return data


@pytest.mark.parametrize("preset", [Preset.VNC, Preset.NOVNC, Preset.DCV])
def test_auto_local_port_never_is_the_destination_on_a_loopback_host(isolated_home: Path, preset: Preset) -> None:
    async def scenario() -> None:
        async with open_target("demo") as conn:
            states: list[TunnelState] = []
            dead = free_port()  # nothing listens there on the "host" (this machine)
            spec = TunnelSpec(remote_port=dead, preset=preset)  # local port "auto"
            async with Tunnel(conn, spec, on_state=lambda _t, s, _d: states.append(s)) as tunnel:
                assert tunnel.local_port != dead
                assert tunnel.state is TunnelState.LISTENING
                with pytest.raises(RemoteServiceDown):
                    await tunnel.probe()
                # A client gets a closed connection, and one: no loop of channels back into the tunnel.
                assert await asyncio.to_thread(_read_all, tunnel.local_port or 0) == b""
                assert tunnel.state is TunnelState.FAILED
                assert tunnel.last_error == f"nothing is listening on 127.0.0.1:{dead}"
                assert tunnel.active_channels == 0 and tunnel.accept_errors == 0
            assert TunnelState.OPEN not in states
            assert not tunnel.has_token

    asyncio.run(scenario())


def test_the_destination_as_local_port_is_refused(isolated_home: Path) -> None:
    async def scenario() -> None:
        async with open_target("demo") as conn:
            port = free_port()
            with pytest.raises(TunnelLoop, match="own destination"):
                await Tunnel(conn, TunnelSpec(remote_port=port, local_port=port)).open()

    asyncio.run(scenario())


def test_forwarded_connections_are_bounded(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tunnels_module, "MAX_CLIENTS", 2)

    async def scenario() -> None:
        async with open_target("demo") as conn:
            # The demo host's own SSH port is a listener on its loopback that speaks first.
            spec = TunnelSpec(remote_port=conn.profile.port)
            async with Tunnel(conn, spec) as tunnel:
                held = []
                for _ in range(2):
                    reader, writer = await asyncio.open_connection("127.0.0.1", tunnel.local_port)
                    assert (await asyncio.wait_for(reader.readline(), 20)).startswith(b"SSH-2.0-")
                    held.append(writer)
                assert tunnel.state is TunnelState.OPEN and tunnel.active_channels == 2
                reader, writer = await asyncio.open_connection("127.0.0.1", tunnel.local_port)
                assert await asyncio.wait_for(reader.read(), 20) == b""  # closed at once
                assert tunnel.rejected == 1
                for w in [*held, writer]:
                    w.close()

    asyncio.run(scenario())


# Runs a tunnel under a low descriptor limit, in a process of its own (the limit must not touch pytest).
_UNDER_LIMIT = """
import asyncio, json, logging, os, resource, sys
from gpuws.app.demo import key_from_known_hosts_line
from gpuws.core.tunnels import TunnelSpec
from gpuws.remote.connection import HostConnection
from gpuws.remote.tunnels import Tunnel
from gpuws.sim.server import DemoHostInfo, demo_profile

logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")
info = DemoHostInfo(**{k: v for k, v in json.loads(sys.argv[1]).items() if k != "simulated"})

async def main():
    conn = HostConnection(demo_profile(info), password=info.password,
                          known_host_key=key_from_known_hosts_line(info.known_hosts_line))
    async with conn, Tunnel(conn, TunnelSpec(remote_port=info.port)) as tunnel:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 6, hard))
        print(tunnel.local_port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        print(json.dumps({"accept_errors": tunnel.accept_errors, "channels": tunnel.active_channels}), flush=True)

asyncio.run(main())
"""


def test_accept_errors_are_counted_and_logged_once(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys
    import time

    host = subprocess.Popen([sys.executable, "-m", "gpuws", "demo-host", "--state-dir", str(tmp_path / "demo")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert host.stdout is not None
        info = host.stdout.readline()
        tunnel = subprocess.Popen([sys.executable, "-c", _UNDER_LIMIT, info], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert tunnel.stdout is not None and tunnel.stdin is not None
        port = int(tunnel.stdout.readline())
        clients = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(40)]
        try:
            deadline = time.monotonic() + 5  # a few retries of the accept loop (every 0.5 s)
            while time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            tunnel.stdin.write("\n")
            tunnel.stdin.flush()
            report = json.loads(tunnel.stdout.readline())
            for client in clients:
                client.close()
        _out, err = tunnel.communicate(timeout=30)
    finally:
        host.terminate()
        host.communicate(timeout=30)
    assert report["accept_errors"] > 1  # the loop kept trying, and counted each failure
    warnings = [line for line in err.splitlines() if "cannot accept a connection" in line]
    assert len(warnings) == 1, err  # logged once per interval, never once per attempt
    assert "Traceback" not in err and "Too many open files" in warnings[0]
