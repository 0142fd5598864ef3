"""The Cost card: this session's running cost, today and this month, budgets, CSV export.

The cost is re-read from the ledger (the same file `gpuws cost` reads) on the tab's timer and after each
ledger write, off the GUI thread, one read at a time.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QWidget,
)

from gpuws.app.workspace import Workspace
from gpuws.core.cost import sessions_csv
from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.core.money import currency_of, money, rate
from gpuws.core.session import HostCost, budget_warning
from gpuws.ui.tabs.session.base import SessionBase
from gpuws.ui.widgets import BannerKind, Card, heading, muted_label


class CostPart(SessionBase):
    """Running cost, totals and budgets of the shown host."""

    def _cost_card(self, parent: QWidget) -> Card:
        card, box = self._card(parent, "Cost")
        self._budget_shown_for: str | None = None
        self.last_cost: HostCost | None = None
        self._cost_reading = False  # a ledger read is under way (off the GUI thread)
        self._cost_again = False  # ... and another was asked for meanwhile
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
