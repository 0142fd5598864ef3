"""The GUI side of telemetry: a Qt adapter over the application's `Workspace`.

The `Workspace` (gpuws.app.workspace) owns the telemetry feeds and re-attaches them when a host's
connection is replaced or its layout changes; the hub forwards each `HostSession`'s changes to it
(one subscription per session) and turns alert changes, the only thing pushed per event, into the
`alert_changed` signal on the GUI thread. The dashboards read the store on their frame clocks.
The window owns one hub (no module-level instance).
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING

import shiboken6
from PySide6.QtCore import QObject, Signal

from gpuws.app.telemetry import HostFeed, TelemetryService
from gpuws.app.workspace import Change, Connection, Workspace
from gpuws.core.models import HostProfile
from gpuws.core.states import ConnectionState
from gpuws.core.telemetry.alerts import Alert, AlertEvent
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.telemetry.notify import AlertNotifier

if TYPE_CHECKING:
    from gpuws.ui.session_controller import HostSession

log = logging.getLogger(__name__)


class TelemetryHub(QObject):
    """Streams of every watched host into one store; the dashboards read it."""

    alert_changed = Signal(object)  # AlertEvent, on the GUI thread
    host_changed = Signal(str, str)  # (Change, host): every Workspace change, on the GUI thread

    def __init__(self, bridge: AsyncBridge, service: TelemetryService | None = None,
                 parent: QObject | None = None, *, workspace: Workspace | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self._owns_workspace = workspace is None  # made here: closed here (its ledger thread too)
        if workspace is None:
            workspace = Workspace(lambda coro: bridge.run_async(coro, None, _stream_failed), post=bridge.post,
                                  telemetry=service if service is not None else TelemetryService())
        self.workspace = workspace
        self.service = workspace.telemetry
        self.notifier = AlertNotifier(self)
        self._sessions: dict[str, HostSession] = {}
        self.service.alert_log.subscribe(self._on_alert_event)  # called on the loop thread
        self.alert_changed.connect(self.notifier.notify)
        self._unsubscribe = workspace.subscribe(self._on_workspace_change)

    @property
    def store(self) -> TelemetryStore:
        """The samples of every watched host."""
        return self.service.store

    def alerts(self) -> list[Alert]:
        """Every alert in the log, raised and cleared."""
        return self.service.alert_log.entries()

    def active_alerts(self, host: str | None = None) -> list[Alert]:
        """The alerts still active (of `host`, or of every host)."""
        return [a for a in self.service.alert_log.active() if host is None or a.host == host]

    def feed(self, host: str) -> HostFeed | None:
        """The stream state of `host`, or None when it is not watched."""
        return self.service.feed(host)

    def watching(self, host: str) -> bool:
        """Whether a telemetry stream runs for `host` now."""
        return self.workspace.streaming(host)

    # --- sessions ---------------------------------------------------------------------------

    def watch_session(self, session: HostSession) -> None:
        """Hand a `HostSession`'s link to the workspace, which then follows its connection, state
        and inventory itself (feeds, tunnels, cost). Idempotent."""
        name = session.name
        if self._sessions.get(name) is session:
            return
        self._sessions[name] = session
        self.workspace.attach(session.link)
        session.destroyed.connect(lambda _=None, n=name, s=session: self._forget(n, s))

    def _forget(self, name: str, session: HostSession) -> None:
        if self._sessions.get(name) is session:
            del self._sessions[name]
            self.unwatch(name)

    def watch(self, profile: HostProfile, connection: Connection) -> None:
        """Stream `profile`'s host over an already connected `connection` until `unwatch` (a
        connection made elsewhere, e.g. by a benchmark)."""
        if not self.bridge.running:
            return
        self.workspace.add_host(profile)
        self.workspace.connection_changed(profile.name, connection)
        self.workspace.state_changed(profile.name, ConnectionState.CONNECTED)

    def unwatch(self, host: str) -> None:
        """Stop following `host` (its session went away)."""
        record = self.workspace.host(host)
        if record is not None:
            self.workspace.connection_changed(host, None)
            self.workspace.state_changed(host, ConnectionState.DISCONNECTED)

    def shutdown(self) -> None:
        """Stop the feeds (and close the Workspace when it is the hub's own)."""
        self._unsubscribe()
        if self._owns_workspace:
            self.workspace.close()
        else:  # the window's Workspace: the window closes it (and ends the cost sessions) itself
            self.workspace.shutdown()

    def _on_workspace_change(self, change: Change, host: str) -> None:
        if shiboken6.isValid(self):  # the window's Workspace may outlive a hub of a closed window
            self.host_changed.emit(str(change), host)

    def _on_alert_event(self, event: AlertEvent) -> None:
        # Loop thread: hop to the GUI thread; the hub may be gone by then at exit.
        hub = weakref.ref(self)

        def deliver() -> None:
            target = hub()
            if target is not None:
                target.alert_changed.emit(event)

        if self.bridge.running:
            self.bridge.post(deliver)


def _stream_failed(exc: BaseException) -> None:
    log.warning("telemetry stream stopped: %s", exc)
