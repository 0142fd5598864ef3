"""Earlier runs of this host, and the shown run compared with them and with other hosts.

The list picks which run the tab shows; the table puts each of its figures next to the median
of up to three earlier comparable runs here and the newest comparable run of every other host
(simulated only with simulated, CPU harness only with CPU harness: see `results.comparable`).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gpuws.core.bench.report import run_label
from gpuws.core.bench.results import BenchRun, ComparisonRow
from gpuws.core.bench.verdicts import Verdict
from gpuws.ui.bench.history import HostHistory, comparison_for, short_time
from gpuws.ui.bench.verdict_style import check_name, figure_text, verdict_colour, verdict_text
from gpuws.ui.widgets import heading, muted_label

NOTABLE_CHANGE = 0.10  # a change this large (either way) is coloured
RUN_ROLE = Qt.ItemDataRole.UserRole + 1


def run_tag(run: BenchRun) -> str:
    """'SIMULATED', 'CPU harness check', or '' for a GPU measurement."""
    if run.simulated:
        return "SIMULATED"
    return "CPU harness check" if run.harness == "cpu" else ""


class HistoryView(QWidget):
    """This host's runs (newest first) and the comparison of the shown run."""

    run_selected = Signal(object)  # BenchRun chosen in the list

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history: HostHistory | None = None
        self.shown: BenchRun | None = None
        self.rows: list[ComparisonRow] = []
        self.labels: list[str] = []

        self.runs_list = QTreeWidget(self)
        self.runs_list.setHeaderLabels(["Started (UTC)", "Mode", "Verdict", "Kind"])
        self.runs_list.setRootIsDecorated(False)
        self.runs_list.setUniformRowHeights(True)
        self.runs_list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.runs_list.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.runs_list.itemSelectionChanged.connect(self._on_selection)

        self.compare_title = heading("Compared with earlier runs and other hosts", 1.05, self)
        self.compare_note = muted_label("", self)
        self.compare_note.setWordWrap(True)
        self.compare_table = QTableWidget(self)
        self.compare_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.compare_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.compare_table.verticalHeader().setVisible(False)
        self.compare_table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 10)
        self.compare_table.setAlternatingRowColors(True)
        self.compare_table.setShowGrid(False)
        self.compare_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.compare_table.horizontalHeader().setStretchLastSection(True)

        runs_box = QWidget(self)
        runs_layout = QVBoxLayout(runs_box)
        runs_layout.setContentsMargins(0, 0, 0, 0)
        runs_layout.addWidget(heading("Runs on this host", 1.05, runs_box))
        runs_layout.addWidget(self.runs_list, 1)
        compare_box = QWidget(self)
        compare_layout = QVBoxLayout(compare_box)
        compare_layout.setContentsMargins(0, 0, 0, 0)
        for label in (self.compare_title, self.compare_note):
            label.setWordWrap(True)  # a narrow window wraps the text rather than widening the tab
        compare_layout.addWidget(self.compare_title)
        compare_layout.addWidget(self.compare_note)
        compare_layout.addWidget(self.compare_table, 1)
        compare_layout.addStretch(0)
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(runs_box)
        splitter.addWidget(compare_box)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        # Wide enough for date, mode, verdict and kind without a scroll bar.
        metrics = self.runs_list.fontMetrics()
        runs_box.setMinimumWidth(metrics.horizontalAdvance("2024-05-01 12:03  quick  ? INCONCLUSIVE  SIMULATED") + 24)
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)
        self.set_history(None, None)

    def set_history(self, history: HostHistory | None, shown: BenchRun | None) -> None:
        """List `history`'s runs and compare `shown` (one of them, or None)."""
        self.history = history
        self.runs_list.blockSignals(True)
        self.runs_list.clear()
        for run in reversed(history.runs if history else []):
            verdict = run.verdict()
            item = QTreeWidgetItem([short_time(run.started_at), run.mode, verdict_text(verdict), run_tag(run)])
            item.setData(0, RUN_ROLE, run)
            item.setForeground(2, QBrush(verdict_colour(verdict, self.palette())))
            label = run_label(run)
            if label:
                item.setToolTip(3, label)
            self.runs_list.addTopLevelItem(item)
            if run is shown:
                item.setSelected(True)
        self.runs_list.blockSignals(False)
        self.show_comparison(shown)

    def show_comparison(self, run: BenchRun | None) -> None:
        self.shown = run
        if run is None or self.history is None:
            self.rows, self.labels = [], []
            self.compare_note.setText("No run to compare yet.")
            self._fill([], [])
            self.compare_table.hide()
            return
        rows = [r for r in comparison_for(run, self.history) if r.others]
        labels = sorted({label for r in rows for label in r.others}, key=lambda s: (not s.startswith("earlier"), s))
        self.rows, self.labels = rows, labels
        if rows:
            self.compare_note.setText(f"Run of {short_time(run.started_at)} UTC against the median of "
                                      f"{len(labels)} comparable run(s); changes of 10 % or more are coloured.")
        else:
            self.compare_note.setText("No comparable run yet: earlier runs and other hosts appear here "
                                      "(simulated runs only next to simulated ones, CPU harness checks "
                                      "only next to CPU harness checks).")
        self._fill(rows, labels)
        self.compare_table.setVisible(bool(rows))

    def _fill(self, rows: Sequence[ComparisonRow], labels: Sequence[str]) -> None:
        headers = ["Check", "GPU", "This run", "Median of others", "Change", *labels]
        table = self.compare_table
        table.clear()
        table.setColumnCount(len(headers))
        table.setHorizontalHeaderLabels(headers)
        table.setRowCount(len(rows))
        pal = self.palette()
        for i, row in enumerate(rows):
            change = "\u2014" if row.change is None else f"{row.change:+.1%}"
            cells = [check_name(row.check), "" if row.gpu is None else str(row.gpu),
                     figure_text(row.measured, row.unit), figure_text(row.baseline, row.unit), change,
                     *(figure_text(row.others.get(label), row.unit) if label in row.others else "\u2014"
                       for label in labels)]
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if column >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                table.setItem(i, column, item)
            if row.change is not None and abs(row.change) >= NOTABLE_CHANGE:
                # Lower is worse for every figure here except mismatches, which are not compared.
                colour = verdict_colour(Verdict.PASS if row.change > 0 else Verdict.WARN, pal)
                change_item = table.item(i, 4)
                assert change_item is not None
                change_item.setForeground(QBrush(colour))
                change_item.setToolTip("faster than the others" if row.change > 0 else "slower than the others")

    def cell(self, row: int, column: int) -> str:
        item = self.compare_table.item(row, column)
        return "" if item is None else item.text()

    def run_count(self) -> int:
        return self.runs_list.topLevelItemCount()

    def select_run(self, index: int) -> None:
        """Select the `index`-th listed run (0 = newest)."""
        item = self.runs_list.topLevelItem(index)
        if item is not None:
            self.runs_list.setCurrentItem(item)

    def _on_selection(self) -> None:
        items = self.runs_list.selectedItems()
        if items:
            run = items[0].data(0, RUN_ROLE)
            if isinstance(run, BenchRun):
                self.run_selected.emit(run)
