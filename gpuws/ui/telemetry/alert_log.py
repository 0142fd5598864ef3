"""The alert log: every alert fired, newest first, with when (and whether) it cleared."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QVBoxLayout, QWidget

from gpuws.core.telemetry.alerts import Alert, AlertKind, Severity
from gpuws.ui import theme

KIND_LABELS: dict[str, str] = {
    AlertKind.OOM_RISK: "OOM risk",
    AlertKind.THERMAL_THROTTLE: "Thermal throttle",
    AlertKind.POWER_THROTTLE: "Power throttle",
    AlertKind.ECC_ERRORS: "ECC errors",
    AlertKind.HOST_UNREACHABLE: "Host unreachable",
    AlertKind.IDLE_GPU: "Idle GPU",
}
COLUMNS = ("Time", "Host", "GPU", "Kind", "Message", "Cleared")

Index = QModelIndex | QPersistentModelIndex


def clock_text(t: float) -> str:
    """'14:03:12' today, 'Jul 14 14:03' on another day."""
    local = time.localtime(t)
    same_day = time.strftime("%Y%m%d", local) == time.strftime("%Y%m%d")
    return time.strftime("%H:%M:%S" if same_day else "%b %d %H:%M", local)


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind.replace("_", " "))


class AlertTableModel(QAbstractTableModel):
    """Rows of `Alert`, newest first."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.alerts: list[Alert] = []

    def set_alerts(self, alerts: Sequence[Alert]) -> None:
        self.beginResetModel()
        self.alerts = sorted(alerts, key=lambda a: (a.started_at, a.id), reverse=True)
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self.alerts)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        alert = self.alerts[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(alert, column)
        if role == Qt.ItemDataRole.ToolTipRole and column == 4:
            return alert.message
        if role == Qt.ItemDataRole.ForegroundRole and column == 3 and alert.active:
            owner = self.parent()
            pal = owner.palette() if isinstance(owner, QWidget) else None
            bad = alert.severity in (Severity.CRITICAL, Severity.WARNING)
            return theme.error_colour(pal) if alert.severity is Severity.CRITICAL else (
                theme.warning_colour(pal) if bad else None)
        return None

    @staticmethod
    def text(alert: Alert, column: int) -> str:
        if column == 0:
            return clock_text(alert.started_at)
        if column == 1:
            return alert.host
        if column == 2:
            return "—" if alert.gpu is None else alert.gpu
        if column == 3:
            return kind_label(alert.kind)
        if column == 4:
            return alert.message
        return "active" if alert.cleared_at is None else clock_text(alert.cleared_at)


class AlertLogView(QWidget):
    """A table of the alert log; call `set_alerts` when alerts fire or clear."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = AlertTableModel(self)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.table)

    def set_alerts(self, alerts: Sequence[Alert]) -> None:
        self.model.set_alerts(alerts)

    def rows(self) -> list[list[str]]:
        """The table as text, newest first (for tests and copy)."""
        return [[AlertTableModel.text(a, c) for c in range(len(COLUMNS))] for a in self.model.alerts]
