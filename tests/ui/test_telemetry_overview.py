"""The all-hosts overview: tiles read on paint, gaps kept, lines rebuilt for new data."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from PySide6.QtGui import QImage, QPolygonF

from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui.telemetry.overview_grid import OverviewGrid
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
