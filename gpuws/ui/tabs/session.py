"""The Session tab: running cost and budget, tunnels, terminal, remote desktop, files, and instance
start/stop.

A view of the `Workspace` (gpuws.app.workspace), subscribed once: the Workspace keeps the cost
ledger (the same file `gpuws cost` reads), the idle policy and every host's tunnels, and follows
reconnects; the tab shows the selected host's share of them and passes the user's choices on.
Cost is re-read on a timer and after each ledger write. Remote work always runs on the loop
thread through the bridge.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSignalBlocker, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gpuws.app.costs import IdleSettings
from gpuws.app.tunnels import TunnelRequest
from gpuws.app.workspace import Change, Workspace
from gpuws.core.cost import sessions_csv
from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.core.money import currency_of, money, rate
from gpuws.core.session import HostCost, budget_warning
from gpuws.core.terminal import ssh_command_line, terminal_argv
from gpuws.core.tunnels import PRESETS, Preset, vnc_viewer_argv
from gpuws.ui.tabs import HostContext
from gpuws.ui.widgets import Banner, BannerKind, Card, heading, muted_label

if TYPE_CHECKING:
    from gpuws.app.desktop import DesktopSession, ViewerLaunch
    from gpuws.app.tunnels import Tunnel
    from gpuws.core.desktop import DesktopCheck
    from gpuws.core.runner import CommandResult

REFRESH_MS = 2000
TWO_COLUMNS_MIN_WIDTH = 1100  # narrower (900 px and up): one card a row, never a horizontal scroll bar
GEOMETRIES = ("1280x800", "1600x900", "1920x1080", "2560x1440")


class SessionTab(QWidget):
    """Running cost, budget, tunnels and shutdown for this host.

    Interface: `SessionTab(parent=None, *, workspace=None)`, `set_host(context: HostContext | None)`.
    The Workspace is the context's hub's (the window's), else the one given, else the tab's own.
    """

    def __init__(self, parent: QWidget | None = None, *, workspace: Workspace | None = None) -> None:
        super().__init__(parent)
        self.context: HostContext | None = None
        self.workspace: Workspace | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._budget_shown_for: str | None = None
        self.last_cost: HostCost | None = None
        self._cost_reading = False  # a ledger read is under way (off the GUI thread)
        self._cost_again = False  # ... and another was asked for meanwhile

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
        self.desktop_session: DesktopSession | None = None  # while the tab holds one
        self._viewer: ViewerLaunch | None = None

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh_cost)
        self.timer.start()
        if workspace is not None:
            self._attach(workspace)
        self.set_host(None)

    # -- building -------------------------------------------------------------------------------

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

    def _card(self, parent: QWidget, title: str) -> tuple[Card, QVBoxLayout]:
        card = Card(parent)
        box = QVBoxLayout(card)
        box.setContentsMargins(16, 14, 16, 14)
        box.setSpacing(8)
        box.addWidget(heading(title, 1.1, card))
        return card, box

    def _cost_card(self, parent: QWidget) -> Card:
        card, box = self._card(parent, "Cost")
        self.running_label = heading("—", 2.0, card)
        self.rate_label = muted_label("", card)
        box.addWidget(self.running_label)
        box.addWidget(self.rate_label)
        totals = QGridLayout()
        self.today_label = QLabel("—", card)
        self.month_label = QLabel("—", card)
        totals.addWidget(muted_label("Today", card), 0, 0)
        totals.addWidget(self.today_label, 0, 1)
        totals.addWidget(muted_label("This month", card), 1, 0)
        totals.addWidget(self.month_label, 1, 1)
        totals.setColumnStretch(1, 1)
        box.addLayout(totals)
        self.budget_bar = QProgressBar(card)
        self.budget_bar.setRange(0, 1000)
        self.budget_bar.setTextVisible(True)
        box.addWidget(self.budget_bar)
        self.daily_bar = QProgressBar(card)
        self.daily_bar.setRange(0, 1000)
        self.daily_bar.setTextVisible(True)
        self.daily_bar.hide()
        box.addWidget(self.daily_bar)
        # Budgets: daily and monthly limits (0 = none), a warning at 80 %, an optional stop at 100 %.
        budgets = QHBoxLayout()
        self.daily_budget_spin = QDoubleSpinBox(card)
        self.monthly_budget_spin = QDoubleSpinBox(card)
        for spin in (self.daily_budget_spin, self.monthly_budget_spin):
            spin.setRange(0.0, 1_000_000.0)
            spin.setDecimals(2)
            spin.setSpecialValueText("none")
            spin.setToolTip("Spending limit; a warning shows at 80 %")
        self.stop_at_budget_check = QCheckBox("Stop at 100 %", card)
        self.stop_at_budget_check.setToolTip("Stop the instance (through its provider) when a budget is used up")
        self.save_budget_button = QPushButton("Set budget", card)
        self.save_budget_button.clicked.connect(self.save_budget)
        # Two rows, so the card fits the narrow (one-column) arrangement at 900 px without clipping.
        budgets.addWidget(muted_label("Daily", card))
        budgets.addWidget(self.daily_budget_spin)
        budgets.addWidget(muted_label("Monthly", card))
        budgets.addWidget(self.monthly_budget_spin)
        budgets.addStretch(1)
        box.addLayout(budgets)
        budget_actions = QHBoxLayout()
        budget_actions.addWidget(self.stop_at_budget_check)
        budget_actions.addStretch(1)
        budget_actions.addWidget(self.save_budget_button)
        box.addLayout(budget_actions)
        self.export_button = QPushButton("Export history (CSV)…", card)
        self.export_button.clicked.connect(self.export_csv)
        self.export_status = muted_label("", card)  # where the last export went, or why it failed
        self.export_status.setWordWrap(True)
        self.export_status.setVisible(False)
        row = QHBoxLayout()
        row.addWidget(self.export_button)
        row.addWidget(self.export_status, 1)
        box.addLayout(row)
        return card

    def _access_card(self, parent: QWidget) -> Card:
        card, box = self._card(parent, "Terminal and files")
        self.ssh_label = QLabel("", card)
        self.ssh_label.setWordWrap(True)
        self.ssh_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        font = self.ssh_label.font()
        font.setFamily("monospace")
        self.ssh_label.setFont(font)
        box.addWidget(self.ssh_label)
        row = QHBoxLayout()
        self.terminal_button = QPushButton("Open terminal", card)
        self.terminal_button.setToolTip("Your terminal with `gpuws shell`: inside tmux on the host, so work survives "
                                        "a dropped connection")
        self.terminal_button.clicked.connect(self.open_terminal)
        self.copy_button = QPushButton("Copy ssh command", card)
        self.copy_button.clicked.connect(self.copy_ssh_command)
        self.files_button = QPushButton("Browse files…", card)
        self.files_button.clicked.connect(self.open_files)
        row.addWidget(self.terminal_button)
        row.addWidget(self.copy_button)
        row.addWidget(self.files_button)
        row.addStretch(1)
        box.addLayout(row)
        self.access_status = muted_label("", card)
        self.access_status.setWordWrap(True)
        box.addWidget(self.access_status)
        box.addStretch(1)
        return card

    def _tunnel_card(self, parent: QWidget) -> Card:
        card, box = self._card(parent, "Tunnels")
        row = QHBoxLayout()
        self.preset_combo = QComboBox(card)
        for preset in (Preset.JUPYTER, Preset.TENSORBOARD, Preset.VNC, Preset.DCV, Preset.NOVNC, Preset.CUSTOM):
            self.preset_combo.addItem(PRESETS[preset].label, preset.value)
        self.preset_combo.currentIndexChanged.connect(self._on_preset)
        self.remote_spin = QSpinBox(card)
        self.remote_spin.setRange(0, 65535)
        self.remote_spin.setSpecialValueText("auto")
        self.local_spin = QSpinBox(card)
        self.local_spin.setRange(0, 65535)
        self.local_spin.setSpecialValueText("auto")
        self.open_tunnel_button = QPushButton("Open tunnel", card)
        self.open_tunnel_button.clicked.connect(self.open_tunnel)
        # The service on one row, its ports and Open on the next: fits the narrow arrangement at 900 px.
        row.addWidget(muted_label("Service", card))
        row.addWidget(self.preset_combo)
        row.addStretch(1)
        box.addLayout(row)
        ports = QHBoxLayout()
        for label, widget in (("Remote port", self.remote_spin), ("Local port", self.local_spin)):
            ports.addWidget(muted_label(label, card))
            ports.addWidget(widget)
        ports.addStretch(1)
        ports.addWidget(self.open_tunnel_button)
        box.addLayout(ports)
        self.tunnel_table = QTableWidget(0, 4, card)
        self.tunnel_table.setHorizontalHeaderLabels(["Service", "Local URL", "On the host", "State"])
        header = self.tunnel_table.horizontalHeader()
        for column in (0, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.tunnel_table.verticalHeader().setVisible(False)
        self.tunnel_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.tunnel_table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.tunnel_table.setMinimumHeight(90)
        self.tunnel_table.setMaximumHeight(180)
        box.addWidget(self.tunnel_table)
        buttons = QHBoxLayout()
        self.browse_tunnel_button = QPushButton("Open in browser", card)
        self.browse_tunnel_button.clicked.connect(self.open_selected_tunnel)
        self.copy_url_button = QPushButton("Copy URL", card)
        self.copy_url_button.setToolTip("Copy the tunnel's URL (with its login token, where it has one) to the "
                                        "clipboard")
        self.copy_url_button.clicked.connect(self.copy_selected_url)
        self.close_tunnel_button = QPushButton("Close tunnel", card)
        self.close_tunnel_button.clicked.connect(self.close_selected_tunnel)
        self.tunnel_status = muted_label("", card)
        self.tunnel_status.setWordWrap(True)
        buttons.addWidget(self.browse_tunnel_button)
        buttons.addWidget(self.copy_url_button)
        buttons.addWidget(self.close_tunnel_button)
        buttons.addWidget(self.tunnel_status, 1)
        box.addLayout(buttons)
        self._on_preset()
        return card

    def _desktop_card(self, parent: QWidget) -> Card:
        card, box = self._card(parent, "Desktop")
        self.desktop_info = muted_label("A remote desktop on the host (VNC on its 127.0.0.1 only, through the SSH "
                                        "connection). Check the host first: nothing is installed without your yes.",
                                        card)
        self.desktop_info.setWordWrap(True)
        box.addWidget(self.desktop_info)
        self.desktop_labels = Banner(BannerKind.WARNING, "", card)  # the honest labels (llvmpipe, no NVENC)
        self.desktop_labels.setVisible(False)
        box.addWidget(self.desktop_labels)
        row = QHBoxLayout()
        self.desktop_check_button = QPushButton("Check host", card)
        self.desktop_check_button.clicked.connect(self.check_desktop)
        self.desktop_install_button = QPushButton("Install…", card)
        self.desktop_install_button.setVisible(False)
        self.desktop_install_button.clicked.connect(self.install_desktop)
        self.geometry_combo = QComboBox(card)
        self.geometry_combo.addItems(GEOMETRIES)
        self.geometry_combo.setCurrentText("1920x1080")
        self.desktop_start_button = QPushButton("Start desktop", card)
        self.desktop_start_button.setToolTip("Start the desktop (or reuse the running one) and open a VNC viewer")
        self.desktop_start_button.clicked.connect(self.start_desktop)
        self.desktop_browser_button = QPushButton("In browser", card)
        self.desktop_browser_button.setToolTip("noVNC through websockify on the host")
        self.desktop_browser_button.clicked.connect(self.open_desktop_in_browser)
        self.desktop_stop_button = QPushButton("Stop desktop", card)
        self.desktop_stop_button.clicked.connect(self.stop_desktop)
        for button in (self.desktop_browser_button, self.desktop_stop_button):
            button.setEnabled(False)
        # Check first, then start: two rows, so the card fits the narrow arrangement at 900 px.
        row.addWidget(self.desktop_check_button)
        row.addWidget(self.desktop_install_button)
        row.addStretch(1)
        box.addLayout(row)
        start_row = QHBoxLayout()
        start_row.addWidget(muted_label("Size", card))
        start_row.addWidget(self.geometry_combo)
        start_row.addWidget(self.desktop_start_button)
        start_row.addWidget(self.desktop_browser_button)
        start_row.addWidget(self.desktop_stop_button)
        start_row.addStretch(1)
        box.addLayout(start_row)
        self.desktop_status = muted_label("", card)
        self.desktop_status.setWordWrap(True)
        self.desktop_status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.addWidget(self.desktop_status)
        self.desktop_check: DesktopCheck | None = None
        return card

    def _instance_card(self, parent: QWidget) -> Card:
        card, box = self._card(parent, "Instance")
        row = QHBoxLayout()
        self.start_button = QPushButton("Start instance", card)
        self.start_button.clicked.connect(lambda: self.power("start"))
        self.stop_button = QPushButton("Stop instance", card)
        self.stop_button.clicked.connect(lambda: self.power("stop"))
        row.addWidget(self.start_button)
        row.addWidget(self.stop_button)
        row.addStretch(1)
        box.addLayout(row)
        idle_row = QHBoxLayout()
        self.idle_check = QCheckBox("Stop when idle for", card)
        self.idle_minutes = QSpinBox(card)
        self.idle_minutes.setRange(1, 1440)
        self.idle_minutes.setValue(30)
        self.idle_minutes.setSuffix(" min")
        self.pre_stop_edit = QLineEdit(card)
        self.pre_stop_edit.setPlaceholderText("pre-stop command on the host, e.g. python save_checkpoint.py")
        # Per host: each host has its own "stop when idle" choice and pre-stop command.
        self.idle_check.toggled.connect(self._remember_auto_stop)
        self.idle_minutes.valueChanged.connect(self._remember_auto_stop)
        self.pre_stop_edit.textChanged.connect(self._remember_auto_stop)
        idle_row.addWidget(self.idle_check)
        idle_row.addWidget(self.idle_minutes)
        idle_row.addWidget(self.pre_stop_edit, 1)
        box.addLayout(idle_row)
        self.instance_status = muted_label("GPUs idle with no session or tunnel in use trigger a warning with "
                                           "the money spent idle.", card)
        self.instance_status.setWordWrap(True)
        box.addWidget(self.instance_status)
        return card

    # -- host -----------------------------------------------------------------------------------

    @property
    def profile(self) -> HostProfile | None:
        return self.context.profile if self.context is not None else None

    def set_host(self, context: HostContext | None) -> None:
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

    def _update_power_buttons(self) -> None:
        """Start/stop only with a provider to ask; otherwise say how to add one (issue 16)."""
        profile = self.profile
        provider = profile.provider.kind if profile is not None else None
        usable = profile is not None and bool(provider) and not profile.simulated
        for button in (self.start_button, self.stop_button):
            button.setEnabled(usable)
            button.setToolTip("" if usable else (
                "The demo host has no cloud instance to start or stop" if profile is not None and profile.simulated
                else "No cloud provider is set for this host: add one with Host ▸ Edit… to start and stop it"))

    def _connection(self) -> Any:
        if self.context is None or self.context.session.connection is None:
            self.tunnel_status.setText("Connect to the host first.")
            self.access_status.setText("Connect to the host first.")
            return None
        return self.context.session.connection

    # -- cost -----------------------------------------------------------------------------------

    def refresh_cost(self) -> None:
        """Re-read the shown host's cost from the ledger, off the GUI thread (one read at a time)."""
        profile = self.profile
        if profile is None:
            self.running_label.setText("—")
            self.rate_label.setText("Select a host.")
            return
        workspace, context = self.workspace, self.context
        if workspace is None or context is None or not context.bridge.running:
            return  # nothing to read with (or the app is closing)
        if self._cost_reading:
            self._cost_again = True  # read again once this one is back: never a pile of reads
            return
        self._cost_reading = True
        costs, now = workspace.costs, time.time()
        context.bridge.run_blocking(lambda: costs.host_cost(profile, now),
                                    lambda cost: self._cost_read(profile, cost),
                                    lambda exc: self._cost_read(profile, None, exc), owner=self)

    def _cost_read(self, profile: HostProfile, cost: HostCost | None, error: BaseException | None = None) -> None:
        self._cost_reading = False
        if self._cost_again:
            self._cost_again = False
            self.refresh_cost()
            return
        if self.profile is not profile or self.workspace is None:
            return  # another host is shown now
        if cost is None:
            self.rate_label.setText(str(error) if isinstance(error, GpuwsError | OSError)
                                    else f"cost ledger: {type(error).__name__}")
            return
        self._show_cost(profile, cost, self.workspace)

    def _show_cost(self, profile: HostProfile, cost: HostCost, workspace: Workspace) -> None:
        self.last_cost = cost
        cur = cost.currency
        self.running_label.setText(money(cost.running, cur) if cost.running is not None else "not running")
        price = rate(cost.price_per_hour, cur) if cost.price_per_hour else "no hourly price set"
        slice_text = f" · {cost.slice_profile}" if cost.slice_profile else ""
        self.rate_label.setText(f"this session · {price}{slice_text}")
        self.today_label.setText(money(cost.daily, cur))
        self.month_label.setText(money(cost.monthly, cur))
        for bar, status in ((self.budget_bar, cost.budget), (self.daily_bar, cost.daily_budget)):
            if status is not None and status.budget:
                bar.setVisible(True)
                bar.setValue(min(1000, int(1000 * status.spent / status.budget)))
                bar.setFormat(f"{money(status.spent, cur)} of {money(status.budget, cur)} {status.period} budget")
            else:
                bar.setVisible(False)
        self._show_budget(profile)
        warning = budget_warning(cost)
        workspace.enforce_budget(cost)  # the policy (stop at 100 %, once) is the Workspace's
        idle = workspace.idle.warnings.get(profile.name)
        record = workspace.host(profile.name)
        if record is not None and record.cost_error:
            self.rate_label.setText(f"cost ledger: {record.cost_error}")
        self.banner.setVisible(warning is not None or idle is not None)
        if warning:
            self.banner.set_kind(BannerKind.ERROR if cost.budget.level == "exceeded" else BannerKind.WARNING)
            self.banner.set_text(warning + (f"\n{idle}" if idle else ""))
        elif idle:
            self.banner.set_kind(BannerKind.WARNING)
            self.banner.set_text(idle)

    def _show_budget(self, profile: HostProfile) -> None:
        if self._budget_shown_for == profile.name:
            return  # keep what the user is typing
        self._budget_shown_for = profile.name
        self.daily_budget_spin.setValue(profile.budget_daily or 0.0)
        self.monthly_budget_spin.setValue(profile.budget or 0.0)
        self.stop_at_budget_check.setChecked(profile.budget_stop)
        symbol = money(0, currency_of(profile.currency)).replace("0.00", "").strip()
        for spin in (self.daily_budget_spin, self.monthly_budget_spin):
            spin.setPrefix(symbol if len(symbol) == 1 else "")
            spin.setSuffix("" if len(symbol) == 1 else f" {symbol}")

    def save_budget(self) -> None:
        """Keep the budgets in the host's profile (in memory only for the demo host)."""
        if self.context is None:
            return
        profile = self.context.profile
        profile.budget = self.monthly_budget_spin.value() or None
        profile.budget_daily = self.daily_budget_spin.value() or None
        profile.budget_stop = self.stop_at_budget_check.isChecked()
        if self.workspace is not None:
            self.workspace.budget_changed(profile.name)
        self.refresh_cost()
        if profile.simulated:
            return
        from dataclasses import replace

        from gpuws.core.profiles import ProfileStore

        saved = replace(profile)

        def write() -> None:
            store = ProfileStore()
            current = store.get(saved.name)
            store.update(replace(current, budget=saved.budget, budget_daily=saved.budget_daily,
                                 budget_stop=saved.budget_stop), saved.name)

        self.context.bridge.run_blocking(write, None, lambda exc: self.rate_label.setText(str(exc)), owner=self)

    def export_csv(self, path: str | None = None) -> None:
        target = path or QFileDialog.getSaveFileName(self, "Export session history", "gpuws-sessions.csv",
                                                     "CSV (*.csv)")[0]
        if not target or self.workspace is None or self.context is None:
            return
        ledger = self.workspace.costs.ledger

        def write() -> None:  # the ledger is a locked file and the target may be slow: off the GUI thread
            Path(target).write_text(sessions_csv(ledger.all_sessions(), time.time()), encoding="utf-8")

        self.context.bridge.run_blocking(
            write, lambda _r: self._export_said(f"Exported to {target}"),
            lambda exc: self._export_said(f"Could not export the history: {exc}"), owner=self)

    def _export_said(self, text: str) -> None:
        self.export_status.setText(text)
        self.export_status.setVisible(True)

    # -- terminal and files ---------------------------------------------------------------------

    def _lookup(self, name: str) -> HostProfile:
        from gpuws.core.profiles import ProfileStore

        return ProfileStore().get(name)

    def _show_ssh_command(self) -> None:
        profile = self.profile
        if profile is None:
            self.ssh_label.setText("")
            return
        try:
            self.ssh_label.setText(ssh_command_line(profile, self._lookup))
        except GpuwsError as exc:
            self.ssh_label.setText(str(exc))

    def copy_ssh_command(self) -> None:
        if self.profile is not None:
            QGuiApplication.clipboard().setText(self.ssh_label.text())
            password = getattr(self.context.session, "simulated_password", None) if self.context else None
            # The demo's password is a throwaway for a simulated host on this computer: without it
            # the copied command cannot log in (a real host's password is never shown).
            self.access_status.setText("ssh command copied." + (
                f" The simulated demo host's password is {password}" if password else ""))

    def open_terminal(self) -> None:
        """The user's terminal emulator running `gpuws shell NAME`: tmux on the host, attached again
        after a drop (a plain shell with a warning where the host has no tmux)."""
        if self.profile is None:
            return
        from gpuws.core.desktop import shell_argv

        try:
            argv = terminal_argv(shell_argv(self.profile.name, sys.executable, bool(getattr(sys, "frozen", False))))
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
        except (GpuwsError, OSError) as exc:
            self.access_status.setText(str(exc))

    def open_files(self) -> None:
        connection = self._connection()
        if connection is None or self.context is None:
            return
        from gpuws.ui.file_browser import FileBrowser

        browser = FileBrowser(connection, self.context.bridge)
        browser.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        browser.resize(720, 480)
        browser.show()
        browser.navigate("~")

    # -- tunnels --------------------------------------------------------------------------------

    def _on_preset(self) -> None:
        preset = Preset(self.preset_combo.currentData())
        port = PRESETS[preset].default_port
        # Jupyter: "auto" finds the running server (or starts one) and its token.
        self.remote_spin.setValue(0 if preset is Preset.JUPYTER else port or 0)

    def open_tunnel(self) -> None:
        connection = self._connection()
        if connection is None or self.context is None:
            return
        preset = Preset(self.preset_combo.currentData())
        remote = self.remote_spin.value() or None
        local = self.local_spin.value() or None
        request = TunnelRequest(preset, remote, local)  # the one opener (gpuws.app.tunnels), as the CLI's
        try:
            request.check()  # refuse bad input before going to the host
        except GpuwsError as exc:
            self.tunnel_status.setText(str(exc))
            return
        if self.workspace is None:
            return
        host = self.context.profile.name
        self.tunnel_status.setText("Opening…")
        opened = self.workspace.open_tunnel(host, request, connection=connection)  # kept and rebound there
        opened.add_done_callback(  # settled on the GUI thread (the Workspace's owner)
            lambda f: self._on_tunnel_open(f.result()) if f.exception() is None
            else self.tunnel_status.setText(str(f.exception())))

    def _on_tunnel_open(self, tunnel: Tunnel) -> None:
        self.tunnel_status.setText(tunnel.last_error or f"Tunnel open: {tunnel.display_url}")
        self._fill_tunnels()
        if not tunnel.last_error:
            self._open_url(tunnel)

    def _tunnels(self) -> list[Any]:
        """The shown host's tunnels, as the Workspace keeps them."""
        record = self.workspace.host(self.profile.name) if self.workspace and self.profile else None
        return list(record.tunnels) if record is not None else []

    def _fill_tunnels(self) -> None:
        rows = self._tunnels()
        self.tunnel_table.setRowCount(len(rows))
        for i, tunnel in enumerate(rows):
            # The Workspace decides what the row says ("no answer (host stale)" over "open").
            state = self.workspace.tunnel_text(self.profile.name, tunnel) if self.workspace and self.profile else ""
            for col, text in enumerate((tunnel.spec.info.label, tunnel.display_url, tunnel.remote_label, state)):
                self.tunnel_table.setItem(i, col, QTableWidgetItem(text))

    def _selected_tunnel(self) -> Any:
        rows = self._tunnels()
        index = self.tunnel_table.currentRow()
        return rows[index] if 0 <= index < len(rows) else None

    def _open_url(self, tunnel: Tunnel) -> None:
        from gpuws.ui.external import open_in_browser

        # Never QDesktopServices: it prints the whole URL (token included) on stderr when it fails.
        if tunnel.spec.info.opens_in_browser:
            if not open_in_browser(tunnel.url):  # the token goes to the browser, nowhere else
                token = " (the URL includes the login token)" if getattr(tunnel, "has_token", False) else ""
                self.tunnel_status.setText("No web browser could be opened here. Use Copy URL and paste it "
                                           f"into a browser{token}.")
            return
        viewer = vnc_viewer_argv(tunnel.local_port or 0)
        if viewer:
            subprocess.Popen(viewer, stdin=subprocess.DEVNULL, start_new_session=True)
        elif not open_in_browser(tunnel.url):
            self.tunnel_status.setText(f"No VNC viewer found; connect yours to {tunnel.display_url} "
                                       "(Copy URL puts it on the clipboard)")

    def copy_selected_url(self) -> None:
        """The selected tunnel's full URL (with its token) to the clipboard only."""
        from gpuws.ui.external import copy_to_clipboard

        tunnel = self._selected_tunnel()
        if tunnel is None:
            rows = self._tunnels()
            tunnel = rows[-1] if rows else None
        if tunnel is not None:
            copy_to_clipboard(tunnel.url)
            token = " (with its token)" if getattr(tunnel, "has_token", False) else ""
            self.tunnel_status.setText(f"Copied the URL of {tunnel.spec.info.label}{token} to the clipboard.")

    def open_selected_tunnel(self) -> None:
        tunnel = self._selected_tunnel()
        if tunnel is not None:
            self._open_url(tunnel)

    def close_selected_tunnel(self) -> None:
        tunnel = self._selected_tunnel()
        if tunnel is None or self.profile is None or self.context is None or self.workspace is None:
            return
        self.workspace.remove_tunnel(self.profile.name, tunnel)
        self.context.bridge.run_async(tunnel.close())
        self._fill_tunnels()

    # -- remote desktop (gpuws.app.desktop) --------------------------------------------------------

    def check_desktop(self) -> None:
        """What the host can serve, shown before anything starts."""
        connection = self._connection()
        if connection is None or self.context is None:
            self.desktop_status.setText("Connect to the host first.")
            return
        from gpuws.app import desktop

        self.desktop_status.setText("Checking the host…")
        self.context.bridge.run_async(desktop.check(connection), self.show_desktop_check,
                                      lambda exc: self.desktop_status.setText(str(exc)))

    def show_desktop_check(self, found: DesktopCheck) -> None:
        """Show a `DesktopCheck`: the VNC server, VirtualGL, renderer, NVENC, what is missing."""
        self.desktop_check = found
        renderer = found.opengl_renderer or "unknown"
        parts = [f"VNC server: {found.vnc_server or 'none'}",
                 f"VirtualGL: {'yes' if found.virtualgl else 'no'}",
                 f"OpenGL: {renderer}",
                 f"Session: {found.desktop_session or 'none'}",
                 f"noVNC: {'yes' if found.websockify and found.novnc else 'no'}"]
        if found.running_display is not None:
            parts.append(f"running on :{found.running_display}")
        text = " · ".join(parts)
        if found.missing:
            text += f"\nMissing: {', '.join(found.missing)}"
        if found.install_command:
            text += f"\nInstall with: sudo sh -c '{found.install_command}'"
        self.desktop_status.setText(text)
        labels = found.labels()
        self.desktop_labels.set_text("\n".join(labels))
        self.desktop_labels.setVisible(bool(labels))
        self.desktop_install_button.setVisible(found.install_command is not None and not found.simulated)

    def install_desktop(self) -> None:
        """Install what the check found missing, through sudo on the host, only on the user's yes."""
        connection = self._connection()
        found = self.desktop_check
        if connection is None or self.context is None or found is None or not found.install_command:
            return
        answer = QMessageBox.question(self, "Install on the host",
                                      f"Run this on {self.context.profile.name} with sudo?\n\n{found.install_command}")
        if answer != QMessageBox.StandardButton.Yes:
            return
        from gpuws.app import desktop

        self.desktop_status.setText("Installing on the host…")
        self.context.bridge.run_async(desktop.install(connection, found), self._installed,
                                      lambda exc: self.desktop_status.setText(str(exc)))

    def _installed(self, result: CommandResult | None) -> None:
        if result is not None and not result.ok:
            self.desktop_status.setText(f"The install failed (exit {result.exit_status}): "
                                        f"{result.stderr.strip()[-300:]}")
            return
        self.check_desktop()

    def start_desktop(self) -> None:
        """Start (or reuse) the host's desktop, keep its tunnel with the host, open a viewer."""
        connection = self._connection()
        if connection is None or self.context is None:
            self.desktop_status.setText("Connect to the host first.")
            return
        from gpuws.app import desktop

        host = self.context.profile.name
        self.desktop_status.setText("Starting the desktop…")
        self.desktop_start_button.setEnabled(False)
        geometry = self.geometry_combo.currentText()
        checked = self.desktop_check

        async def start() -> tuple[DesktopCheck, DesktopSession]:
            # The host's honest labels (llvmpipe, no NVENC) are shown with the desktop, checked once.
            found = checked if checked is not None else await desktop.check(connection)
            return found, await desktop.open_desktop(connection, geometry=geometry)

        def started(result: tuple[DesktopCheck, DesktopSession]) -> None:
            if result[0] is not checked:
                self.show_desktop_check(result[0])
            self._desktop_started(host, result[1])

        self.context.bridge.run_async(start(), started, self._desktop_failed)

    def _desktop_failed(self, exc: BaseException) -> None:
        self.desktop_start_button.setEnabled(self.context is not None)
        self.desktop_status.setText(str(exc) if isinstance(exc, GpuwsError | OSError) else type(exc).__name__)

    def _desktop_started(self, host: str, session: DesktopSession) -> None:
        from gpuws.app import desktop

        self.desktop_start_button.setEnabled(True)
        self.desktop_session = session
        if self.workspace is not None:
            # Kept (rebound after a reconnect) by the Workspace; a connected viewer counts as activity.
            self.workspace.add_tunnel(host, session.tunnel)
        again = " (already running: reused)" if session.desktop.reused else ""
        self.desktop_status.setText(f"Desktop :{session.desktop.display}{again} at {session.url}")
        for button in (self.desktop_browser_button, self.desktop_stop_button):
            button.setEnabled(True)
        try:
            self._viewer = desktop.launch_viewer(session)
        except OSError as exc:
            self.desktop_status.setText(f"The VNC viewer did not start: {exc.strerror or exc}")
            return
        if self._viewer is None:
            self.desktop_status.setText(f"Desktop :{session.desktop.display}{again} at {session.url}. No VNC viewer "
                                        "found here (TigerVNC, Remmina…): use In browser, or connect yours.")
        else:
            QTimer.singleShot(int(desktop.VIEWER_READ_S * 1000) + 500, self._forget_password_file)

    def _forget_password_file(self) -> None:
        if self._viewer is not None:
            self._viewer.cleanup(force=True)

    def open_desktop_in_browser(self) -> None:
        """noVNC through websockify on the host, in the user's browser (it asks for the password)."""
        connection = self._connection()
        if connection is None or self.context is None:
            return
        from gpuws.app import desktop

        host = self.context.profile.name
        self.context.bridge.run_async(desktop.open_browser_tunnel(connection),
                                      lambda tunnel: self._browser_tunnel(host, tunnel),
                                      lambda exc: self.desktop_status.setText(str(exc)))

    def _browser_tunnel(self, host: str, tunnel: Tunnel) -> None:
        from gpuws.app.desktop import novnc_url
        from gpuws.ui.external import open_in_browser

        if self.workspace is not None:
            self.workspace.add_tunnel(host, tunnel)
        url = novnc_url(tunnel)
        if not open_in_browser(url):
            self.desktop_status.setText(f"No web browser could be opened here; open {url}")

    def stop_desktop(self) -> None:
        """End the desktop on the host and close its tunnel."""
        connection = self._connection()
        if connection is None or self.context is None:
            return
        from gpuws.app import desktop

        session, self.desktop_session = self.desktop_session, None
        if session is not None and self.workspace is not None:
            self.workspace.remove_tunnel(self.context.profile.name, session.tunnel)
        self._forget_password_file()

        async def stop() -> bool:
            if session is not None:
                await session.tunnel.close()
            return await desktop.stop(connection)

        self.context.bridge.run_async(stop(), lambda stopped: self.desktop_status.setText(
            "Desktop stopped." if stopped else "No desktop was running."),
            lambda exc: self.desktop_status.setText(str(exc)))
        for button in (self.desktop_browser_button, self.desktop_stop_button):
            button.setEnabled(False)

    # -- instance and idle stop -----------------------------------------------------------------

    def _remember_auto_stop(self, *_: object) -> None:
        """The shown host's idle choices go to the Workspace's idle policy (per host)."""
        if self.profile is None or self.workspace is None:
            return
        self.workspace.idle.configure(self.profile.name, IdleSettings(
            stop=self.idle_check.isChecked(), minutes=float(self.idle_minutes.value()),
            pre_stop=self.pre_stop_edit.text()))

    def power(self, action: str) -> None:
        """Start or stop the shown host's instance through the Workspace (its status follows)."""
        if self.context is None or self.workspace is None:
            return
        name = self.context.profile.name
        try:
            self.workspace.power(name, action, pre_stop=self.pre_stop_edit.text())
        except GpuwsError as exc:  # no provider command, a pre-stop line that cannot be split
            self.instance_status.setText(str(exc))
