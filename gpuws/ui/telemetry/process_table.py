"""The process table of one host: pid, user, command, GPU, GPU memory and SM %, sortable, with
"Stop process…" (SIGTERM, then SIGKILL only after a second confirmation) and the host's CPU, load
and memory. Reads run on the loop thread (gpuws.app.hostio); commands are remote text,
shown as plain text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QSortFilterProxyModel, Qt, QTimer
from PySide6.QtGui import QHideEvent, QShowEvent, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QMessageBox,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from gpuws.core.errors import GpuwsError
from gpuws.core.processes import GpuProcess, HostLoad
from gpuws.ui.widgets import muted_label

if TYPE_CHECKING:
    from gpuws.app.workspace import Workspace
    from gpuws.core.runner import CommandRunner
    from gpuws.ui.bridge import AsyncBridge

COLUMNS = ("PID", "User", "Command", "GPU", "GPU memory", "SM")
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
REFRESH_MS = 5000


class ProcessTable(QWidget):
    """Call `set_source(bridge, runner_of)` with the host's runner getter; it refreshes while shown."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.processes: list[GpuProcess] = []
        self.load: HostLoad | None = None
        self._bridge: AsyncBridge | None = None
        self._runner_of: Callable[[], CommandRunner | None] | None = None
        self._workspace: Workspace | None = None
        self._host = ""
        self._reading = False
        # Asked before each signal; tests replace it (a real dialog would block them).
        self.confirm: Callable[[str, str], bool] = self._confirm_dialog

        self.model = QStandardItemModel(0, len(COLUMNS), self)
        self.model.setHorizontalHeaderLabels(list(COLUMNS))
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.table = QTableView(self)
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(4, Qt.SortOrder.DescendingOrder)  # biggest memory first
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)

        self.load_label = muted_label("", self)
        self.status = muted_label("", self)
        self.status.setWordWrap(True)
        self.refresh_button = QPushButton("Refresh", self)
        self.refresh_button.clicked.connect(self.refresh)
        self.stop_button = QPushButton("Stop process…", self)
        self.stop_button.setToolTip("SIGTERM; if it keeps running, SIGKILL after you confirm again")
        self.stop_button.clicked.connect(self.stop_selected)
        bar = QHBoxLayout()
        bar.addWidget(self.load_label, 1)
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.stop_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.status)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self._update_buttons()

    def set_source(self, bridge: AsyncBridge | None, runner_of: Callable[[], CommandRunner | None] | None, *,
                   workspace: Workspace | None = None, host: str = "") -> None:
        """Where to read from: `runner_of()` gives the connected host's runner, or None. "Stop
        process…" goes through `workspace`'s verb `stop_process` for `host` (no workspace: no stop)."""
        self._bridge, self._runner_of = bridge, runner_of
        self._workspace, self._host = workspace, host
        self.model.setRowCount(0)
        self.processes, self.load = [], None
        self.load_label.setText("")
        self.status.setText("")
        if self.isVisible():
            self.refresh()

    def showEvent(self, event: QShowEvent) -> None:
        """Qt: refresh now and every few seconds while shown."""
        super().showEvent(event)
        self.timer.start()
        self.refresh()

    def hideEvent(self, event: QHideEvent) -> None:
        """Qt: no refreshes while hidden."""
        super().hideEvent(event)
        self.timer.stop()

    def refresh(self) -> None:
        """Read the host's GPU processes again (off the GUI thread)."""
        runner = self._runner_of() if self._runner_of is not None else None
        if runner is None or self._bridge is None:
            self.status.setText("Connect to the host to see its processes.")
            return
        if self._reading:
            return
        from gpuws.app.hostio import read_processes

        self._reading = True
        self._bridge.run_async(read_processes(runner), self._on_read, self._on_failed, owner=self)

    def _on_read(self, result: tuple[list[GpuProcess], HostLoad]) -> None:
        self._reading = False
        self.show_processes(*result)

    def _on_failed(self, exc: BaseException) -> None:
        self._reading = False
        self.status.setText(str(exc))

    def show_processes(self, processes: list[GpuProcess], load: HostLoad) -> None:
        """Show `processes` and the host's load, keeping the selection."""
        selected = self.selected()
        self.processes, self.load = list(processes), load
        self.load_label.setText(load.text())
        self.model.setRowCount(0)
        for p in processes:
            cells = [
                (str(p.pid), p.pid),
                (p.user or "—", p.user or ""),
                (p.shown_command, p.shown_command.lower()),
                (p.gpu, int(p.gpu) if p.gpu.isdigit() else 999),
                (f"{p.used_mib / 1024:.1f} GiB" if p.used_mib is not None else "—", p.used_mib or -1),
                (f"{p.sm_pct:.0f} %" if p.sm_pct is not None else "—", p.sm_pct if p.sm_pct is not None else -1.0),
            ]
            row = []
            for text, key in cells:
                item = QStandardItem(text)
                item.setData(key, SORT_ROLE)
                item.setData(p.pid, Qt.ItemDataRole.UserRole)
                if text == p.shown_command:
                    item.setToolTip(text)
                row.append(item)
            for column in (0, 3, 4, 5):
                row[column].setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.model.appendRow(row)
        if selected is not None:
            self.select_pid(selected.pid)
        self.status.setText("No process is using a GPU." if not processes else
                            f"{len(processes)} process{'es' if len(processes) != 1 else ''} on the GPUs")
        self._update_buttons()

    def rows(self) -> list[list[str]]:
        """The table as shown (sorted), for tests."""
        return [[str(self.proxy.index(r, c).data()) for c in range(len(COLUMNS))] for r in range(self.proxy.rowCount())]

    def select_pid(self, pid: int) -> None:
        """Select the row of process `pid`."""
        for r in range(self.proxy.rowCount()):
            if self.proxy.index(r, 0).data(Qt.ItemDataRole.UserRole) == pid:
                self.table.selectRow(r)
                return

    def selected(self) -> GpuProcess | None:
        """The selected process, if any."""
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows:
            return None
        pid = rows[0].data(Qt.ItemDataRole.UserRole)
        return next((p for p in self.processes if p.pid == pid), None)

    def _update_buttons(self) -> None:
        self.stop_button.setEnabled(self.selected() is not None and self._workspace is not None)

    def stop_selected(self) -> None:
        """Ask, then send the selected process SIGTERM."""
        process = self.selected()
        runner = self._runner_of() if self._runner_of is not None else None
        if process is None or runner is None or self._bridge is None:
            return
        what = f"pid {process.pid} ({process.shown_command[:80]})"
        if not self.confirm("Stop process", f"Stop {what}? It is sent SIGTERM and may lose unsaved work."):
            return
        self._signal(runner, process, "TERM")

    def _signal(self, runner: CommandRunner, process: GpuProcess, signal_name: str) -> None:
        bridge, workspace = self._bridge, self._workspace
        if bridge is None or workspace is None:  # the host went away meanwhile
            return
        self.status.setText(f"Sending SIG{signal_name} to pid {process.pid}…")
        self.stop_button.setEnabled(False)

        def done(gone: bool) -> None:
            """Say whether the process is gone."""
            self._update_buttons()
            if gone:
                self.status.setText(f"pid {process.pid} stopped (SIG{signal_name}).")
                self.refresh()
            elif signal_name == "TERM" and self.confirm(
                    "Process still running",
                    f"pid {process.pid} is still running 10 s after SIGTERM. Kill it with SIGKILL?"):
                self._signal(runner, process, "KILL")
            else:
                self.status.setText(f"pid {process.pid} is still running.")

        def failed(exc: BaseException) -> None:
            """Say why it could not be stopped."""
            self._update_buttons()
            self.status.setText(str(exc))

        try:
            work = workspace.stop_process(self._host, process, signal_name, runner=runner)
        except (GpuwsError, KeyError) as exc:  # not connected any more, or no longer a host of it
            failed(exc)
            return
        bridge.run_async(work, done, failed, owner=self)

    def _confirm_dialog(self, title: str, question: str) -> bool:
        box = QMessageBox(QMessageBox.Icon.Warning, title, question,
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, self)
        box.setTextFormat(Qt.TextFormat.PlainText)  # a command line is remote text
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        return box.exec() == QMessageBox.StandardButton.Yes
