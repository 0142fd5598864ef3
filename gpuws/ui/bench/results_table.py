"""The table of checks: name, GPU, measured, datasheet, % of datasheet, verdict badge, note.

The verdict column is painted as a coloured badge (glyph and word, colours from the palette)
with the reason in its tooltip. Outcomes come scored from `gpuws.core.bench`; nothing here judges.
Failures come first (then warnings, inconclusive, passes, skipped); every header sorts, and the
table can be filtered to one verdict. `cell`/`tooltip` take source rows (`row_of`), `shown_cell`
takes the row as displayed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QRectF,
    QSize,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QWidget,
)

from gpuws.core.bench.verdicts import Outcome, Verdict
from gpuws.ui import theme
from gpuws.ui.bench.verdict_style import (
    check_name,
    figure_text,
    ratio_text,
    verdict_colour,
    verdict_text,
    where_text,
)

VERDICT_ROLE = Qt.ItemDataRole.UserRole + 1
SORT_ROLE = Qt.ItemDataRole.UserRole + 2
# Worst first: what needs attention is at the top of 70+ rows.
VERDICT_RANK: dict[Verdict, int] = {
    Verdict.FAIL: 0, Verdict.WARN: 1, Verdict.INCONCLUSIVE: 2, Verdict.PASS: 3, Verdict.SKIPPED: 4,
}
AnyIndex = QModelIndex | QPersistentModelIndex


class Column(IntEnum):
    """The table's columns, in order."""
    CHECK = 0
    GPU = 1
    MEASURED = 2
    DATASHEET = 3
    PERCENT = 4
    VERDICT = 5
    NOTE = 6


HEADERS = {
    Column.CHECK: "Check",
    Column.GPU: "GPU",
    Column.MEASURED: "Measured",
    Column.DATASHEET: "Datasheet",
    Column.PERCENT: "% of datasheet",
    Column.VERDICT: "Verdict",
    Column.NOTE: "Note",
}
_RIGHT = (Column.MEASURED, Column.DATASHEET, Column.PERCENT)


class ResultsModel(QAbstractTableModel):
    """Scored outcomes of one run, one row each."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.outcomes: list[Outcome] = []
        self.gpu_names: dict[int, str] = {}

    def set_outcomes(self, outcomes: Sequence[Outcome], gpu_names: Mapping[int, str] | None = None) -> None:
        """Show `outcomes`; `gpu_names` names the GPU column by index."""
        self.beginResetModel()
        self.outcomes = list(outcomes)
        self.gpu_names = dict(gpu_names or {})
        self.endResetModel()

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        """Qt: one row per outcome."""
        return 0 if parent.isValid() else len(self.outcomes)

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        """Qt: one column per `Column`."""
        return 0 if parent.isValid() else len(Column)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        """Qt: the column titles and their alignment."""
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return HEADERS[Column(section)]
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.TextAlignmentRole:
            return _alignment(Column(section))
        return None

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        """Qt: a cell's text, tooltip, alignment, sort key or verdict."""
        if not index.isValid():
            return None
        o = self.outcomes[index.row()]
        column = Column(index.column())
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(o, column)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(o, column)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return _alignment(column)
        if role == VERDICT_ROLE:
            return o.verdict.value  # a plain str: PySide turns a StrEnum into one anyway
        if role == SORT_ROLE:
            return self.sort_key(index.row(), column)
        return None

    def sort_key(self, row: int, column: Column) -> float | str:
        """What a column sorts by: numbers as numbers, verdicts worst first, ties in run order."""
        o = self.outcomes[row]
        if column is Column.VERDICT:
            return VERDICT_RANK.get(o.verdict, 9) * 10_000 + row
        if column is Column.GPU:
            return -1 if o.gpu is None else o.gpu
        if column is Column.MEASURED:
            return float("-inf") if o.measured is None else float(o.measured)
        if column is Column.DATASHEET:
            return float("-inf") if o.datasheet is None else float(o.datasheet)
        if column is Column.PERCENT:
            return float("-inf") if o.ratio is None or o.datasheet is None else float(o.ratio)
        return self.text(o, column).lower()

    def text(self, o: Outcome, column: Column) -> str:
        """The cell text (also what tests read)."""
        if column is Column.CHECK:
            return check_name(o.check)
        if column is Column.GPU:
            return where_text(o)
        if column is Column.MEASURED:
            return figure_text(o.measured, o.unit) if o.measured is not None else "\u2014"
        if column is Column.DATASHEET:
            return figure_text(o.datasheet, o.unit)
        if column is Column.PERCENT:
            # Only a figure held against a datasheet has a "% of datasheet" (scaling's ratio is not one).
            return ratio_text(o.ratio) if o.datasheet is not None else "\u2014"
        if column is Column.VERDICT:
            return verdict_text(o.verdict)
        return o.reason

    def _tooltip(self, o: Outcome, column: Column) -> str | None:
        if column is Column.VERDICT:
            return f"{o.verdict.value.capitalize()}: {o.reason}" if o.reason else o.verdict.value.capitalize()
        if column is Column.GPU and o.gpu is not None:
            names = [self.gpu_names.get(o.gpu, f"GPU {o.gpu}")]
            if o.peer is not None:
                names.append(self.gpu_names.get(o.peer, f"GPU {o.peer}"))
            return " \u2192 ".join(names)
        if column is Column.CHECK:
            return o.check
        if column is Column.NOTE and o.reason:
            return o.reason
        return None

    def row_of(self, check: str, gpu: int | None = None) -> int:
        """The row of a check on a GPU, or -1."""
        return next((i for i, o in enumerate(self.outcomes) if o.check == check and o.gpu == gpu), -1)


def _alignment(column: Column) -> Qt.AlignmentFlag:
    horizontal = Qt.AlignmentFlag.AlignRight if column in _RIGHT else Qt.AlignmentFlag.AlignLeft
    if column in (Column.VERDICT, Column.GPU):
        horizontal = Qt.AlignmentFlag.AlignHCenter
    return horizontal | Qt.AlignmentFlag.AlignVCenter


class VerdictBadgeDelegate(QStyledItemDelegate):
    """Paints the verdict as a rounded badge: tinted fill, coloured edge and text."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: AnyIndex) -> None:
        """Qt: draw the verdict as a coloured badge."""
        try:
            verdict = Verdict(index.data(VERDICT_ROLE))
        except ValueError:
            super().paint(painter, option, index)
            return
        # The selection/hover background first, so a selected row still reads as selected.
        style = option.widget.style() if option.widget is not None else None
        if style is not None:
            opt = QStyleOptionViewItem(option)
            self.initStyleOption(opt, index)
            opt.text = ""
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, option.widget)
        palette: QPalette = option.palette
        colour = verdict_colour(verdict, palette)
        font = badge_font(option.font)
        text = verdict_text(verdict)
        metrics = QFontMetrics(font)
        width = metrics.horizontalAdvance(text) + 16
        height = metrics.height() + 4
        rect = QRectF(option.rect)
        badge = QRectF(rect.center().x() - width / 2, rect.center().y() - height / 2, width, height)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(colour, 1))
        painter.setBrush(theme.tinted(colour, palette, 0.82))
        painter.drawRoundedRect(badge.adjusted(0.5, 0.5, -0.5, -0.5), height / 2, height / 2)
        painter.setFont(font)
        painter.setPen(colour)
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: AnyIndex) -> QSize:
        """Qt: room for the widest verdict badge."""
        metrics = QFontMetrics(badge_font(option.font))
        return QSize(metrics.horizontalAdvance(verdict_text(Verdict.INCONCLUSIVE)) + 28, metrics.height() + 10)


def badge_font(base: QFont) -> QFont:
    """The bold, slightly smaller font verdict badges use, from `base`."""
    font = QFont(base)
    font.setBold(True)
    font.setPointSizeF(max(base.pointSizeF() * 0.85, 7.0))
    return font


class ResultsTable(QTableView):
    """The checks of one run with verdict badges; reasons in tooltips and the Note column."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.results_model = ResultsModel(self)
        self.proxy = _VerdictFilter(self)
        self.proxy.setSourceModel(self.results_model)
        self.proxy.setSortRole(SORT_ROLE)
        self.setModel(self.proxy)
        self.setSortingEnabled(True)
        self.badges = VerdictBadgeDelegate(self)
        self.setItemDelegateForColumn(Column.VERDICT, self.badges)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setAlternatingRowColors(True)
        self.setShowGrid(False)
        self.setWordWrap(False)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(QFontMetrics(self.font()).height() + 12)
        header = self.horizontalHeader()
        header.setHighlightSections(False)
        header.setStretchLastSection(True)
        for column in Column:
            mode = QHeaderView.ResizeMode.Stretch if column is Column.NOTE else QHeaderView.ResizeMode.ResizeToContents
            header.setSectionResizeMode(column, mode)

        self.sortByColumn(Column.VERDICT, Qt.SortOrder.AscendingOrder)  # failures first

    def set_outcomes(self, outcomes: Sequence[Outcome], gpu_names: Mapping[int, str] | None = None) -> None:
        """Show `outcomes` (the filter and sort order stay)."""
        self.results_model.set_outcomes(outcomes, gpu_names)

    def set_verdict_filter(self, verdict: Verdict | None) -> None:
        """Show only rows with `verdict` (None: all)."""
        self.proxy.set_verdict(verdict)

    def shown_rows(self) -> int:
        """How many rows the verdict filter lets through."""
        return self.proxy.rowCount()

    def shown_cell(self, row: int, column: Column) -> str:
        """The text of a row as displayed (sorted and filtered)."""
        source = self.proxy.mapToSource(self.proxy.index(row, column)).row()
        return self.cell(source, column)

    def cell(self, row: int, column: Column) -> str:
        """The text of one cell of the model (not the sorted view)."""
        return self.results_model.text(self.results_model.outcomes[row], column)

    def tooltip(self, row: int, column: Column) -> str | None:
        """The tooltip of one cell of the model, if any."""
        value = self.results_model.data(self.results_model.index(row, column), Qt.ItemDataRole.ToolTipRole)
        return None if value is None else str(value)


class _VerdictFilter(QSortFilterProxyModel):
    verdict: Verdict | None = None

    def set_verdict(self, verdict: Verdict | None) -> None:
        """Show only the rows with `verdict` (all rows for None)."""
        if hasattr(self, "beginFilterChange"):  # Qt 6.9+: invalidateFilter() is deprecated there
            self.beginFilterChange()
            self.verdict = verdict
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self.verdict = verdict
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: AnyIndex) -> bool:
        """Qt: whether a row has the verdict filtered for."""
        if self.verdict is None:
            return True
        model = self.sourceModel()
        return isinstance(model, ResultsModel) and model.outcomes[source_row].verdict is self.verdict


class VerdictBadge(QWidget):
    """The overall verdict of the shown run, as a larger badge (hidden when there is none)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.verdict: Verdict | None = None
        self.setVisible(False)

    def set_verdict(self, verdict: Verdict | None, tooltip: str = "") -> None:
        """Show `verdict` (hidden for None), with `tooltip`."""
        self.verdict = verdict
        self.setToolTip(tooltip)
        self.setVisible(verdict is not None)
        self.updateGeometry()
        self.update()

    def text(self) -> str:
        """The badge's text ("" when there is no verdict)."""
        return "" if self.verdict is None else verdict_text(self.verdict)

    def sizeHint(self) -> QSize:
        """Qt: room for the text in the badge font."""
        metrics = QFontMetrics(badge_font(self.font()))
        return QSize(metrics.horizontalAdvance(self.text() or "X") + 22, metrics.height() + 8)

    def paintEvent(self, event: QPaintEvent) -> None:
        """Qt: draw the badge in the verdict's colour."""
        if self.verdict is None:
            return
        colour = verdict_colour(self.verdict, self.palette())
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        painter.setPen(QPen(colour, 1))
        painter.setBrush(theme.tinted(colour, self.palette(), 0.8))
        painter.drawRoundedRect(rect, rect.height() / 2, rect.height() / 2)
        painter.setFont(badge_font(self.font()))
        painter.setPen(colour)
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, self.text())
