"""Measured vs datasheet as a horizontal bar chart (pyqtgraph): % of the datasheet peak per check.

One GPU at a time (a combo picks it), so the labels stay legible on an eight-GPU host. Each bar
is coloured by its verdict and carries short ticks at its own pass and warn thresholds (they
differ per kind of check); a dashed line marks 100 % = the datasheet. Figures that could not be
held against a datasheet (CPU harness, slices, unknown models) are not drawn: the chart then says
why instead of showing an empty plot.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPalette
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QStackedWidget, QVBoxLayout, QWidget

from gpuws.core.bench.verdicts import GEMM, GEMM_CHECKS, HOST_LINK, MEMORY, PEER, Outcome, Thresholds, Verdict
from gpuws.ui import theme
from gpuws.ui.bench.verdict_style import check_name, verdict_colour
from gpuws.ui.telemetry.metric_plot import owned_plot_widget
from gpuws.ui.widgets import TintedLabel, heading, muted_label

PAGE_PLOT, PAGE_EMPTY = 0, 1
BAR_HEIGHT = 0.62


def thresholds_for(check: str) -> Thresholds | None:
    """The pass/warn ratios `gpuws.core.bench.verdicts` applies to a check, or None."""
    if check in GEMM_CHECKS:
        return GEMM
    if check in ("mem_copy", "mem_triad"):
        return MEMORY
    if check in ("h2d", "d2h"):
        return HOST_LINK
    if check == "p2p":
        return PEER
    return None


@dataclass(frozen=True)
class ChartBar:
    """One drawn bar: its label, % of datasheet, verdict and threshold percentages."""

    label: str
    percent: float
    verdict: Verdict
    pass_at: float | None
    warn_at: float | None


def chart_bars(outcomes: Sequence[Outcome], gpu: int) -> list[ChartBar]:
    """The bars for one GPU: every figure held against a datasheet (it has a datasheet and a ratio)."""
    bars = []
    for o in outcomes:
        if o.gpu != gpu or o.datasheet is None or o.ratio is None:
            continue
        rule = thresholds_for(o.check)
        label = check_name(o.check) + (f" \u2192 {o.peer}" if o.peer is not None else "")
        bars.append(ChartBar(label, o.ratio * 100, o.verdict,
                             None if rule is None else rule.pass_at * 100,
                             None if rule is None else rule.warn_at * 100))
    return bars


def why_no_bars(outcomes: Sequence[Outcome], gpu: int | None) -> str:
    """Why nothing of this GPU (or run) is drawn: the most common reason among its figures."""
    reasons = Counter(o.reason for o in outcomes
                      if (gpu is None or o.gpu == gpu) and o.verdict is Verdict.INCONCLUSIVE and o.reason
                      and not o.check.startswith("env."))
    if reasons:
        return reasons.most_common(1)[0][0]
    return "No figure of this run can be compared with a datasheet."


class DatasheetChart(QWidget):
    """% of datasheet per check for one GPU of a run."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.outcomes: list[Outcome] = []
        self.gpu_names: dict[int, str] = {}
        self.tag: str | None = None
        self.bars: list[ChartBar] = []
        self._redrawing = False

        self.title = heading("Measured vs datasheet", 1.05, self)
        self.gpu_box = QComboBox(self)
        self.gpu_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.gpu_box.currentIndexChanged.connect(self._on_gpu_chosen)

        # pyqtgraph's context menus are parentless: this ties them to the chart (see its docstring).
        self.plot_widget = owned_plot_widget(self)
        # The window fits 600 px in height (issue 16) with a banner above the tabs too (#35): the
        # splitter gives the chart more room when there is more.
        self.plot_widget.setMinimumHeight(100)
        self.plot: pg.PlotItem = self.plot_widget.getPlotItem()
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.invertY(True)  # first check at the top, as in the table
        self.plot.showGrid(x=True, y=False, alpha=0.15)
        self.plot.setLabel("bottom", "% of datasheet peak")
        self.bar_item = pg.BarGraphItem(x0=[], y=[], height=BAR_HEIGHT, width=[])
        self.plot.addItem(self.bar_item)
        self.pass_ticks = pg.PlotDataItem(connect="pairs")
        self.warn_ticks = pg.PlotDataItem(connect="pairs")
        self.plot.addItem(self.pass_ticks)
        self.plot.addItem(self.warn_ticks)
        self.datasheet_line = pg.InfiniteLine(pos=100, angle=90, movable=False, label="datasheet",
                                              labelOpts={"position": 0.02, "anchors": [(0, 0), (0, 0)]})
        self.plot.addItem(self.datasheet_line, ignoreBounds=True)
        self.value_labels: list[pg.TextItem] = []

        self.empty_label = muted_label("", self)
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.pages = QStackedWidget(self)
        self.pages.addWidget(self.plot_widget)
        self.pages.addWidget(self.empty_label)

        legend = QHBoxLayout()
        legend.setSpacing(14)
        self.legend_labels = [
            TintedLabel("\u258e pass threshold", lambda pal: verdict_colour(Verdict.PASS, pal), self),
            TintedLabel("\u258e warn threshold", lambda pal: verdict_colour(Verdict.WARN, pal), self),
            muted_label("\u2506 100 % = datasheet peak (dense)", self),
        ]
        for label in self.legend_labels:
            legend.addWidget(label)
        legend.addStretch(1)

        header = QHBoxLayout()
        header.addWidget(self.title, 1)
        self.gpu_label = QLabel("GPU", self)
        header.addWidget(self.gpu_label)
        header.addWidget(self.gpu_box)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 4)
        layout.setSpacing(4)
        layout.addLayout(header)
        layout.addWidget(self.pages, 1)
        layout.addLayout(legend)
        self.set_outcomes([], {}, None)

    def set_outcomes(self, outcomes: Sequence[Outcome], gpu_names: Mapping[int, str], tag: str | None) -> None:
        """Show a run's outcomes; `tag` ("SIMULATED", "CPU harness check") leads the title."""
        self.outcomes = list(outcomes)
        self.gpu_names = dict(gpu_names)
        self.tag = tag
        gpus = sorted({o.gpu for o in self.outcomes if o.gpu is not None} | set(self.gpu_names))
        previous = self.gpu_box.currentData()
        self.gpu_box.blockSignals(True)
        self.gpu_box.clear()
        for gpu in gpus:
            name = self.gpu_names.get(gpu)
            self.gpu_box.addItem(f"{gpu}: {name}" if name else str(gpu), gpu)
        if previous in gpus:
            self.gpu_box.setCurrentIndex(gpus.index(previous))
        self.gpu_box.blockSignals(False)
        self.gpu_box.setEnabled(len(gpus) > 1)
        # A CPU harness run has no GPU names: its device numbers are not worth a picker.
        for widget in (self.gpu_label, self.gpu_box):
            widget.setVisible(bool(self.gpu_names))
        self.redraw()

    @property
    def gpu(self) -> int | None:
        """The GPU whose figures are shown, if any."""
        data = self.gpu_box.currentData()
        return data if isinstance(data, int) else None

    def set_gpu(self, gpu: int) -> None:
        """Show GPU `gpu`'s figures (when the run has that GPU)."""
        index = self.gpu_box.findData(gpu)
        if index >= 0:
            self.gpu_box.setCurrentIndex(index)

    def showing_plot(self) -> bool:
        """Whether the chart is shown (not the "nothing to chart" text)."""
        return self.pages.currentIndex() == PAGE_PLOT

    def empty_text(self) -> str:
        """Why there is nothing to chart."""
        return self.empty_label.text()

    def redraw(self) -> None:
        """Draw the chosen GPU's measured figures against the datasheet again."""
        gpu = self.gpu
        self.bars = chart_bars(self.outcomes, gpu) if gpu is not None else []
        prefix = f"{self.tag} \u2014 " if self.tag else ""
        self.title.setText(f"{prefix}Measured vs datasheet")
        for label in self.legend_labels:
            label.setVisible(bool(self.bars))
        if not self.bars:
            if not self.outcomes:
                self.empty_label.setText("Run a benchmark to compare this host's GPUs with their datasheets.")
            else:
                self.empty_label.setText("Nothing drawn for this GPU: " + why_no_bars(self.outcomes, gpu))
            self.pages.setCurrentIndex(PAGE_EMPTY)
            return
        self.pages.setCurrentIndex(PAGE_PLOT)
        self._draw(self.palette())

    def _draw(self, pal: QPalette) -> None:
        text = pal.color(QPalette.ColorRole.WindowText)
        muted = theme.muted_text_colour(pal)
        self.plot_widget.setBackground(pal.color(QPalette.ColorRole.Base))
        for name in ("left", "bottom"):
            axis = self.plot.getAxis(name)
            axis.setPen(theme.border_colour(pal))
            axis.setTextPen(text)
        left = self.plot.getAxis("left")
        left.setTicks([[(i, bar.label) for i, bar in enumerate(self.bars)]])
        longest = max(QFontMetrics(left.style.get("tickFont") or self.font()).horizontalAdvance(b.label)
                      for b in self.bars)
        left.setWidth(longest + 18)  # labels are never clipped

        colours = [verdict_colour(b.verdict, pal) for b in self.bars]
        fills = [theme.tinted(c, pal, 0.35) for c in colours]
        ys = list(range(len(self.bars)))
        self.bar_item.setOpts(x0=[0] * len(ys), y=ys, height=BAR_HEIGHT, width=[b.percent for b in self.bars],
                              brushes=fills, pens=[pg.mkPen(c, width=1) for c in colours])
        self._ticks(self.pass_ticks, [(y, b.pass_at) for y, b in zip(ys, self.bars, strict=True)],
                    verdict_colour(Verdict.PASS, pal))
        self._ticks(self.warn_ticks, [(y, b.warn_at) for y, b in zip(ys, self.bars, strict=True)],
                    verdict_colour(Verdict.WARN, pal))
        self.datasheet_line.setPen(pg.mkPen(muted, width=1, style=Qt.PenStyle.DashLine))
        self.datasheet_line.label.setColor(muted)

        for item in self.value_labels:
            self.plot.removeItem(item)
        self.value_labels = []
        for y, bar in zip(ys, self.bars, strict=True):
            item = pg.TextItem(f"{bar.percent:.0f} %", color=text, anchor=(0, 0.5))
            item.setPos(bar.percent + 1.5, y)
            self.plot.addItem(item, ignoreBounds=True)
            self.value_labels.append(item)
        right = max([120.0, *(b.percent + 14 for b in self.bars)])
        self.plot.setXRange(0, right, padding=0)
        self.plot.setYRange(-0.6, len(self.bars) - 0.4, padding=0)

    @staticmethod
    def _ticks(item: pg.PlotDataItem, points: list[tuple[int, float | None]], colour: QColor) -> None:
        xs: list[float] = []
        ys: list[float] = []
        half = BAR_HEIGHT / 2 + 0.08
        for y, x in points:
            if x is not None:
                xs += [x, x]
                ys += [y - half, y + half]
        item.setData(xs, ys)
        item.setPen(pg.mkPen(colour, width=2.5))

    def changeEvent(self, event: QEvent) -> None:
        """Qt: a palette change redraws the bars in the new colours."""
        super().changeEvent(event)
        changes = (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange)
        if event.type() in changes and not self._redrawing and self.bars:
            self._redrawing = True  # drawing sets palettes of children, which re-enters here
            try:
                self._draw(self.palette())
            finally:
                self._redrawing = False

    def _on_gpu_chosen(self, _index: int) -> None:
        self.redraw()
