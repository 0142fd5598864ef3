"""A painted sparkline row: name on the left, a small line plot, the current value on the right.

One widget paints the whole row (no child widgets, no pyqtgraph scene): a dashboard with 64 GPU
cards has hundreds of these and repaints them at 10 fps. NaN values break the line, as in the
detail plots, so a disconnect shows as a gap.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFontMetrics,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPen,
    QResizeEvent,
)
from PySide6.QtWidgets import QSizePolicy, QWidget

from gpuws.ui import theme
from gpuws.ui.telemetry.metrics import NOT_SUPPORTED, series_colour

F64 = npt.NDArray[np.float64]

LABEL_WIDTH = 78
VALUE_WIDTH = 150
ROW_HEIGHT = 22


def finite_max(values: F64) -> float | None:
    """The largest non-NaN value, or None (no warning on all-NaN input)."""
    if values.size == 0:
        return None
    top = float(np.fmax.reduce(values))
    return None if np.isnan(top) else top


def line_path(t: F64, y: F64, t_from: float, t_to: float, top: float, rect: QRectF) -> QPainterPath:
    """The polyline of (t, y) scaled into `rect` (0..top upwards); NaN breaks the line."""
    span = max(t_to - t_from, 1e-9)
    x_px = rect.left() + (t - t_from) * (rect.width() / span)
    scaled = np.clip(y / top, 0.0, 1.0) if top > 0 else np.zeros_like(y)
    y_px = rect.bottom() - scaled * rect.height()
    path: QPainterPath = pg.arrayToQPath(x_px, y_px, connect="finite")
    return path


def line_pen(colour: QColor) -> QPen:
    """A 1 px cosmetic pen: drawn as a plain polyline, an order of magnitude faster than a wide
    pen, which Qt must stroke into an outline first."""
    pen = QPen(colour, 0)
    pen.setCosmetic(True)
    return pen


class MetricRow(QWidget):
    """`label  ~~~~sparkline~~~~  value`; click it for the metric's detail plot."""

    clicked = Signal(str)  # the row's metric key

    def __init__(self, key: str, label: str, colours: tuple[str, ...], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.key = key
        self.label = label
        self.colours = colours
        self.value_text = NOT_SUPPORTED
        self.supported = False
        self._t: F64 = np.empty(0)
        self._ys: list[F64] = []
        self._t_from = 0.0
        self._t_to = 1.0
        self._ceiling: float | None = None
        self._paths: list[QPainterPath] | None = None
        self._label_elided: str | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip(f"{label}: click for the detail plot")

    def sizeHint(self) -> QSize:
        return QSize(LABEL_WIDTH + VALUE_WIDTH + 160, ROW_HEIGHT)

    def minimumSizeHint(self) -> QSize:
        return QSize(LABEL_WIDTH + VALUE_WIDTH + 60, ROW_HEIGHT)

    def set_data(
        self,
        t: F64,
        ys: list[F64],
        t_from: float,
        t_to: float,
        *,
        ceiling: float | None,
        value_text: str,
        supported: bool,
    ) -> None:
        """New series (one or two, sharing `t`), the time range shown and the current value."""
        self._t, self._ys = t, ys
        self._t_from, self._t_to = t_from, t_to
        self._ceiling = ceiling
        self.value_text = value_text
        self.supported = supported
        self._paths = None
        self.update()

    def series(self) -> tuple[F64, list[F64]]:
        """The plotted data (tests check that gaps are NaN)."""
        return self._t, self._ys

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit(self.key)
        super().mousePressEvent(event)

    def _top(self) -> float:
        if self._ceiling:
            return self._ceiling
        tops = [m for m in (finite_max(y) for y in self._ys) if m is not None]
        return max(tops) * 1.15 if tops and max(tops) > 0 else 1.0

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._paths = None
        super().resizeEvent(event)

    def _plot_rect(self) -> QRectF:
        return QRectF(LABEL_WIDTH, 3, max(10.0, self.width() - LABEL_WIDTH - VALUE_WIDTH - 8), self.height() - 6)

    def _built_paths(self) -> list[QPainterPath]:
        """The line paths, built once per data change or resize (painting happens more often)."""
        if self._paths is None:
            top, rect = self._top(), self._plot_rect()
            self._paths = [line_path(self._t, y, self._t_from, self._t_to, top, rect) for y in self._ys]
        return self._paths

    def paintEvent(self, event: QPaintEvent) -> None:
        pal = self.palette()
        painter = QPainter(self)
        height = self.height()
        muted = theme.muted_text_colour(pal)
        if self._label_elided is None:
            self._label_elided = QFontMetrics(self.font()).elidedText(
                self.label, Qt.TextElideMode.ElideRight, LABEL_WIDTH - 6)
        painter.setPen(muted)
        painter.drawText(QRectF(0, 0, LABEL_WIDTH, height), Qt.AlignmentFlag.AlignVCenter, self._label_elided)
        painter.setPen(pal.color(pal.ColorRole.WindowText) if self.supported else muted)
        value_rect = QRectF(self.width() - VALUE_WIDTH, 0, VALUE_WIDTH, height)
        painter.drawText(value_rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, self.value_text)

        plot = self._plot_rect()
        painter.setPen(QPen(theme.border_colour(pal), 1))
        painter.drawLine(QPointF(plot.left(), plot.bottom() + 0.5), QPointF(plot.right(), plot.bottom() + 0.5))
        if self._t.size == 0:
            return  # all-NaN series draw nothing by themselves
        for path, colour_name in zip(self._built_paths(), self.colours, strict=False):
            painter.setPen(line_pen(series_colour(colour_name, pal)))
            painter.drawPath(path)
