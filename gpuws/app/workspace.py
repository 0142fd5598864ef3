"""The one truth about the hosts the app works with. Qt-free.

A `Workspace` owns, per host name: the current connection and its `ConnectionState`, the last
inventory, the telemetry feed (one `TelemetryService` for all hosts) and the tunnels. (The cost
ledger and the idle policy are still kept by the Session tab; they move here next.) Front ends
are views: they report what they did (`connection_changed`, `state_changed`,
`inventory_changed`) and subscribe once to hear about every change (`subscribe`).

Following the connection is done here, once: when a host's connection is replaced (Host >
Reconnect, a profile edit) its telemetry stream restarts on the new one and its tunnels are
rebound to it; when the inventory changes (a verified resize) the stream restarts so the devices
are enumerated anew; a closed host's stream stops.

Threads: every method is called on one thread, the owner's (the GUI thread in the window, the
event loop in a script); listeners are called synchronously on that thread. Coroutines (the
telemetry streams) run through the `spawn` function given at construction (the window passes
`AsyncBridge.run_async`), so the Workspace itself never touches an event loop or Qt.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from gpuws.core.inventory import Inventory
from gpuws.core.models import HostProfile
from gpuws.core.runner import CommandRunner
from gpuws.remote.connection import ConnectionState
from gpuws.remote.telemetry_service import TelemetryService

log = logging.getLogger(__name__)

LIVE_STATES = frozenset({ConnectionState.CONNECTED, ConnectionState.NO_DRIVER})


class Connection(Protocol):
    """What the Workspace needs of a connection (a `HostConnection`, or a local stand-in)."""

    @property
    def runner(self) -> CommandRunner: ...


class Rebindable(Protocol):
    """A tunnel: it forwards over whatever connection it is given (`gpuws.remote.tunnels.Tunnel`)."""

    connection: Any

    def rebind(self, connection: Any) -> None: ...


Spawn = Callable[[Coroutine[Any, Any, None]], "concurrent.futures.Future[None]"]


class Change(StrEnum):
    """What changed about a host (the listener's first argument)."""

    STATE = "state"
    CONNECTION = "connection"
    INVENTORY = "inventory"
    TUNNELS = "tunnels"
    REMOVED = "removed"


Listener = Callable[[Change, str], None]  # (what changed, host name)


@dataclass
class HostRecord:
    """Everything the Workspace knows about one host (read it; change it through the Workspace)."""

    profile: HostProfile
    state: ConnectionState = ConnectionState.DISCONNECTED
    detail: str = ""
    connection: Connection | None = None
    inventory: Inventory | None = None
    tunnels: list[Rebindable] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES and self.connection is not None


class Workspace:
    """Sessions by host name, with their connection state, telemetry feeds and tunnels."""

    def __init__(
        self,
        spawn: Spawn,
        *,
        telemetry: TelemetryService | None = None,
    ) -> None:
        self._spawn = spawn
        self.telemetry = telemetry if telemetry is not None else TelemetryService()
        self._hosts: dict[str, HostRecord] = {}
        self._listeners: list[Listener] = []
        self._feeds: dict[str, tuple[concurrent.futures.Future[None], Connection]] = {}

    # -- reading --------------------------------------------------------------------------------

    def hosts(self) -> list[str]:
        return sorted(self._hosts)

    def host(self, name: str) -> HostRecord | None:
        return self._hosts.get(name)

    def state(self, name: str) -> ConnectionState:
        record = self._hosts.get(name)
        return record.state if record is not None else ConnectionState.DISCONNECTED

    def streaming(self, name: str) -> bool:
        """Whether a telemetry task runs for `name` over its current connection."""
        feed = self._feeds.get(name)
        record = self._hosts.get(name)
        return (feed is not None and not feed[0].done() and record is not None
                and feed[1] is record.connection)

    # -- listening ------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(change, host)` on every change; returns the function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _notify(self, change: Change, host: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(change, host)
            except Exception:  # one broken view must not stop the others
                log.exception("workspace listener failed")

    # -- what the front ends report ---------------------------------------------------------------

    def add_host(self, profile: HostProfile) -> HostRecord:
        """Track `profile`'s host (an edited profile replaces the old one of that name)."""
        record = self._hosts.get(profile.name)
        if record is None:
            record = self._hosts[profile.name] = HostRecord(profile)
        else:
            record.profile = profile
        self.telemetry.configure(profile)
        return record

    def remove_host(self, name: str) -> None:
        """Forget `name`: its stream stops."""
        self._stop_feed(name)
        self._hosts.pop(name, None)
        self._notify(Change.REMOVED, name)

    def connection_changed(self, name: str, connection: Connection | None) -> None:
        """`name` now talks through `connection` (None: closed). Tunnels and the feed follow it."""
        record = self._record(name)
        if record.connection is connection:
            return
        record.connection = connection
        if connection is not None:
            for tunnel in record.tunnels:
                tunnel.rebind(connection)
        self._follow(record)
        self._notify(Change.CONNECTION, name)

    def state_changed(self, name: str, state: ConnectionState, detail: str = "") -> None:
        """The connection of `name` is in `state` now (CONNECTED only once probed)."""
        record = self._record(name)
        record.state, record.detail = state, detail
        self._follow(record)
        self._notify(Change.STATE, name)

    def inventory_changed(self, name: str, inventory: Inventory) -> None:
        """A (re-)probe read the host's GPUs: a changed layout restarts the feed."""
        record = self._record(name)
        changed = record.inventory is not None and record.inventory != inventory
        record.inventory = inventory
        if changed and self.streaming(name):
            self._stop_feed(name)
        self._follow(record)
        self._notify(Change.INVENTORY, name)

    def add_tunnel(self, name: str, tunnel: Rebindable) -> None:
        """Keep `tunnel` with its host: it is rebound whenever the host's connection is replaced."""
        record = self._record(name)
        record.tunnels.append(tunnel)
        if record.connection is not None and tunnel.connection is not record.connection:
            tunnel.rebind(record.connection)
        self._notify(Change.TUNNELS, name)

    def remove_tunnel(self, name: str, tunnel: Rebindable) -> None:
        record = self._record(name)
        if tunnel in record.tunnels:
            record.tunnels.remove(tunnel)
            self._notify(Change.TUNNELS, name)

    def shutdown(self) -> None:
        """Stop every feed (the app is closing)."""
        for name in list(self._feeds):
            self._stop_feed(name)

    # -- following the connection -----------------------------------------------------------------

    def _record(self, name: str) -> HostRecord:
        record = self._hosts.get(name)
        if record is None:
            raise KeyError(f"host {name!r} is not in the workspace")
        return record

    def _follow(self, record: HostRecord) -> None:
        """Stream while the host is live, over its current connection; stop when it is closed."""
        name = record.profile.name
        feed = self._feeds.get(name)
        if feed is not None and (feed[1] is not record.connection or record.connection is None):
            self._stop_feed(name)  # replaced or closed: the old task streams over a dead connection
            feed = None
        if record.state is ConnectionState.DISCONNECTED:
            self._stop_feed(name)
            return
        # Drops (RECONNECTING) keep the task: it marks the gap and resumes by itself.
        if record.live and (feed is None or feed[0].done()):
            connection = record.connection
            assert connection is not None

            def runner() -> CommandRunner:
                return connection.runner

            future = self._spawn(self.telemetry.watch(record.profile, runner))
            self._feeds[name] = (future, connection)

    def _stop_feed(self, name: str) -> None:
        feed = self._feeds.pop(name, None)
        if feed is not None:
            feed[0].cancel()
