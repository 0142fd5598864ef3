"""The Session tab, assembled from its cards (one module each in this package)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSignalBlocker, Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QGridLayout,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from gpuws.app.workspace import Change, Workspace
from gpuws.ui.tabs import HostContext
from gpuws.ui.tabs.session.access import AccessPart
from gpuws.ui.tabs.session.cost import CostPart
from gpuws.ui.tabs.session.desktop import DesktopPart
from gpuws.ui.tabs.session.instance import InstancePart
from gpuws.ui.tabs.session.tunnels import TunnelsPart
from gpuws.ui.widgets import Banner, BannerKind

REFRESH_MS = 2000
TWO_COLUMNS_MIN_WIDTH = 1100  # narrower (900 px and up): one card a row, never a horizontal scroll bar


class SessionTab(CostPart, AccessPart, DesktopPart, TunnelsPart, InstancePart):
    """Running cost, budget, tunnels and shutdown for this host.

    Interface: `SessionTab(parent=None, *, workspace=None)`, `set_host(context: HostContext | None)`.
    The Workspace is the context's hub's (the window's), else the one given, else the tab's own.
    """

    def __init__(self, parent: QWidget | None = None, *, workspace: Workspace | None = None) -> None:
        super().__init__(parent)
        self.context: HostContext | None = None
        self.workspace: Workspace | None = None
        self._unsubscribe: Callable[[], None] | None = None

        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        body = QWidget(scroll)
        scroll.setWidget(body)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(16, 16, 16, 16)
        layout.setSpacing(12)

        self.banner = Banner(BannerKind.WARNING, "", body)
        self.banner.setVisible(False)
        layout.addWidget(self.banner)
        self._scroll = scroll
        self._grid = QGridLayout()
        self._grid.setSpacing(12)
        self._cards = [self._cost_card(body), self._access_card(body), self._desktop_card(body),
                       self._tunnel_card(body), self._instance_card(body)]
        self._columns = 0
        self._arrange(2)
        layout.addLayout(self._grid)
        layout.addStretch(1)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh_cost)
        self.timer.start()
        if workspace is not None:
            self._attach(workspace)
        self.set_host(None)

    def _arrange(self, columns: int) -> None:
        """Cost and Terminal side by side when wide; every card on its own row when narrow."""
        if columns == self._columns:
            return
        self._columns = columns
        cost, access, desktop, tunnels, instance = self._cards
        for card in self._cards:
            self._grid.removeWidget(card)
        if columns == 2:
            self._grid.addWidget(cost, 0, 0)
            self._grid.addWidget(access, 0, 1)
            rows = [desktop, tunnels, instance]
            first = 1
        else:
            rows = self._cards
            first = 0
        for i, card in enumerate(rows):
            self._grid.addWidget(card, first + i, 0, 1, columns)
        for column in (0, 1):
            self._grid.setColumnStretch(column, 1 if column < columns else 0)

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Re-arrange the cards for the new width."""
        self._arrange(2 if event.size().width() >= TWO_COLUMNS_MIN_WIDTH else 1)
        super().resizeEvent(event)

    def set_host(self, context: HostContext | None) -> None:
        """Show `context`'s host (None: no host) in every card."""
        self.context = context
        enabled = context is not None
        for widget in (self.terminal_button, self.copy_button, self.files_button, self.open_tunnel_button,
                       self.start_button, self.stop_button, self.export_button, self.desktop_check_button,
                       self.desktop_start_button):
            widget.setEnabled(enabled)
        if context is not None:
            workspace = context.hub.workspace if context.hub is not None else self.workspace
            if workspace is None:  # shown on its own: a Workspace of its own
                bridge = context.bridge
                workspace = Workspace(lambda coro: bridge.run_async(coro), post=bridge.post)
            self._attach(workspace)
            if workspace.host(context.profile.name) is None:
                workspace.add_host(context.profile)
            settings = workspace.idle.settings(context.profile.name)
            with (QSignalBlocker(self.idle_check), QSignalBlocker(self.pre_stop_edit),
                  QSignalBlocker(self.idle_minutes)):
                self.idle_check.setChecked(settings.stop)
                self.idle_minutes.setValue(int(settings.minutes))
                self.pre_stop_edit.setText(settings.pre_stop)
            record = workspace.host(context.profile.name)
            self.instance_status.setText(record.power_status if record is not None else "")
        self._update_power_buttons()
        self._show_ssh_command()
        self._fill_tunnels()
        self.refresh_cost()

    def _attach(self, workspace: Workspace) -> None:
        """Subscribe once to `workspace` (and no longer to an earlier one)."""
        if workspace is self.workspace:
            return
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.workspace = workspace
        unsubscribe = self._unsubscribe = workspace.subscribe(self._on_change)
        self.destroyed.connect(lambda _obj=None: unsubscribe())

    def _on_change(self, change: Change, host: str) -> None:
        """The Workspace changed something about `host` (on the GUI thread): show it if shown."""
        if self.profile is None or self.profile.name != host:
            return
        if change in (Change.STATE, Change.CONNECTION, Change.TUNNELS):
            self._fill_tunnels()
        if change in (Change.STATE, Change.COST, Change.IDLE):
            self.refresh_cost()
        if change is Change.POWER and self.workspace is not None:
            record = self.workspace.host(host)
            self.instance_status.setText(record.power_status if record is not None else "")

