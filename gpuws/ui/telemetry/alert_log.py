"""The alert log: every alert fired, newest first, with severity, how often it was raised, its state.

The view follows the append-only `AlertLog`: a new alert inserts one row at the top, a clear or a
repeat updates its row in place; nothing is rebuilt while the user reads or selects. Above the
table: acknowledge the selected alert, mute its kind on its host, and the minimum hold duration
of a kind (how long its condition must last before it fires)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from gpuws.core.telemetry.alerts import Alert, AlertEngine, AlertEvent, AlertKind, AlertLog, Severity
from gpuws.ui import theme
from gpuws.ui.flow_layout import FlowLayout

KIND_LABELS: dict[str, str] = {
    AlertKind.OOM_RISK: "OOM risk",
    AlertKind.THERMAL_THROTTLE: "Thermal throttle",
    AlertKind.POWER_THROTTLE: "Power throttle",
    AlertKind.ECC_ERRORS: "ECC errors",
    AlertKind.HOST_UNREACHABLE: "Host unreachable",
    AlertKind.IDLE_GPU: "Idle GPU",
    AlertKind.GPU_NOT_REPORTING: "GPU not reporting",
    AlertKind.NOT_EXPORTED: "Not exported",
}
COLUMNS = ("Time", "Severity", "Host", "GPU", "Kind", "Message", "Count", "Status")
COL_SEVERITY, COL_KIND, COL_MESSAGE, COL_COUNT, COL_STATUS = 1, 4, 5, 6, 7
SEVERITY_LABELS: dict[str, str] = {Severity.CRITICAL: "Critical", Severity.WARNING: "Warning", Severity.INFO: "Info"}

Index = QModelIndex | QPersistentModelIndex


def clock_text(t: float) -> str:
    """'14:03:12' today, 'Jul 14 14:03' on another day."""
    local = time.localtime(t)
    same_day = time.strftime("%Y%m%d", local) == time.strftime("%Y%m%d")
    return time.strftime("%H:%M:%S" if same_day else "%b %d %H:%M", local)


def kind_label(kind: str) -> str:
    """An alert kind in words."""
    return KIND_LABELS.get(kind, kind.replace("_", " "))


class AlertTableModel(QAbstractTableModel):
    """Rows of `Alert`, newest first; `add` inserts a row, `update` repaints one."""

    def __init__(self, parent: QWidget | None = None, max_rows: int = 1000) -> None:
        super().__init__(parent)
        self._oldest_first: list[Alert] = []
        self._max_rows = max_rows
        self.resets = 0  # full rebuilds (only `set_alerts`); tests check the log view never needs one

    @property
    def alerts(self) -> list[Alert]:
        """Newest first, as shown."""
        return self._oldest_first[::-1]

    def set_alerts(self, alerts: Sequence[Alert]) -> None:
        """Start from a whole log (once, when the view is built)."""
        self.beginResetModel()
        self._oldest_first = sorted(alerts, key=lambda a: (a.started_at, a.id))[-self._max_rows:]
        self.resets += 1
        self.endResetModel()

    def add(self, alert: Alert) -> None:
        """A new alert: one row at the top (the oldest row goes when the log is full)."""
        if any(a.id == alert.id for a in self._oldest_first[-50:]):
            self.update(alert)  # already there: the view was attached after the log recorded it
            return
        if len(self._oldest_first) >= self._max_rows:
            last = len(self._oldest_first) - 1
            self.beginRemoveRows(QModelIndex(), last, last)
            del self._oldest_first[0]
            self.endRemoveRows()
        self.beginInsertRows(QModelIndex(), 0, 0)
        self._oldest_first.append(alert)
        self.endInsertRows()

    def update(self, alert: Alert) -> None:
        """An alert already shown changed (cleared, raised again, acknowledged)."""
        for i in range(len(self._oldest_first) - 1, -1, -1):
            if self._oldest_first[i].id == alert.id:
                row = len(self._oldest_first) - 1 - i
                self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))
                return
        self.beginInsertRows(QModelIndex(), 0, 0)
        self._oldest_first.append(alert)
        self.endInsertRows()

    def alert_at(self, row: int) -> Alert | None:
        """The alert shown in `row` (newest first), or None."""
        n = len(self._oldest_first)
        return self._oldest_first[n - 1 - row] if 0 <= row < n else None

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        """Qt: one row per alert."""
        return 0 if parent.isValid() else len(self._oldest_first)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        """Qt: one column per heading."""
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        """Qt: the column headings."""
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        """Qt: a cell's text, tooltip or colour."""
        alert = self.alert_at(index.row()) if index.isValid() else None
        if alert is None:
            return None
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(alert, column)
        if role == Qt.ItemDataRole.ToolTipRole and column == COL_MESSAGE:
            return alert.message
        if role == Qt.ItemDataRole.ForegroundRole and column in (COL_SEVERITY, COL_KIND) and alert.active:
            owner = self.parent()
            pal = owner.palette() if isinstance(owner, QWidget) else None
            if alert.severity is Severity.CRITICAL:
                return theme.error_colour(pal)
            return theme.warning_colour(pal) if alert.severity is Severity.WARNING else None
        return None

    @staticmethod
    def text(alert: Alert, column: int) -> str:
        """The text of `alert` in `column`."""
        if column == 0:
            return clock_text(alert.started_at)
        if column == COL_SEVERITY:
            return SEVERITY_LABELS.get(alert.severity, str(alert.severity))
        if column == 2:
            return alert.host
        if column == 3:
            return "—" if alert.gpu is None else alert.gpu
        if column == COL_KIND:
            return kind_label(alert.kind)
        if column == COL_MESSAGE:
            return alert.message
        if column == COL_COUNT:
            return str(alert.count)
        if alert.cleared_at is not None:
            return f"cleared {clock_text(alert.cleared_at)}"
        return "active, seen" if alert.acknowledged else "active"


class AlertLogView(QWidget):
    """The alert log with acknowledge, mute and the hold duration of each kind.

    Wire it to a log with `attach(log, engine)`; feed it each `AlertEvent` with `apply`.
    """

    hold_changed = Signal(object, float)  # AlertKind, seconds

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._log: AlertLog | None = None
        self._engine: AlertEngine | None = None
        self.model = AlertTableModel(self)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(COL_MESSAGE, QHeaderView.ResizeMode.Stretch)

        self.ack_button = QPushButton("Acknowledge", self)
        self.ack_button.setToolTip("Mark the selected alert as seen")
        self.ack_button.clicked.connect(self.acknowledge_selected)
        self.mute_button = QPushButton("Mute this kind on this host", self)
        self.mute_button.setToolTip("No desktop notifications for this kind of alert on this host (still logged)")
        self.mute_button.clicked.connect(self.toggle_mute_selected)
        self.hold_kind = QComboBox(self)
        for kind in AlertKind:
            self.hold_kind.addItem(kind_label(kind), kind)
        self.hold_spin = QSpinBox(self)
        self.hold_spin.setRange(0, 24 * 3600)
        self.hold_spin.setSuffix(" s")
        self.hold_spin.setToolTip("How long the condition must hold before the alert fires")
        self.hold_kind.currentIndexChanged.connect(self._show_hold)
        self.hold_spin.valueChanged.connect(self._on_hold_edited)
        self.muted_label = QLabel(self)
        self.muted_label.setTextFormat(Qt.TextFormat.PlainText)

        bar = FlowLayout(spacing=6)
        bar.addWidget(self.ack_button)
        bar.addWidget(self.mute_button)
        bar.add_stretch()
        bar.addWidget(QLabel("Fire after", self))
        bar.addWidget(self.hold_kind)
        bar.addWidget(QLabel("held for", self))
        bar.addWidget(self.hold_spin)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.muted_label)
        layout.addWidget(self.table)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self._update_buttons()

    def attach(self, log: AlertLog, engine: AlertEngine | None = None) -> None:
        """Show `log` and edit `engine`'s hold durations."""
        self._log, self._engine = log, engine
        self.model.set_alerts(log.entries())
        self._show_hold()
        self._update_buttons()

    def set_alerts(self, alerts: Sequence[Alert]) -> None:
        """Show `alerts`."""
        self.model.set_alerts(alerts)

    def apply(self, event: AlertEvent) -> None:
        """One change from the log: a new row for a new alert, else its row updated."""
        if event.fired and not event.repeat:
            self.model.add(event.alert)
        else:
            self.model.update(event.alert)
        self._update_buttons()

    def selected(self) -> Alert | None:
        """The selected alert, if any."""
        rows = self.table.selectionModel().selectedRows()
        return self.model.alert_at(rows[0].row()) if rows else None

    def acknowledge_selected(self) -> None:
        """Acknowledge the selected alert."""
        alert = self.selected()
        if alert is None:
            return
        if self._log is not None:
            self._log.acknowledge(alert.id)
        alert.acknowledged = True
        self.model.update(alert)
        self._update_buttons()

    def toggle_mute_selected(self) -> None:
        """Mute the selected alert's kind on its host, or unmute it."""
        alert = self.selected()
        if alert is None or self._log is None:
            return
        self._log.mute(alert.host, alert.kind, not self._log.is_muted(alert.host, alert.kind))
        self._update_buttons()

    def _update_buttons(self) -> None:
        alert = self.selected()
        self.ack_button.setEnabled(alert is not None and not alert.acknowledged)
        muted = alert is not None and self._log is not None and self._log.is_muted(alert.host, alert.kind)
        self.mute_button.setEnabled(alert is not None and self._log is not None)
        self.mute_button.setText("Unmute this kind on this host" if muted else "Mute this kind on this host")
        mutes = sorted(self._log.muted()) if self._log is not None else []
        self.muted_label.setText("Muted: " + ", ".join(f"{kind_label(k)} on {h}" for h, k in mutes) if mutes else "")
        self.muted_label.setVisible(bool(mutes))

    def _show_hold(self) -> None:
        if self._engine is None:
            self.hold_spin.setEnabled(False)
            return
        kind = AlertKind(self.hold_kind.currentData())
        hold = self._engine.policy(kind).hold_s
        self.hold_spin.blockSignals(True)
        # A negative hold (idle GPU) means "the profile's idle minutes": show those as unset.
        self.hold_spin.setSpecialValueText("profile" if hold < 0 else "")
        self.hold_spin.setValue(max(0, round(hold)))
        self.hold_spin.setEnabled(True)
        self.hold_spin.blockSignals(False)

    def _on_hold_edited(self, value: int) -> None:
        if self._engine is None:
            return
        kind = AlertKind(self.hold_kind.currentData())
        # The engine runs on the loop thread; replacing one policy is a single dict store.
        self._engine.set_policy(kind, hold_s=float(value))
        self.hold_changed.emit(kind, float(value))

    def rows(self) -> list[list[str]]:
        """The table as text, newest first (for tests and copy)."""
        return [[AlertTableModel.text(a, c) for c in range(len(COLUMNS))] for a in self.model.alerts]
