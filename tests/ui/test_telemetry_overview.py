"""The all-hosts overview: tiles read on paint, gaps kept, lines rebuilt for new data."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QImage, QPolygonF

from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui.telemetry.overview_grid import TILE_H, OverviewGrid
from tests.ui.telemetry_samples import fill_store


def _rendered(grid: OverviewGrid) -> QImage:
    image = QImage(grid.size(), QImage.Format.Format_ARGB32_Premultiplied)
    grid.render(image)
    return image


def test_offline_host_shows_a_gap_not_a_line_across(qtbot: Any) -> None:
    store = TelemetryStore()
    now = time.time()
    fill_store(store, "gappy", now - 600, 600, gpus=1, gap=(300, 340))
    fill_store(store, "steady", now - 600, 600, gpus=1)
    grid = OverviewGrid()
    qtbot.addWidget(grid)
    grid.resize(1100, 400)
    grid.show()
    assert grid.canvas.refresh(store, now - 600, now, alerted=set()) == 2
    _rendered(grid)
    tiles = {tile.host: tile for tile in grid.canvas.tiles}
    gappy, steady = tiles["gappy"], tiles["steady"]
    assert np.isnan(gappy.util).any() and not np.isnan(steady.util).any()
    # The gap splits each series of the offline host into runs; the steady host has one polyline each.
    for series in gappy.lines:
        assert len(series) >= 2
    for series in steady.lines:
        assert len(series) == 1 and isinstance(series[0], QPolygonF)
    runs = gappy.lines[1]
    assert isinstance(runs[0], QPolygonF) and isinstance(runs[1], QPolygonF)
    # No point of either run lies inside the offline time: the line does not cross the gap.
    left, right = runs[0].last().x(), runs[1].first().x()
    assert right - left > 10  # 40 s of 600 s over a ~250 px plot


def test_new_samples_rebuild_the_lines_in_place(qtbot: Any) -> None:
    store = TelemetryStore()
    now = time.time()
    fill_store(store, "h", now - 300, 300, gpus=1)
    grid = OverviewGrid()
    qtbot.addWidget(grid)
    grid.resize(600, 300)
    grid.show()
    grid.canvas.refresh(store, now - 600, now, alerted=set())
    _rendered(grid)
    tile = grid.canvas.tiles[0]
    poly = tile.lines[0][0]
    assert isinstance(poly, QPolygonF)
    before = poly.size()
    fill_store(store, "h", now, 60, gpus=1)
    grid.canvas.refresh(store, now - 600, now + 60, alerted=set())
    assert tile.unread
    _rendered(grid)
    assert not tile.unread
    assert tile.lines[0][0] is poly and poly.size() > before  # same polyline, refilled with the new rows
    assert poly.last().x() > poly.first().x()


def test_dense_history_is_drawn_at_two_points_per_pixel_keeping_its_peaks(qtbot: Any) -> None:
    """An hour of 5 s buckets (720 points) over a ~250 px plot: each tile's lines are reduced to
    about two points per pixel (a 1 px line costs about its number of points), and every peak and
    trough of the series is still drawn."""
    store = TelemetryStore()
    now = time.time()
    for host in ("a", "b", "c"):
        fill_store(store, host, now - 3600, 3600, gpus=1)
    grid = OverviewGrid()
    qtbot.addWidget(grid)
    grid.resize(1100, 400)
    grid.show()
    assert grid.canvas.refresh(store, now - 3600, now, alerted=set()) == 3
    _rendered(grid)
    canvas = grid.canvas
    plot_height = canvas._paint_style().plot_rect(QRect(0, 0, canvas.tile_rect(0).width(), TILE_H)).height()
    for tile in canvas.tiles:
        assert tile.util.shape[0] > 700  # the data keeps every bucket
        for series, values in ((tile.lines[0], tile.mem_pct), (tile.lines[1], tile.util)):
            (poly,) = series
            assert isinstance(poly, QPolygonF)
            points = np.array([(p.x(), p.y()) for p in poly.toList()])
            width = points[-1, 0] - points[0, 0]
            assert points.shape[0] <= 2 * width + 4
            # The drawn line spans the same height as the data (percent of the plot's height).
            low, high = np.clip(np.nanmin(values), 0, 100), np.clip(np.nanmax(values), 0, 100)
            drawn = (points[:, 1].max() - points[:, 1].min()) / plot_height * 100
            assert drawn == pytest.approx(high - low, abs=1e-6)
            assert np.all(np.diff(points[:, 0]) >= 0)
