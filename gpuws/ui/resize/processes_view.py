"""What will be stopped: the compute processes on the GPU, and the explicit checkbox to stop them."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QCheckBox, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from gpuws.core.nvsmi.compute_apps import ComputeApp
from gpuws.ui.formatting import memory_text
from gpuws.ui.resize.common import Section
from gpuws.ui.widgets import Banner, BannerKind, muted_label


class ProcessesView(Section):
    """Busy processes (pid, name, memory) with 'Stop these processes'; reset blockers as a warning.

    Signal `changed()` when the checkbox flips (the Apply button depends on it).
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("What will be stopped", parent)
        self.processes: list[ComputeApp] = []
        self.message = muted_label("", self)
        self.message.setWordWrap(True)
        self.table = QTableWidget(0, 3, self)
        self.table.setHorizontalHeaderLabels(("PID", "Process", "GPU memory"))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setShowGrid(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.stop_checkbox = QCheckBox("Stop these processes (SIGTERM, then SIGKILL after 10 s); unsaved work is lost",
                                       self)
        self.stop_checkbox.toggled.connect(lambda _on: self.changed.emit())
        self.blockers = Banner(BannerKind.WARNING, "", self)
        for widget in (self.message, self.table, self.stop_checkbox, self.blockers):
            self.body.addWidget(widget)
        self.show_processes(None, [], [])

    @property
    def stop_requested(self) -> bool:
        return bool(self.processes) and self.stop_checkbox.isChecked()

    @property
    def blocking(self) -> bool:
        """True while busy processes would make the resize refuse (the box is not ticked)."""
        return bool(self.processes) and not self.stop_checkbox.isChecked()

    def show_processes(self, gpu_index: int | None, processes: list[ComputeApp], blockers: list[str]) -> None:
        self.processes = list(processes)
        self.stop_checkbox.setChecked(False)  # never carried over from another plan
        busy = bool(self.processes)
        if gpu_index is None:
            self.message.setText("")
        elif busy:
            self.message.setText(
                f"GPU {gpu_index} is in use. The resize is refused unless these processes stop first; "
                "stop them yourself, or tick the box to have them stopped."
            )
        else:
            self.message.setText(f"No compute processes on GPU {gpu_index}: nothing will be stopped.")
        self.table.setRowCount(len(self.processes))
        for row, app in enumerate(self.processes):
            cells = (str(app.pid), app.process_name, memory_text(app.used_memory_mib))
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col != 1:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, col, item)
        if busy:  # as tall as its rows: a short list should not scroll
            height = self.table.horizontalHeader().height() + sum(
                self.table.rowHeight(r) for r in range(len(self.processes))) + 4
            self.table.setFixedHeight(min(height, 200))
        self.table.setVisible(busy)
        self.stop_checkbox.setVisible(busy)
        self.blockers.set_text("May block the MIG mode change or GPU reset: " + "; ".join(blockers))
        self.blockers.setVisible(bool(blockers))
