"""The sparkline helpers: peak decimation, NaN gaps and the rows widget of a GPU card."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage, QPainterPath, QPolygonF

from gpuws.ui.telemetry.metrics import series_colour
from gpuws.ui.telemetry.sparkline import (
    MAX_POLYLINE_RUNS,
    MetricRow,
    SparklineRows,
    line_drawables,
    peak_decimate,
    polyline,
)

pytestmark = pytest.mark.gui


def test_peak_decimation_keeps_peaks_and_gaps() -> None:
    x = np.arange(4000, dtype=np.float64) / 10.0  # 4000 points over 400 px: 10 per pixel
    y = np.zeros((4000, 2))
    y[1234, 0] = 99.0  # a one-sample spike
    y[3000:3005, 1] = np.nan  # a short gap
    dx, dy = peak_decimate(x, y, 400.0)
    assert dx.shape[0] == dy.shape[0] <= 2 * 400 + 2  # about two points per pixel
    assert np.nanmax(dy[:, 0]) == 99.0  # the spike survives
    assert np.isnan(dy[:, 1]).any() and not np.isnan(dy[:, 0]).any()  # the gap stays, in its series only
    assert np.all(np.diff(dx) >= 0)  # still in time order


def test_sparse_series_are_not_decimated() -> None:
    x, y = np.arange(100.0), np.arange(100.0)
    dx, dy = peak_decimate(x, y, 200.0)
    assert dx is x and dy is y


def test_nan_breaks_the_line() -> None:
    x = np.arange(10.0)
    y = np.array([1, 2, 3, np.nan, 5, 6, np.nan, 8, np.nan, np.nan])
    runs = line_drawables(x, y)
    assert [len(p) for p in runs if isinstance(p, QPolygonF)] == [3, 2]  # single points draw nothing
    assert line_drawables(x, np.full(10, np.nan)) == []
    many = np.tile([1.0, 2.0, np.nan], MAX_POLYLINE_RUNS + 1)
    (path,) = line_drawables(np.arange(many.size, dtype=np.float64), many)
    assert isinstance(path, QPainterPath)
    moves = sum(path.elementAt(i).isMoveTo() for i in range(path.elementCount()))
    assert moves == MAX_POLYLINE_RUNS + 1  # one broken path: a new subpath after every gap


def test_polyline_holds_the_points() -> None:
    poly = polyline(np.array([0.0, 1.5, 3.0]), np.array([2.0, 4.0, 1.0]))
    assert [(p.x(), p.y()) for p in poly] == [(0.0, 2.0), (1.5, 4.0), (3.0, 1.0)]


def test_rows_paint_lines_and_report_clicks(qtbot: Any) -> None:
    rows = [MetricRow("util_gpu_pct", "GPU util", ("util",)), MetricRow("pcie", "PCIe", ("pcie", "pcie2"))]
    widget = SparklineRows(rows)
    qtbot.addWidget(widget)
    widget.resize(500, widget.height())
    t = np.arange(600, dtype=np.float64)
    columns = np.stack((50 + 40 * np.sin(t / 9), t, 2 * t), axis=1)
    columns[300:320, 0] = np.nan
    rows[0].ceiling, rows[0].value_text, rows[0].supported = 100.0, "50 %", True
    widget.set_data(t, columns, 0.0, 600.0)
    st, ys = rows[1].series()
    assert st is t and [y.tolist() for y in ys] == [t.tolist(), (2 * t).tolist()]
    assert np.isnan(rows[0].series()[1][0]).sum() == 20
    image = QImage(widget.size(), QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    widget.render(image)
    util = series_colour("util", widget.palette())
    rect = widget.plot_rect(0).toRect()
    hits = [x for x in range(rect.left(), rect.right()) for y in range(rect.top(), rect.bottom() + 2)
            if image.pixelColor(x, y) == util]
    assert len(set(hits)) > 0.8 * rect.width() - 20  # the line spans the plot, less the gap
    gap_x = rect.left() + rect.width() * 310 / 600
    assert all(abs(x - gap_x) > 3 for x in hits)  # nothing drawn across the gap
    with qtbot.waitSignal(widget.clicked) as clicked:
        qtbot.mouseClick(widget, Qt.MouseButton.LeftButton,
                         pos=widget.plot_rect(1).center().toPoint())
    assert clicked.args == ["pcie"]
