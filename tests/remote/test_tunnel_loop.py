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
