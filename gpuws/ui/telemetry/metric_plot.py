"""The detail plot of one metric of one device: pyqtgraph, time axis, hover crosshair, NaN gaps.

Set up for long, dense series: clipToView, automatic peak downsampling (spikes survive), no
antialiasing, and `connect='finite'` so NaN rows (disconnects, empty buckets) break the line
instead of drawing across the gap. On a downsampled tier the min..max band is drawn behind the
mean so short peaks stay visible at 24 h.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPointF, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QHBoxLayout,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui import theme
from gpuws.ui.telemetry.gpu_card import device_title
from gpuws.ui.telemetry.metrics import DETAIL_METRICS, series_colour
from gpuws.ui.widgets import Badge, heading

F64 = npt.NDArray[np.float64]

_PERCENT_UNITS = ("%",)
_COLOUR_OF = {
    "util_gpu_pct": "util", "util_mem_pct": "memory", "mem_used_mib": "memory", "temp_c": "temp",
    "power_w": "power", "sm_clock_mhz": "clock", "mem_clock_mhz": "clock", "pcie_rx_kib_s": "pcie",
    "pcie_tx_kib_s": "pcie2", "fan_pct": "util", "enc_util_pct": "pcie", "dec_util_pct": "pcie2",
}


def owned_plot_widget(parent: QWidget, axis_items: dict[str, pg.AxisItem] | None = None) -> pg.PlotWidget:
    """A `pg.PlotWidget` child of `parent` whose context menus are deleted with it.

    pyqtgraph builds its menus (Plot Options and submenus, the ViewBox menu) without a parent, so
    they outlive the plot as hidden top-level windows; here they are reparented to `parent`.
    """
    before = {id(w) for w in QApplication.topLevelWidgets()}
    widget = pg.PlotWidget(axisItems=axis_items)
    widget.setParent(parent)
    for menu in QApplication.topLevelWidgets():
        if id(menu) not in before and isinstance(menu, QMenu) and menu.parent() is None:
            menu.setParent(parent, menu.windowFlags())
    return widget


def configure_plot(plot: pg.PlotItem) -> None:
    """Settings every telemetry plot shares (dense data, gaps, no antialiasing)."""
    plot.setClipToView(True)
    plot.setDownsampling(auto=True, mode="peak")
    plot.showGrid(x=True, y=True, alpha=0.15)
    plot.setMenuEnabled(False)
    plot.hideButtons()


class DetailPlot(QWidget):
    """One metric over the selected window, with labelled axes, a legend and labelled thresholds.

    Hover shows the time and value under the cursor in a boxed readout that stays inside the
    plot and goes away when the mouse leaves it; a "Paused" badge shows when the view is frozen.
    """

    close_requested = Signal()
    export_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host: str | None = None
        self.key: str | None = None
        self.metric_name = "util_gpu_pct"
        self._t: F64 = np.empty(0)
        self._y: F64 = np.empty(0)
        self.oom_pct = 90.0  # the host's OOM-risk threshold, drawn on the memory plot
        self._recolouring = False
        self._memory_total: float | None = None  # the device's memory, the top of the memory plot

        self.title = heading("", 1.05, self)
        self.paused_badge = Badge("Paused: not following new samples", "warning", self)
        self.paused_badge.setVisible(False)
        self.metric_box = QComboBox(self)
        for name, (label, unit) in DETAIL_METRICS.items():
            self.metric_box.addItem(f"{label} ({unit})", name)
        self.metric_box.currentIndexChanged.connect(self._on_metric_chosen)
        self.export_button = QPushButton("Save PNG…", self)
        self.export_button.clicked.connect(self.export_requested)
        self.close_button = QPushButton("Close", self)
        self.close_button.clicked.connect(self.close_requested)

        self.plot_widget = owned_plot_widget(self, {"bottom": pg.DateAxisItem(orientation="bottom")})
        self.plot_widget.setAntialiasing(False)
        self.plot_widget.setMinimumHeight(180)
        self.plot: pg.PlotItem = self.plot_widget.getPlotItem()
        configure_plot(self.plot)
        self.legend = self.plot.addLegend(offset=(10, 5))
        self.plot.setLabel("bottom", "Time")
        for axis in ("left", "bottom"):
            self.plot.getAxis(axis).enableAutoSIPrefix(False)  # "MiB" never becomes "kMiB"
        self.band_top = pg.PlotDataItem(connect="finite", antialias=False)
        self.band_bottom = pg.PlotDataItem(connect="finite", antialias=False)
        self.band = pg.FillBetweenItem(self.band_top, self.band_bottom)
        self.plot.addItem(self.band)
        self.curve = pg.PlotDataItem(connect="finite", antialias=False, name="GPU utilisation")
        self.plot.addItem(self.curve)
        self.threshold_line = pg.InfiniteLine(angle=0, movable=False, label="",
                                              labelOpts={"position": 0.98, "anchors": [(1, 1), (1, 1)]})
        self.threshold_line.setVisible(False)
        self.plot.addItem(self.threshold_line, ignoreBounds=True)
        self.v_line = pg.InfiniteLine(angle=90, movable=False)
        self.h_line = pg.InfiniteLine(angle=0, movable=False)
        self.hover_label = pg.TextItem(anchor=(0, 1), border=None, fill=None)
        self.hover_label.setZValue(100)
        for item in (self.v_line, self.h_line, self.hover_label):
            item.setVisible(False)
            self.plot.addItem(item, ignoreBounds=True)
        self.plot_widget.scene().sigMouseMoved.connect(self._on_mouse_moved)
        # The scene only reports moves: leaving the view must hide the readout itself.
        self.plot_widget.viewport().installEventFilter(self)
        self.plot_widget.installEventFilter(self)
        self.apply_palette()

        header = QHBoxLayout()
        header.addWidget(self.title)
        header.addWidget(self.paused_badge)
        header.addStretch(1)
        header.addWidget(self.metric_box)
        header.addWidget(self.export_button)
        header.addWidget(self.close_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 6, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(header)
        layout.addWidget(self.plot_widget, 1)

    def apply_palette(self) -> None:
        """Colours from the current palette (called again when the theme changes)."""
        pal = self.palette()
        text = pal.color(pal.ColorRole.WindowText)
        self.plot_widget.setBackground(pal.color(pal.ColorRole.Base))
        for axis in ("left", "bottom"):
            ax = self.plot.getAxis(axis)
            ax.setPen(theme.border_colour(pal))
            ax.setTextPen(text)
        colour = series_colour(_COLOUR_OF.get(self.metric_name, "util"), pal)
        self.curve.setPen(pg.mkPen(colour, width=1.5))
        band = QColor(colour)
        band.setAlpha(50)
        self.band.setBrush(band)
        self.band_top.setPen(pg.mkPen(None))
        self.band_bottom.setPen(pg.mkPen(None))
        muted = theme.muted_text_colour(pal)
        self.v_line.setPen(pg.mkPen(muted, style=Qt.PenStyle.DashLine))
        self.h_line.setPen(pg.mkPen(muted, style=Qt.PenStyle.DashLine))
        self.hover_label.setColor(text)
        # A boxed readout: readable over the line and the grid, in either theme.
        box = QColor(pal.color(pal.ColorRole.ToolTipBase))
        box.setAlpha(235)
        self.hover_label.fill = pg.mkBrush(box)
        self.hover_label.border = pg.mkPen(theme.border_colour(pal))
        self.hover_label.setColor(pal.color(pal.ColorRole.ToolTipText))
        warn = theme.warning_colour(pal)
        self.threshold_line.setPen(pg.mkPen(warn, width=1, style=Qt.PenStyle.DashLine))
        self.threshold_line.label.setColor(warn)
        self.legend.setLabelTextColor(text)

    def show_metric(self, host: str, key: str, metric: str) -> None:
        """Plot `metric` of device `key` of `host` from the next refresh on."""
        self.host, self.key = host, key
        self.metric_name = metric if metric in DETAIL_METRICS else "util_gpu_pct"
        self.metric_box.blockSignals(True)
        self.metric_box.setCurrentIndex(self.metric_box.findData(self.metric_name))
        self.metric_box.blockSignals(False)
        self._update_title()
        label, unit = DETAIL_METRICS[self.metric_name]
        self.curve.opts["name"] = label
        self.legend.clear()
        self.legend.addItem(self.curve, label)
        self.plot.setLabel("left", label, units=unit)
        self.threshold_line.setVisible(False)
        self.apply_palette()
        self._t = self._y = np.empty(0)

    def set_threshold(self, value_pct: float | None, text: str = "", *, y: float | None = None) -> None:
        """Draw a labelled threshold ("OOM risk 90 %") at `y` in the plot's unit (None: hide it)."""
        if value_pct is None or y is None:
            self.threshold_line.setVisible(False)
            return
        self.threshold_line.setPos(y)
        self.threshold_line.label.setFormat(text)
        self.threshold_line.setVisible(True)

    def threshold_text(self) -> str:
        """The threshold line's label ("" when it is hidden)."""
        return str(self.threshold_line.label.format) if self.threshold_line.isVisible() else ""

    def legend_names(self) -> list[str]:
        """The names in the legend, in order."""
        return [label.text for _sample, label in self.legend.items]

    def set_paused(self, paused: bool) -> None:
        """Show (or hide) that the plot is frozen while samples keep being recorded."""
        self.paused_badge.setVisible(paused)

    def readout_text(self) -> str:
        """The hover readout ("" when the mouse is not over the plot)."""
        return str(self.hover_label.textItem.toPlainText()) if self.hover_label.isVisible() else ""

    def leave_plot(self) -> None:
        """The mouse left the plot: no readout, no crosshair."""
        for item in (self.v_line, self.h_line, self.hover_label):
            item.setVisible(False)

    def changeEvent(self, event: QEvent) -> None:
        """Qt: a theme switch recolours the plot (it is not a styled widget)."""
        # A theme switch: the plot is not a styled widget, so recolour it by hand (it stayed white).
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange) and not self._recolouring:
            self._recolouring = True
            try:
                self.apply_palette()
            finally:
                self._recolouring = False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Qt: the mouse leaving the plot hides the readout."""
        if event.type() == QEvent.Type.Leave:
            self.leave_plot()
        return super().eventFilter(watched, event)
    def _on_metric_chosen(self, _index: int) -> None:
        if self.host is not None and self.key is not None:
            self.show_metric(self.host, self.key, str(self.metric_box.currentData()))

    def _update_title(self) -> None:
        label, _unit = DETAIL_METRICS[self.metric_name]
        device = device_title(self.key or "", None)
        self.title.setText(f"{self.host} · {device} · {label}")

    def refresh(self, store: TelemetryStore, t_from: float, t_to: float) -> None:
        """Read the metric's history over [t_from, t_to] and plot it."""
        if self.host is None or self.key is None:
            return
        try:
            window = store.window(self.host, self.key, t_from, t_to)
        except KeyError:
            return
        t, y = window.column(self.metric_name)
        self._t, self._y = t, y
        self.curve.setData(t, y, connect="finite")
        if window.bucket_s is not None:
            i = window.metrics.index(self.metric_name)
            self.band_top.setData(t, window.max[:, i].astype(np.float64), connect="finite")
            self.band_bottom.setData(t, window.min[:, i].astype(np.float64), connect="finite")
            self.band.setVisible(True)
        else:
            self.band.setVisible(False)
        self.plot.setXRange(t_from, t_to, padding=0)
        self._draw_threshold(store)
        unit = DETAIL_METRICS[self.metric_name][1]
        if unit in _PERCENT_UNITS:
            self.plot.setYRange(0, 100, padding=0.02)
        elif self._memory_total is not None:
            self.plot.setYRange(0, self._memory_total, padding=0.02)  # the whole card, OOM line included
        else:
            self.plot.enableAutoRange(axis="y")

    def _draw_threshold(self, store: TelemetryStore) -> None:
        """The OOM-risk line on the memory plot, labelled so nobody wonders what it is."""
        self._memory_total = None
        if self.metric_name == "mem_used_mib" and self.host is not None and self.key is not None:
            sample = store.latest(self.host).get(self.key)
            total = sample.mem_total_mib if sample is not None else None
            self._memory_total = total or None
            if total:
                label = f"OOM risk {self.oom_pct:g} %"
                self.set_threshold(self.oom_pct, label, y=total * self.oom_pct / 100.0)
                return
        self.set_threshold(None)

    def plotted(self) -> tuple[F64, F64]:
        """The (t, y) last given to the curve; NaN marks gaps."""
        return self._t, self._y

    def hover_text(self, t: float) -> str | None:
        """'12:04:31  87.0 %' for the sample nearest `t`, or None when there is none there."""
        if self._t.size == 0:
            return None
        i = int(np.clip(np.searchsorted(self._t, t), 0, self._t.size - 1))
        if i > 0 and abs(self._t[i - 1] - t) < abs(self._t[i] - t):
            i -= 1
        value = self._y[i]
        when = time.strftime("%H:%M:%S", time.localtime(float(self._t[i])))
        unit = DETAIL_METRICS[self.metric_name][1]
        return f"{when}  gap" if np.isnan(value) else f"{when}  {value:.1f} {unit}"

    def _on_mouse_moved(self, pos: QPointF) -> None:
        # Only inside the data area (the view box), not over the axes or the legend margin.
        inside = self.plot.vb.sceneBoundingRect().contains(pos)
        text = self.hover_text(self.plot.vb.mapSceneToView(pos).x()) if inside else None
        for item in (self.v_line, self.h_line, self.hover_label):
            item.setVisible(text is not None)
        if text is None:
            return
        point = self.plot.vb.mapSceneToView(pos)
        self.v_line.setPos(point.x())
        self.h_line.setPos(point.y())
        self.hover_label.setText(text)
        # Keep the box inside the plot: flip it left of / below the cursor near the right / top edge.
        box = self.plot.vb.sceneBoundingRect()
        size = self.hover_label.textItem.boundingRect()
        right = pos.x() + size.width() + 12 > box.right()
        top = pos.y() - size.height() - 12 < box.top()
        self.hover_label.setAnchor((1.0 if right else 0.0, 0.0 if top else 1.0))
        self.hover_label.setPos(point.x(), point.y())
