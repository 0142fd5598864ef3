"""The Workspace follows connections: feeds restart on a replaced connection or a new layout,
tunnels are rebound, a drop stops the feed until the host is back, a closed host's feed stops.
Qt-free."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Coroutine
from typing import Any

from gpuws.app.workspace import Change, Workspace
from gpuws.core.inventory import HostFacts, Inventory
from gpuws.core.models import HostProfile
from gpuws.core.runner import LocalRunner
from gpuws.core.states import ConnectionState


class Spawned:
    """A spawn that records what would run (and never runs it)."""

    def __init__(self) -> None:
        self.futures: list[concurrent.futures.Future[None]] = []

    def __call__(self, coro: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
        coro.close()
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.futures.append(future)
        return future


class Conn:
    def __init__(self) -> None:
        self.runner = LocalRunner()


class FakeTunnel:
    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def rebind(self, connection: Any) -> None:
        self.connection = connection

    def sync_state(self) -> None:
        pass


def _connected(ws: Workspace, name: str, conn: Conn) -> None:
    ws.state_changed(name, ConnectionState.CONNECTING)
    ws.connection_changed(name, conn)
    ws.state_changed(name, ConnectionState.CONNECTED)


def test_feeds_and_tunnels_follow_the_connection() -> None:
    spawn = Spawned()
    ws = Workspace(spawn)
    heard: list[tuple[Change, str]] = []
    unsubscribe = ws.subscribe(lambda change, host: heard.append((change, host)))
    ws.add_host(HostProfile(name="lab", host="h"))
    first, second = Conn(), Conn()
    _connected(ws, "lab", first)
    assert len(spawn.futures) == 1 and ws.streaming("lab")
    tunnel = FakeTunnel(first)
    ws.add_tunnel("lab", tunnel)

    # A drop: the feed stops (the gap and the unreachable alert are marked: a second task) and a
    # fresh one starts the moment the host is back.
    ws.state_changed("lab", ConnectionState.RECONNECTING)
    assert spawn.futures[0].cancelled() and len(spawn.futures) == 2 and not ws.streaming("lab")
    ws.state_changed("lab", ConnectionState.CONNECTED)
    # A fresh feed, and (#35) a check that the tunnel's host side answers again: "open" only then.
    assert len(spawn.futures) == 4 and ws.streaming("lab")

    _connected(ws, "lab", second)  # Host > Reconnect: a new connection (its tunnel checked again)
    assert spawn.futures[2].cancelled() and len(spawn.futures) == 6 and ws.streaming("lab")
    assert tunnel.connection is second

    inventory = Inventory(host=HostFacts(), gpus=[])
    ws.inventory_changed("lab", inventory)  # first probe: nothing to restart
    assert len(spawn.futures) == 6
    ws.inventory_changed("lab", Inventory(host=HostFacts(hostname="other"), gpus=[]))  # layout changed
    feed = next(f for f in spawn.futures[4:] if f.cancelled())
    assert len(spawn.futures) == 7 and feed is not None

    ws.connection_changed("lab", None)
    ws.state_changed("lab", ConnectionState.DISCONNECTED)
    assert spawn.futures[6].cancelled() and not ws.streaming("lab") and len(spawn.futures) == 7
    assert (Change.CONNECTION, "lab") in heard and (Change.INVENTORY, "lab") in heard
    unsubscribe()
    ws.remove_host("lab")
    assert heard[-1] != (Change.REMOVED, "lab") and ws.host("lab") is None
