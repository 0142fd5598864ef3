"""The resize history of one host, from the audit log: time, GPU, before → after, outcome."""

from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from gpuws.core.resize.audit import AuditRecord
from gpuws.ui import theme
from gpuws.ui.resize.common import Section, success_colour
from gpuws.ui.widgets import muted_label

COLUMNS = ("When", "GPU", "Before \u2192 after", "Target", "Outcome")
MAX_ROWS = 200  # the newest; the file keeps everything


def when_text(iso: str) -> str:
    """'2024-05-01 14:03' in local time; the stored text when it is not a timestamp."""
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso


class AuditView(Section):
    """Every resize on this host, newest first, with the outcome coloured by how it ended."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Resize history", parent)
        self.records: list[AuditRecord] = []
        self.empty = muted_label("No resizes on this host yet.", self)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.setMinimumHeight(140)
        header = self.table.horizontalHeader()
        for col in range(len(COLUMNS) - 1):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.body.addWidget(self.empty)
        self.body.addWidget(self.table)
        self.show_records([])

    def show_records(self, records: list[AuditRecord]) -> None:
        """Show `records` (oldest first, as AuditLog.read returns them) newest first."""
        self.records = list(reversed(records))[:MAX_ROWS]
        self.table.setRowCount(len(self.records))
        pal = self.palette()
        for row, record in enumerate(self.records):
            after = record.after or "unknown"
            cells = (
                when_text(record.started_at),
                "—" if record.gpu is None else str(record.gpu),
                f"{record.before or '—'} \u2192 {after}",
                record.target,
                record.outcome,
            )
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip("\n".join(record.log[-12:]) if record.log else text)
                if col == 1:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                self.table.setItem(row, col, item)
            outcome = item  # the last column
            if record.ok:
                outcome.setForeground(success_colour(pal))
            elif record.outcome.startswith("rolled back"):
                outcome.setForeground(theme.warning_colour(pal))
            else:
                outcome.setForeground(theme.error_colour(pal))
        self.empty.setVisible(not self.records)
        self.table.setVisible(bool(self.records))
