"""The fleet's utilisation over the chosen window: one painted line on a 0-100 % scale.

Painted with QPainter rather than pyqtgraph: the fleet view needs one static line, axis labels
and gaps, and importing pyqtgraph costs the process ~29 MiB of memory (its whole package),
which a fleet view open on 1,024 GPUs cannot spare under its 150 MB budget. pyqtgraph stays
for the host's detail plot (zoom, hover), loaded when that opens.
"""

from __future__ import annotations

import time

import numpy as np
from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from gpuws.ui import theme
from gpuws.ui.fleet.tiles import _sparkline
from gpuws.ui.telemetry.metrics import series_colour

LEFT = 48  # room for "100 %"
BOTTOM = 18  # room for the time labels
TOP = 6
RIGHT = 8
TIME_LABELS = 5


def time_label(t: float, span_s: float) -> str:
    """A time axis label: clock time within two days, the date beyond."""
    fmt = "%H:%M" if span_s <= 2 * 86_400 else "%b %d"
    return time.strftime(fmt, time.localtime(t))


class FleetUtilPlot(QWidget):
    """`set_data(times, util_pct, start, end)`; NaN values are gaps (nothing scraped)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(120)
        self._times = np.empty(0)
        self._values = np.empty(0, dtype=np.float32)
        self._start = self._end = 0.0
        self.setToolTip("Average utilisation of the fleet's GPUs over the window (Prometheus)")

    def sizeHint(self) -> QSize:
        return QSize(600, 120)

    def set_data(self, times: np.ndarray, values: np.ndarray, start: float, end: float) -> None:
        self._times, self._values, self._start, self._end = times, values, start, end
        self.update()

    def plotted(self) -> tuple[np.ndarray, np.ndarray]:
        """The series shown (for tests)."""
        return self._times, self._values

    def plot_rect(self) -> QRectF:
        return QRectF(LEFT, TOP, max(1.0, self.width() - LEFT - RIGHT), max(1.0, self.height() - TOP - BOTTOM))

    def paintEvent(self, event: QPaintEvent) -> None:
        pal = self.palette()
        rect = self.plot_rect()
        painter = QPainter(self)
        muted = theme.muted_text_colour(pal)
        grid = QPen(theme.border_colour(pal), 1)
        for pct in (0, 50, 100):
            y = rect.bottom() - pct / 100.0 * rect.height()
            painter.setPen(grid)
            painter.drawLine(int(rect.left()), round(y), int(rect.right()), round(y))
            painter.setPen(muted)
            painter.drawText(QRectF(0, y - 8, LEFT - 6, 16),
                             int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), f"{pct} %")
        span = self._end - self._start
        if span > 0:
            for i in range(TIME_LABELS):
                x = rect.left() + rect.width() * i / (TIME_LABELS - 1)
                align = Qt.AlignmentFlag.AlignLeft if i == 0 else (
                    Qt.AlignmentFlag.AlignRight if i == TIME_LABELS - 1 else Qt.AlignmentFlag.AlignHCenter)
                box = QRectF(x - (0 if i == 0 else 80 if i == TIME_LABELS - 1 else 40), rect.bottom() + 2, 80,
                             BOTTOM - 2)
                painter.drawText(box, int(align | Qt.AlignmentFlag.AlignTop),
                                 time_label(self._start + span * i / (TIME_LABELS - 1), span))
        if len(self._values) > 1:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(QPen(series_colour("util", pal), 1.5))
            for line in _sparkline(rect, self._values):
                painter.drawPolyline(line)
        painter.end()
