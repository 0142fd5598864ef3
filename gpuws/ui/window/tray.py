"""The window's slow chores: idle stop, budget stop and the tray, from telemetry and the ledger."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer

from gpuws.app.workspace import Change
from gpuws.ui.resources import app_icon
from gpuws.ui.tray import GpuwsTray, TrayHost
from gpuws.ui.window.base import WindowBase

if TYPE_CHECKING:
    from gpuws.core.session import HostCost

_IDLE_CHECK_MS = 10_000  # idle-stop and tray refresh period
_TRAY_COALESCE_MS = 250  # changes this close together refresh the tray once
_STALE_CHECK_MS = 1_000  # how often the Workspace looks for hosts that stopped sending samples


class TrayChores(WindowBase):
    """Idle stop, budget stop and the tray, on a slow clock and on Workspace changes."""

    def _start_chores(self) -> None:
        self.tray = self._make_tray()
        # Idle stop, budget stop and the tray read telemetry and cost on a slow clock, never per
        # sample; the policies themselves are the Workspace's (gpuws.app.workspace).
        self._idle_clock = QTimer(self)
        self._idle_clock.setInterval(_IDLE_CHECK_MS)
        self._idle_clock.timeout.connect(self._check_idle_and_tray)
        self._idle_clock.start()
        # The tray follows the Workspace (subscribed once): a state change or a ledger write
        # refreshes it soon, several changes at once only once.
        self._tray_refresh = QTimer(self)
        self._tray_refresh.setSingleShot(True)
        self._tray_refresh.setInterval(_TRAY_COALESCE_MS)
        self._tray_refresh.timeout.connect(self._refresh_costs_and_tray)
        self._unsubscribe_tray = self.workspace.subscribe(self._on_workspace_change)
        # "Connected" turns "Stale (no data for N s)" after three missed sample intervals: the
        # Workspace decides it, on this clock.
        self._stale_clock = QTimer(self)
        self._stale_clock.setInterval(_STALE_CHECK_MS)
        self._stale_clock.timeout.connect(lambda: self.workspace.check_stale())
        self._stale_clock.start()

    def _stop_chores(self) -> None:
        self._idle_clock.stop()
        self._stale_clock.stop()
        self._tray_refresh.stop()
        self._unsubscribe_tray()
        self.telemetry.notifier.set_tray(None)

    def _make_tray(self) -> GpuwsTray | None:
        if not GpuwsTray.available():
            return None  # offscreen, or a desktop without a tray: the window shows the same warnings
        tray = GpuwsTray(
            open_window=self._raise_window,
            connect_host=lambda name: self.sessions[name].connect_host() if name in self.sessions else None,
            stop_host=self._stop_host_from_tray,
            icon=app_icon(),
            parent=self,
            quit_app=self.quit_app,
        )
        self.telemetry.notifier.set_tray(tray)
        tray.show()
        return tray

    def _stop_host_from_tray(self, name: str) -> None:
        self.sidebar.select(name)
        self.detail.tabs.setCurrentWidget(self.detail.session_tab)
        self._raise_window()

    def _on_workspace_change(self, change: Change, host: str) -> None:
        if change is Change.STATE and (record := self.workspace.host(host)) is not None:
            look, words = record.shown_state  # the header shows the same (HostDetail._on_state)
            self.sidebar.set_status(host, words, look.value if words else "")
        if change in (Change.STATE, Change.COST, Change.IDLE, Change.REMOVED) and not self._closed:
            self._tray_refresh.start()

    def _check_idle_and_tray(self) -> None:
        for event in self.workspace.check_idle(time.time()):  # warns; stops the hosts whose settings ask to
            if self.tray is not None:
                self.tray.notify("Idle GPU host", event.message)
        self._refresh_costs_and_tray()

    def _refresh_costs_and_tray(self) -> None:
        """Budget stops for every host (shown or not) and the tray's hosts, from the ledger."""
        now = time.time()
        workspace = self.workspace
        hosts = [(name, session.profile, session.state) for name, session in self.sessions.items()]
        profiles = [profile for _name, profile, _state in hosts]

        def done(costs: dict[str, HostCost]) -> None:
            for cost in costs.values():
                workspace.enforce_budget(cost)  # stop at 100 % of a budget, shown or not
            if self.tray is not None:
                self.tray.update_hosts([
                    TrayHost(name, state, costs[name].running if name in costs else None,
                             workspace.idle.idle(name), profile.currency or "")
                    for name, profile, state in hosts])

        # The running costs come from the ledger on disk: read it off the GUI thread.
        self.bridge.run_blocking(lambda: workspace.cost_report(profiles, now), done, owner=self)

