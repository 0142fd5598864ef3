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
from typing import Any

from PySide6.QtCore import QObject, Signal

from gpuws.app.workspace import Workspace
from gpuws.core.telemetry.alerts import Alert, AlertEvent
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.remote.connection import ConnectionState
from gpuws.remote.telemetry_service import HostFeed, TelemetryService
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.telemetry.notify import AlertNotifier

log = logging.getLogger(__name__)


class TelemetryHub(QObject):
    """Streams of every watched host into one store; the dashboards read it."""

    alert_changed = Signal(object)  # AlertEvent, on the GUI thread

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
        self._sessions: dict[str, Any] = {}
        self.service.alert_log.subscribe(self._on_alert_event)  # called on the loop thread
        self.alert_changed.connect(self.notifier.notify)

    @property
    def store(self) -> TelemetryStore:
        return self.service.store

    def alerts(self) -> list[Alert]:
        return self.service.alert_log.entries()

    def active_alerts(self, host: str | None = None) -> list[Alert]:
        return [a for a in self.service.alert_log.active() if host is None or a.host == host]

    def feed(self, host: str) -> HostFeed | None:
        return self.service.feed(host)

    def watching(self, host: str) -> bool:
        return self.workspace.streaming(host)

    # --- sessions ---------------------------------------------------------------------------

    def watch_session(self, session: Any) -> None:
        """Report a `HostSession`'s connection, state and inventory to the workspace. Idempotent."""
        name = session.name
        if self._sessions.get(name) is session:
            return
        self._sessions[name] = session
        self.workspace.add_host(session.profile)
        session.state_changed.connect(lambda _state, _detail, s=session: self._report(s))
        session.inventory_changed.connect(lambda inv, s=session: self._report_inventory(s, inv))
        session.destroyed.connect(lambda _=None, n=name, s=session: self._forget(n, s))
        self._report(session)

    def _is_current(self, session: Any) -> bool:
        # A host's session is replaced when its profile is edited: only the newest one reports.
        return self._sessions.get(session.name) is session

    def _report(self, session: Any) -> None:
        if not self._is_current(session):
            return
        name = session.name
        self.workspace.add_host(session.profile)
        # `connection` is the live one only in a connected state: None otherwise, which the
        # workspace ignores for drops (RECONNECTING keeps the feed; it resumes by itself).
        connection = session.connection
        if connection is not None or session.state == ConnectionState.DISCONNECTED:
            self.workspace.connection_changed(name, connection)
        self.workspace.state_changed(name, ConnectionState(session.state), session.detail)

    def _report_inventory(self, session: Any, inventory: Any) -> None:
        if self._is_current(session) and inventory is not None:
            self.workspace.inventory_changed(session.name, inventory)

    def _forget(self, name: str, session: Any) -> None:
        if self._sessions.get(name) is session:
            del self._sessions[name]
            self.unwatch(name)

    def watch(self, profile: Any, connection: Any) -> None:
        """Stream `profile`'s host over `connection` (restarting after drops) until `unwatch`."""
        if not self.bridge.running:
            return
        self.workspace.add_host(profile)
        self.workspace.connection_changed(profile.name, connection)
        self.workspace.state_changed(profile.name, ConnectionState.CONNECTED)

    def unwatch(self, host: str) -> None:
        if self.workspace.host(host) is not None:
            self.workspace.connection_changed(host, None)
            self.workspace.state_changed(host, ConnectionState.DISCONNECTED)

    def shutdown(self) -> None:
        if self._owns_workspace:
            self.workspace.close()
        else:  # the window's Workspace: the window closes it (and ends the cost sessions) itself
            self.workspace.shutdown()

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
