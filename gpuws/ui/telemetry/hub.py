"""The GUI side of telemetry: one `TelemetryService` per app, streams per connected host, alerts.

`TelemetryHub` starts a host's stream on the loop thread when its session connects and cancels
it when the session closes; the store is then read by the dashboards on their frame clocks.
Alert changes (rare) are the only thing posted to the GUI thread, through `alert_changed`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import weakref
from typing import Any

from PySide6.QtCore import QObject, Signal

from gpuws.core.telemetry.alerts import Alert, AlertEvent
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.remote.telemetry_service import HostFeed, TelemetryService, runner_of
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.telemetry.notify import AlertNotifier

log = logging.getLogger(__name__)

_HUBS: weakref.WeakKeyDictionary[AsyncBridge, TelemetryHub] = weakref.WeakKeyDictionary()


class TelemetryHub(QObject):
    """Streams of every watched host into one store; the dashboards read it."""

    alert_changed = Signal(object)  # AlertEvent, on the GUI thread

    def __init__(self, bridge: AsyncBridge, service: TelemetryService | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.service = service if service is not None else TelemetryService()
        self.notifier = AlertNotifier(self)
        self._tasks: dict[str, concurrent.futures.Future[None]] = {}
        self._sessions: dict[str, Any] = {}
        self._streaming_on: dict[str, Any] = {}  # host -> the connection its task streams over
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
        task = self._tasks.get(host)
        return task is not None and not task.done()

    # --- sessions ---------------------------------------------------------------------------

    def watch_session(self, session: Any) -> None:
        """Follow a `HostSession`: stream while it is connected. Idempotent."""
        name = session.name
        if self._sessions.get(name) is session:
            return
        if name in self._sessions:
            self.unwatch(name)
        self._sessions[name] = session
        session.state_changed.connect(lambda state, _detail, s=session: self._on_state(s, state))
        session.inventory_changed.connect(lambda _inv, s=session: self._on_inventory(s))
        session.destroyed.connect(lambda _=None, n=name, s=session: self._forget(n, s))
        self._on_state(session, session.state)

    def _is_current(self, name: str, session: object) -> bool:
        return self._sessions.get(name) is session

    def _forget(self, name: str, session: Any) -> None:
        if self._sessions.get(name) is session:
            del self._sessions[name]
            self.unwatch(name)

    def _on_state(self, session: Any, state: str) -> None:
        name: str = session.name
        if not self._is_current(name, session):
            return
        connection: Any = session.connection
        if state == "connected" and connection is not None:
            if self._streaming_on.get(name) is not connection:
                # Reconnect replaced the connection: the old task streams over a closed one.
                self.unwatch(name)
            self.watch(session.profile, connection)
        elif state == "disconnected":  # closed by the user or replaced: stop; drops keep streaming
            self.unwatch(name)

    def _on_inventory(self, session: Any) -> None:
        """A re-probe (after a resize) found the devices anew: restart the stream so the agent
        enumerates them again (MIG cards appear and disappear with the layout)."""
        name: str = session.name
        connection = session.connection
        if not self._is_current(name, session) or connection is None:
            return
        if self.watching(name) and self._streaming_on.get(name) is connection:
            self.unwatch(name)
            self.watch(session.profile, connection)

    def watch(self, profile: Any, connection: Any) -> None:
        """Stream `profile`'s host over `connection` (restarting after drops) until `unwatch`."""
        if self.watching(profile.name) or not self.bridge.running:
            return
        name = profile.name

        def failed(exc: BaseException) -> None:
            log.warning("telemetry of %s stopped: %s", name, exc)

        self._streaming_on[name] = connection
        self._tasks[name] = self.bridge.run_async(self.service.watch(profile, runner_of(connection)), None, failed)

    def unwatch(self, host: str) -> None:
        task = self._tasks.pop(host, None)
        self._streaming_on.pop(host, None)
        if task is not None:
            task.cancel()

    def shutdown(self) -> None:
        for host in list(self._tasks):
            self.unwatch(host)

    def _on_alert_event(self, event: AlertEvent) -> None:
        # Loop thread: hop to the GUI thread; the hub may be gone by then at exit.
        hub = weakref.ref(self)

        def deliver() -> None:
            target = hub()
            if target is not None:
                target.alert_changed.emit(event)

        if self.bridge.running:
            self.bridge.post(deliver)


def telemetry_hub(bridge: AsyncBridge) -> TelemetryHub:
    """The app's hub for `bridge` (one per bridge, created on first use, owned by the bridge)."""
    hub = _HUBS.get(bridge)
    if hub is None:
        hub = _HUBS[bridge] = TelemetryHub(bridge, parent=bridge)
    return hub
