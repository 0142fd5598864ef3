"""Sparklines: the rows of a GPU card (name, a small line plot, the current value) and the numpy
helpers that turn series into screen polylines, shared with the overview tiles.

A dashboard with 64 GPU cards repaints at 10 fps, so the work per frame is kept small:

- one widget paints all the rows of a card (one paint event, one painter, no child widgets);
- the rows of a card share one time axis, so pixel coordinates of every series are computed in
  one numpy pass (dense series first reduced to ~2 points per horizontal pixel by min/max,
  "peak", decimation) and written straight into `QPolygonF` memory (no Python lists of points);
- the lines are built when a paint needs them, so cards scrolled out of view cost no line work;
- text goes through cached `QStaticText` layouts, pens and colours are built once per palette.

NaN values break the line (a disconnect shows as a gap), as in the detail plots.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QLineF, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPalette,
    QPen,
    QPolygonF,
    QResizeEvent,
    QStaticText,
)
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from gpuws.ui import theme
from gpuws.ui.telemetry.metrics import NOT_SUPPORTED, series_colour

F64 = npt.NDArray[np.float64]

LABEL_WIDTH = 78
VALUE_WIDTH = 150
ROW_HEIGHT = 22
ROW_SPACING = 1
# A series with more NaN-separated runs than this is drawn as one path (pyqtgraph's "finite"
# connect) rather than one polyline per run: fewer Python calls for a badly broken series.
MAX_POLYLINE_RUNS = 16
DECIMATE_FROM = 2  # points per pixel from which series are reduced to ~2 per pixel

Drawable = QPolygonF | QPainterPath


def peak_decimate(x: F64, ys: F64, width_px: float) -> tuple[F64, F64]:
    """Reduce (x, ys) to about two points per horizontal pixel, keeping each pixel's min and max.

    `ys` is (n,) or (n, series) sharing `x` (sorted). Samples are binned by index, about one
    pixel's worth to a bin (history rows are evenly spaced), and each bin becomes its (first x,
    min) and (last x, max) points, so peaks survive. A bin holding a NaN becomes NaN (the min
    and max used propagate it): the gap stays a gap. Inputs with fewer than `DECIMATE_FROM`
    points per pixel come back unchanged. Measured offscreen: a smooth 1 px line costs about its
    number of points (720 points over 214 px 44 us, reduced to ~2 per pixel 21 us); a line
    that swings across its whole height every few pixels costs the pixels it covers instead,
    and reducing it neither helps nor hurts.
    """
    n = x.shape[0]
    width = max(width_px, 1.0)
    if n < DECIMATE_FROM * width:
        return x, ys
    per_bin = -(-n // int(width))  # ceil: never more than ~2 points per pixel
    bins = -(-n // per_bin)
    pad = bins * per_bin - n
    if pad:  # repeat the last row so the final, partial bin reduces like the others
        x = np.concatenate((x, np.repeat(x[-1:], pad)))
        ys = np.concatenate((ys, np.repeat(ys[-1:], pad, axis=0)))
    grouped = ys.reshape((bins, per_bin, *ys.shape[1:]))
    if per_bin <= 8:
        # A few element-wise passes beat a reduction over a short, strided axis.
        low, high = grouped[:, 0].copy(), grouped[:, 0].copy()
        for k in range(1, per_bin):
            np.minimum(low, grouped[:, k], out=low)
            np.maximum(high, grouped[:, k], out=high)
    else:
        low, high = np.minimum.reduce(grouped, axis=1), np.maximum.reduce(grouped, axis=1)
    xs = x.reshape(bins, per_bin)
    out_x = np.stack((xs[:, 0], xs[:, -1]), axis=1).reshape(-1)
    out_y = np.stack((low, high), axis=1).reshape((2 * bins, *ys.shape[1:]))
    return out_x, out_y


def polyline(x: F64, y: F64) -> QPolygonF:
    """A `QPolygonF` of the points (x, y), filled through its memory buffer."""
    poly: QPolygonF = pg.functions.create_qpolygonf(x.shape[0])
    points = pg.functions.ndarray_from_qpolygonf(poly)
    points[:, 0] = x
    points[:, 1] = y
    return poly


class PolylineBuffer:
    """A `QPolygonF` refilled in place frame after frame (no allocation while its size holds)."""

    def __init__(self) -> None:
        self.poly = QPolygonF()
        self._points: F64 = np.empty((0, 2))

    def fill(self, x: F64, y: F64) -> QPolygonF:
        """The polygon of the points (x, y), refilled in place."""
        n = x.shape[0]
        if self._points.shape[0] != n:
            self.poly.resize(n)
            self._points = pg.functions.ndarray_from_qpolygonf(self.poly)
        self._points[:, 0] = x
        self._points[:, 1] = y
        return self.poly


def line_drawables(x: F64, y: F64, *, all_finite: bool | None = None) -> list[Drawable]:
    """What to draw for one series in pixels: one polyline per run of finite values (NaN breaks it).

    `all_finite` may pass on what the caller already knows about `y` (checked for many series at once).
    """
    if all_finite is None:
        all_finite = bool(np.isfinite(y).all())
    if all_finite:
        return [polyline(x, y)] if x.shape[0] > 1 else []
    finite = np.isfinite(y)
    if finite.all():
        return [polyline(x, y)] if x.shape[0] > 1 else []
    edges = np.flatnonzero(np.diff(finite.view(np.int8)))
    starts = np.concatenate(([0], edges + 1))
    ends = np.concatenate((edges + 1, [finite.shape[0]]))
    runs = [(a, b) for a, b in zip(starts.tolist(), ends.tolist(), strict=True) if finite[a] and b - a > 1]
    if len(runs) > MAX_POLYLINE_RUNS:
        path: QPainterPath = pg.arrayToQPath(x, y, connect="finite")
        return [path]
    return [polyline(x[a:b], y[a:b]) for a, b in runs]


def draw_lines(painter: QPainter, drawables: Sequence[Drawable]) -> None:
    """Draw each polygon as a polyline, and each path as a path."""
    for item in drawables:
        if isinstance(item, QPolygonF):
            painter.drawPolyline(item)
        else:
            painter.drawPath(item)


def line_pen(colour: QColor) -> QPen:
    """A 1 px cosmetic pen: drawn as a plain polyline, an order of magnitude faster than a wide
    pen, which Qt must stroke into an outline first."""
    pen = QPen(colour, 0)
    pen.setCosmetic(True)
    return pen


def static_text(text: str) -> QStaticText:
    """A `QStaticText` laid out once and drawn from its cached glyphs afterwards."""
    st = QStaticText(text)
    st.setTextFormat(Qt.TextFormat.PlainText)
    st.setPerformanceHint(QStaticText.PerformanceHint.AggressiveCaching)
    return st


_LAID_OUT: OrderedDict[tuple[str, str], QStaticText] = OrderedDict()
LAID_OUT_MAX = 4096  # a few hundred KiB at most


def laid_out(text: str, font: QFont, font_key: str | None = None) -> QStaticText:
    """`text` laid out in `font`, shared and kept (least recently used out) for the next frames.

    Current values repeat a lot ("100 %", "1980 / 1980 MHz", the same watts on many cards), and a
    laid-out text draws in about a third of the time of laying it out again. `font_key` may pass
    on `font.key()` (a painter drawing many values asks for it once).
    """
    key = (text, font.key() if font_key is None else font_key)
    st = _LAID_OUT.get(key)
    if st is not None:
        _LAID_OUT.move_to_end(key)
        return st
    st = static_text(text)
    st.prepare(font=font)
    _LAID_OUT[key] = st
    if len(_LAID_OUT) > LAID_OUT_MAX:
        _LAID_OUT.popitem(last=False)
    return st


class MetricRow:
    """One row of a card: what it plots (one or two series sharing `t`) and the value it shows."""

    def __init__(self, key: str, label: str, colours: tuple[str, ...]) -> None:
        self.key = key
        self.label = label
        self.colours = colours
        self.value_text = NOT_SUPPORTED
        self.supported = False
        self.ceiling: float | None = None  # fixed top of the scale, or None: scaled to the data
        self._plots: SparklineRows | None = None  # set by the widget that paints the row
        self._first_column = 0  # of the row's series in the widget's data

    def series(self) -> tuple[F64, list[F64]]:
        """The plotted data (tests check that gaps are NaN)."""
        plots = self._plots
        if plots is None or plots._columns is None:
            return np.empty(0), [np.empty(0) for _ in self.colours]
        first = self._first_column
        return plots._t, [plots._columns[:, first + i] for i in range(len(self.colours))]


class _Style:
    """Pens and colours of one palette, built once rather than on every paint."""

    def __init__(self, pal: QPalette, colour_names: Sequence[str]) -> None:
        self.key = pal.cacheKey()
        self.muted = theme.muted_text_colour(pal)
        self.text = pal.color(QPalette.ColorRole.WindowText)
        self.axis = QPen(theme.border_colour(pal), 1)
        self.pens = {name: line_pen(series_colour(name, pal)) for name in colour_names}


class SparklineRows(QWidget):
    """All the `label  ~~~~sparkline~~~~  value` rows of a card, painted as one widget.

    Click a row for the metric's detail plot (`clicked` carries the row's key).
    """

    clicked = Signal(str)

    def __init__(self, rows: Sequence[MetricRow], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows = list(rows)
        column = 0
        for row in self.rows:
            row._plots, row._first_column = self, column
            column += len(row.colours)
        self._t: F64 = np.empty(0)
        self._columns: F64 | None = None
        self._t_from = 0.0
        self._t_to = 1.0
        self._lines: list[list[list[Drawable]]] | None = None  # per row, per series; None: rebuild
        self._buffers = [PolylineBuffer() for _ in range(column)]  # per series, refilled each rebuild
        self._style: _Style | None = None
        self._labels: list[QStaticText] | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(len(self.rows) * (ROW_HEIGHT + ROW_SPACING) - ROW_SPACING)
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def sizeHint(self) -> QSize:
        """Qt: label, value and a 160 px line."""
        return QSize(LABEL_WIDTH + VALUE_WIDTH + 160, self.height())

    def minimumSizeHint(self) -> QSize:
        """Qt: label, value and a 60 px line."""
        return QSize(LABEL_WIDTH + VALUE_WIDTH + 60, self.height())

    def set_data(self, t: F64, columns: F64 | None, t_from: float, t_to: float) -> None:
        """New history: `columns` is (len(t), series) with the rows' series in order (None: no data).

        The rows' value texts and ceilings are set by the caller beforehand. When the history
        starts later than `t_from` (a 24 h window over ten minutes of data), the rows span the
        data instead of squeezing it into the last pixels of the window.
        """
        if t.size and np.isfinite(t[0]) and t[0] > t_from:
            t_from = float(t[0])
        self._t, self._t_from, self._t_to = t, t_from, t_to
        self._columns = columns if t.size else None
        self._lines = None
        self.update()

    # --- geometry and events ----------------------------------------------------------------

    def row_at(self, y: float) -> MetricRow | None:
        """The row at height `y`, if any."""
        index = int(y // (ROW_HEIGHT + ROW_SPACING))
        return self.rows[index] if 0 <= index < len(self.rows) else None

    def _plot_width(self) -> float:
        return max(10.0, self.width() - LABEL_WIDTH - VALUE_WIDTH - 8)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        """Qt: a click on a row selects its metric (`clicked`)."""
        row = self.row_at(event.position().y())
        if event.button() == Qt.MouseButton.LeftButton and row is not None:
            self.clicked.emit(row.key)
        super().mousePressEvent(event)

    def event(self, event: QEvent) -> bool:
        """Qt: the tooltip of the row under the mouse."""
        if event.type() == QEvent.Type.ToolTip:
            row = self.row_at(event.pos().y())  # type: ignore[attr-defined]
            if row is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(event.globalPos(), f"{row.label}: click for the detail plot", self)  # type: ignore[attr-defined]
            return True
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.PaletteChange):
            self._labels, self._style = None, None
        return super().event(event)

    def relabel(self) -> None:
        """A row's label changed (a pooled card bound to another kind of device): draw it anew."""
        self._labels = None
        self.update()

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Qt: a new size rebuilds the lines and elides the labels again."""
        self._lines = None
        self._labels = None  # elided to the label column again
        super().resizeEvent(event)

    # --- painting ---------------------------------------------------------------------------

    def _built_lines(self) -> list[list[list[Drawable]]]:
        """Every row's polylines, from one vectorised pass over the shared time axis."""
        if self._lines is not None:
            return self._lines
        columns = self._columns
        if columns is None or self._t.size == 0:
            self._lines = [[[] for _ in row.colours] for row in self.rows]
            return self._lines
        width = self._plot_width()
        span = max(self._t_to - self._t_from, 1e-9)
        x = LABEL_WIDTH + (self._t - self._t_from) * (width / span)
        # Per series: the value at the top of its row (the row's ceiling, else 1.15 x the largest
        # value of its series) and the pixel row of its baseline.
        col_max = np.fmax.reduce(columns, axis=0)
        tops, bottoms = [], []
        col = 0
        for i, row in enumerate(self.rows):
            n = len(row.colours)
            top = row.ceiling
            if not top:
                peak = np.fmax.reduce(col_max[col : col + n])
                top = float(peak) * 1.15 if peak > 0 else 1.0  # NaN (no data) compares False
            tops += [top] * n
            bottoms += [i * (ROW_HEIGHT + ROW_SPACING) + ROW_HEIGHT - 3] * n
            col += n
        x, ys = peak_decimate(x, columns, width)
        height = ROW_HEIGHT - 6
        scale = height / np.array(tops)
        y_px = np.array(bottoms, dtype=np.float64) - np.clip(ys * scale, 0.0, height)
        all_finite: list[bool] = np.logical_and.reduce(np.isfinite(y_px), axis=0).tolist()
        lines: list[list[list[Drawable]]] = []
        buffers = self._buffers
        drawable = x.shape[0] > 1
        col = 0
        for row in self.rows:
            n = len(row.colours)
            lines.append([
                # An unbroken series (the usual case) goes into the series' reused polygon.
                ([buffers[i].fill(x, y_px[:, i])] if drawable else [])
                if all_finite[i]
                else line_drawables(x, y_px[:, i], all_finite=False)
                for i in range(col, col + n)
            ])
            col += n
        self._lines = lines
        return lines

    def _prepared_style(self) -> _Style:
        pal = self.palette()
        if self._style is None or self._style.key != pal.cacheKey():
            names = {name for row in self.rows for name in row.colours}
            self._style = _Style(pal, sorted(names))
        return self._style

    def _label_texts(self) -> list[QStaticText]:
        if self._labels is None:
            fm = QFontMetrics(self.font())
            self._labels = [
                static_text(fm.elidedText(row.label, Qt.TextElideMode.ElideRight, LABEL_WIDTH - 6))
                for row in self.rows
            ]
            for st in self._labels:
                st.prepare(font=self.font())
        return self._labels

    def paintEvent(self, event: QPaintEvent) -> None:
        """Qt: draw every row's label, line and value."""
        style = self._prepared_style()
        labels = self._label_texts()
        lines = self._built_lines()
        font = self.font()
        font_key = font.key()
        width = self.width()
        plot_right = LABEL_WIDTH + self._plot_width()
        exposed = event.rect()
        pitch = ROW_HEIGHT + ROW_SPACING
        shown = [i for i in range(len(self.rows)) if exposed.top() - ROW_HEIGHT <= i * pitch <= exposed.bottom()]
        painter = QPainter(self)
        # Grouped by pen: a pen change is a Python call and a state change in the paint engine.
        painter.setPen(style.muted)
        for i in shown:
            label = labels[i]
            painter.drawStaticText(QPointF(0, i * pitch + (ROW_HEIGHT - label.size().height()) / 2), label)
        values = [(i, laid_out(self.rows[i].value_text, font, font_key)) for i in shown]
        for supported in (False, True):
            painter.setPen(style.text if supported else style.muted)
            for i, value in values:
                if self.rows[i].supported is supported:
                    size = value.size()
                    at = QPointF(width - size.width(), i * pitch + (ROW_HEIGHT - size.height()) / 2)
                    painter.drawStaticText(at, value)
        painter.setPen(style.axis)
        axis_ys = [i * pitch + ROW_HEIGHT - 3 + 0.5 for i in shown]
        painter.drawLines([QLineF(LABEL_WIDTH, y, plot_right, y) for y in axis_ys])
        for i in shown:
            for drawables, colour in zip(lines[i], self.rows[i].colours, strict=False):
                if drawables:
                    painter.setPen(style.pens[colour])
                    draw_lines(painter, drawables)
        painter.end()

    def shown_span(self) -> tuple[float, float]:
        """The time range the rows span now (the window, or the data when it is shorter)."""
        return self._t_from, self._t_to

    def line_extent(self, index: int) -> float:
        """Width in pixels of row `index`'s first series as drawn (for tests)."""
        drawables = self._built_lines()[index][0] if self.rows else []
        if not drawables:
            return 0.0
        rects = [d.boundingRect() for d in drawables]
        return max(r.right() for r in rects) - min(r.left() for r in rects)

    def plot_rect(self, index: int) -> QRectF:
        """Where row `index` draws its line (for tests and hit checks)."""
        top = index * (ROW_HEIGHT + ROW_SPACING)
        return QRectF(LABEL_WIDTH, top + 3, self._plot_width(), ROW_HEIGHT - 6)
