"""The fleet view offscreen: a real Prometheus behind it, tiles most urgent first, click to a host."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpuws.core.advice import Advice, AdvicePolicy, Confidence, GpuAdvice
from gpuws.core.fleet.advice import FleetGpuAdvice, PriceSource
from gpuws.core.fleet.model import Attention, FleetGpu, SeriesKey
from gpuws.core.fleet.profiles import FleetProfile, FleetStore
from gpuws.core.models import HostProfile
from gpuws.core.profiles import ProfileStore
from gpuws.remote.prometheus import Snapshot
from gpuws.ui.fleet.tiles import TILE_H, TILE_W, FleetTileGrid
from gpuws.ui.fleet.view import FleetView

pytestmark = pytest.mark.gui


def _fleet(n: int) -> Snapshot:
    gpus = []
    for i in range(n):
        g = FleetGpu(host=f"node-{i // 16:03d}", gpu=i % 16, uuid=f"GPU-{i:08d}", model="NVIDIA H100 80GB HBM3")
        g.values = {"util_gpu_pct": float(i % 100), "mem_used_mib": 1000.0 + (75000 if i % 97 == 5 else 0),
                    "mem_total_mib": 81559.0, "power_w": 400.0}
        gpus.append(g)
    return Snapshot("big", 1.0, gpus)


@pytest.mark.slow
def test_a_fleet_from_prometheus(qtbot: Any, bridge: Any, sim_prometheus: Any) -> None:
    server, _ = sim_prometheus
    view = FleetView(bridge)
    qtbot.addWidget(view)
    view.resize(1000, 800)
    view.show()
    try:
        with qtbot.waitSignals([view.snapshot_applied, view.history_applied], timeout=20_000):
            view.open_profile(FleetProfile("lab", server.url, price_per_gpu_hour=3.0))
        tiles = view.grid.tiles()
        assert len(tiles) == 20
        assert tiles[0].attention is Attention.OOM_RISK
        order = [t.attention for t in tiles]
        assert order == sorted(order)
        assert "16 GPUs (4 MIG instances) on 4 hosts" in view.summary.text()
        assert "needs attention" in view.summary.text()
        assert view.sim_badge.isVisibleTo(view)
        assert any("GPU" in line and "memory" in line.lower() for line in view.alerts_label.text().splitlines())
        assert any(t.history is not None for t in tiles)  # per-GPU history from query_range
        with qtbot.waitSignal(view.history_applied, timeout=20_000):
            view.window_box.setCurrentIndex(4)  # 30 days, downsampled by Prometheus
    finally:
        future = view.close_fleet()
        if future is not None:
            qtbot.waitUntil(future.done, timeout=10_000)


def _frame(qtbot: Any, grid: FleetTileGrid) -> None:
    frames = grid.frames
    grid.update()
    qtbot.waitUntil(lambda: grid.frames > frames, timeout=5000)


def test_only_visible_tiles_are_painted(qtbot: Any) -> None:
    view = FleetView(None)
    qtbot.addWidget(view)
    view.resize(1000, 700)
    view.show()
    qtbot.waitExposed(view)
    view.apply_snapshot(_fleet(1024))
    qtbot.waitUntil(lambda: view.grid.width() > 500 and view.grid.height() > 1000)
    assert len(view.grid.tiles()) == 1024
    assert view.grid.tiles()[0].attention is Attention.OOM_RISK
    _frame(qtbot, view.grid)
    assert 0 < view.grid.painted_last_frame < 100
    bar = view.scroll_area.verticalScrollBar()
    bar.setValue(bar.maximum())
    _frame(qtbot, view.grid)
    assert 0 < view.grid.painted_last_frame < 100


def test_tile_geometry_and_click(qtbot: Any) -> None:
    grid = FleetTileGrid()
    qtbot.addWidget(grid)
    grid.resize(600, 400)
    view_snapshot = _fleet(10)
    from gpuws.ui.fleet.tiles import FleetTile

    grid.set_tiles([FleetTile(g, Attention.NONE) for g in view_snapshot.gpus])
    rect = grid.tile_rect(4)
    assert grid.index_at(rect.center().x(), rect.center().y()) == 4
    assert grid.index_at(rect.right() + 3, rect.center().y()) is None  # the gap between tiles
    with qtbot.waitSignal(grid.gpu_clicked) as blocker:
        from PySide6.QtCore import Qt

        qtbot.mouseClick(grid, Qt.MouseButton.LeftButton, pos=rect.center())
    assert blocker.args[0].uuid == "GPU-00000004"
    assert grid.minimumHeight() >= 2 * TILE_H


def _window_with_fleet_lab(make_window: Any, qtbot: Any) -> Any:
    """A window whose sidebar lists fleet "lab" (its Prometheus unreachable) and host node-001."""
    ProfileStore().add(HostProfile(name="node-001", host="node-001.gpu.example"))
    FleetStore().add(FleetProfile("lab", "http://127.0.0.1:9"))
    window = make_window()
    qtbot.waitUntil(lambda: window.fleet_list.list.count() == 1, timeout=5000)
    return window


def test_sidebar_lists_fleets_and_a_click_opens_the_matching_host(make_window: Any, qtbot: Any) -> None:
    window = _window_with_fleet_lab(make_window, qtbot)
    fleets = window.fleet_list
    assert fleets.isVisibleTo(window)
    view = window.fleet_view
    fleets.list.setCurrentRow(0)
    assert window.stack.currentWidget() is view
    qtbot.waitUntil(lambda: "cannot reach Prometheus" in view.status.text(), timeout=10_000)
    view.apply_snapshot(_fleet(32))  # as if read: node-000 and node-001, 16 GPUs each
    gpu = next(g for g in view.gpus() if g.host == "node-001")
    view.host_requested.emit(gpu.host, gpu.uuid or "")
    assert window.sidebar.current_name() == "node-001"
    assert window.stack.currentWidget() is window.detail
    view.host_requested.emit("node-000", "GPU-x")  # no profile: said, nothing else happens
    assert "No host profile matches node-000" in view.status.text()
    from PySide6.QtCore import Qt

    # Host names and Prometheus' errors are remote strings: never rendered as markup.
    for label in (view.status, view.summary, view.alerts_label):
        assert label.textFormat() == Qt.TextFormat.PlainText


def test_series_key_of_tiles_is_the_history_key() -> None:
    g = FleetGpu(host="h", gpu=3, uuid=None, model=None, gi=7)
    assert g.key == SeriesKey("h", 3, 7) and g.device_key == "3/mig7"


@pytest.mark.slow
def test_the_advice_column_from_prometheus(qtbot: Any, bridge: Any, sim_prometheus: Any) -> None:
    """Idle sim-gpu-node-000 GPU 3 (priced by a host profile: 12.00/h over 4 GPUs) is told to stop
    with the money; the saturated sim-gpu-node-001 GPU 3 is kept, unpriced."""
    server, fleet = sim_prometheus
    server.wait_samples('Hostname="sim-gpu-node-000",gpu="3"', 15)
    ProfileStore().add(HostProfile(name="node0", host="sim-gpu-node-000", price_per_hour=12.0))
    view = FleetView(bridge)
    view.advice_policy = AdvicePolicy(min_data_s=10)  # the module's Prometheus holds seconds, not hours
    qtbot.addWidget(view)
    view.resize(1200, 800)
    view.show()
    try:
        with qtbot.waitSignal(view.advice_applied, timeout=30_000):
            view.open_profile(FleetProfile("lab", server.url))
        table = view.advice_table
        header = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
        assert header == ["Host", "GPU", "Now", "Advice", "Per hour", "Per month", "Basis"]
        assert table.rowCount() == 16 and table.isVisibleTo(view)
        rows = {(table.item(r, 0).text(), table.item(r, 1).text()): [table.item(r, c).text() for c in range(7)]
                for r in range(table.rowCount())}
        assert rows[("sim-gpu-node-000", "3")][2:6] == ["full", "stop (idle); or 1g.10gb", "-$3.00", "-$2,190.00"]
        assert rows[("sim-gpu-node-001", "3")][2:6] == ["full", "keep", "-", "-"]
        # The projection's basis is in the table: low confidence on seconds of data, and how much.
        basis = rows[("sim-gpu-node-000", "3")][6]
        assert basis.startswith("low, ") and basis[5].isdigit()
        assert rows[("sim-gpu-node-000", "0")][2:4] == ["2x3g.40gb", "smaller → 3g.40gb"]
        assert table.item(0, 3).text().startswith("stop")  # the most worth acting on first
        assert "to act on" in view.advice_summary.text() and "saves" in view.advice_summary.text()
        r = next(r for r in range(table.rowCount()) if table.item(r, 0).text() == "sim-gpu-node-000"
                 and table.item(r, 1).text() == "3")
        with qtbot.waitSignal(view.resize_requested) as blocker:
            table.cellClicked.emit(r, 3)
        assert blocker.args == ["sim-gpu-node-000", fleet.hosts[0].gpus[3].uuid, 3, "1g.10gb"]
    finally:
        future = view.close_fleet()
        if future is not None:
            qtbot.waitUntil(future.done, timeout=10_000)


@pytest.mark.slow
def test_no_money_is_projected_from_seconds_of_data(qtbot: Any, bridge: Any, sim_prometheus: Any) -> None:
    """#35: the fleet view said "Over 24 h: … saves $4.29/h ($3,128.56/month)" from 33 s of data
    (marked "low"), beside an empty 24 h chart. With the default minimum every row and the summary
    say how much data there is of what the advice needs, and no saving is shown."""
    server, _fleet = sim_prometheus
    server.wait_samples('Hostname="sim-gpu-node-000",gpu="3"', 35)  # 35 s: more than the old 30 s minimum
    ProfileStore().add(HostProfile(name="node0", host="sim-gpu-node-000", price_per_hour=12.0))
    view = FleetView(bridge)  # the default advice policy, as the window has it
    qtbot.addWidget(view)
    view.resize(1200, 800)
    view.show()
    try:
        with qtbot.waitSignal(view.advice_applied, timeout=30_000):
            view.open_profile(FleetProfile("lab", server.url))
        table = view.advice_table
        cells = [table.item(r, 3).text() for r in range(table.rowCount())]
        assert cells and all(re.fullmatch(r"not enough data yet \(\d+ s of 600 s\)", c) for c in cells), cells
        assert all(table.item(r, c).text() == "-" for r in range(table.rowCount()) for c in (4, 5))
        summary = view.advice_summary.text()
        assert re.fullmatch(r"Over 24 h: not enough data yet \(\d+ s of 600 s\)", summary), summary
        assert "saves" not in summary
    finally:
        future = view.close_fleet()
        if future is not None:
            qtbot.waitUntil(future.done, timeout=10_000)


def _advice(host: str, gpu: int, advice: Advice, target: str | None, delta: float | None) -> FleetGpuAdvice:
    a = GpuAdvice(gpu, "full", advice, target, delta, Confidence.MEDIUM, ("reason",))
    return FleetGpuAdvice(host, f"GPU-{host}-{gpu}", "NVIDIA H100 80GB HBM3", a, None, PriceSource.NONE)


def test_an_advice_row_opens_its_host_on_the_resize_wizard(make_window: Any, qtbot: Any) -> None:
    from gpuws.app.advice import FleetAdviceReport
    from gpuws.ui.tabs.resize import ResizeTab

    window = _window_with_fleet_lab(make_window, qtbot)
    fleets = window.fleet_list
    view = window.fleet_view
    fleets.list.setCurrentRow(0)
    view.apply_advice(FleetAdviceReport("lab", 86_400, [
        _advice("node-001", 2, Advice.SMALLER, "3g.40gb", -1.5), _advice("node-000", 1, Advice.STOP, None, -3.0),
        _advice("node-001", 0, Advice.KEEP, None, 0.0)]))
    assert [view.advice_table.item(r, 3).text() for r in range(3)] == ["stop (idle)", "smaller → 3g.40gb", "keep"]
    assert "2 of 3 GPUs to act on; saves $4.50/h" in view.advice_summary.text()
    view.activate_advice(0)  # node-000 has no host profile: said, nothing else happens
    assert "No host profile matches node-000" in view.status.text()
    assert window.stack.currentWidget() is view
    view.activate_advice(1)
    assert window.sidebar.current_name() == "node-001"
    assert window.stack.currentWidget() is window.detail
    resize_tab = next(w for w in window.detail.tab_widgets if isinstance(w, ResizeTab))
    assert window.detail.tabs.currentWidget() is resize_tab
    assert resize_tab._wanted == (2, "3g.40gb")  # chosen once the host's GPUs have been read


def test_tiles_share_the_row_and_the_advice_money_stays_in_view(qtbot: Any) -> None:
    """Found in a screenshot: a band of empty space right of the tiles, and the advice panel a
    sliver whose $/h and $/month columns were scrolled out of view."""
    from gpuws.app.advice import FleetAdviceReport
    from gpuws.ui.fleet.tiles import GAP

    view = FleetView(None)
    qtbot.addWidget(view)
    view.resize(1280, 820)
    view.show()
    qtbot.waitExposed(view)
    view.apply_snapshot(_fleet(64))
    long = _advice("sim-gpu-node-000", 3, Advice.STOP, None, -3.0)
    view.apply_advice(FleetAdviceReport("lab", 86_400, [long, _advice("sim-gpu-node-001", 0, Advice.KEEP, None, 0.0)]))
    grid = view.grid
    qtbot.waitUntil(lambda: grid.width() > 300)
    columns = max(1, (grid.width() - GAP) // (TILE_W + GAP))
    last = grid.tile_rect(columns - 1)
    assert grid.width() - last.right() <= GAP + columns  # the row is filled, up to rounding
    table = view.advice_table
    qtbot.waitUntil(lambda: table.viewport().width() > 0)
    money = table.horizontalHeader()
    right = money.sectionViewportPosition(6) + money.sectionSize(6)
    assert right <= table.viewport().width()  # money and its basis are in view, no horizontal scroll needed
    assert view.splitter.sizes()[1] >= 0.35 * sum(view.splitter.sizes())


def test_the_fleet_view_fits_900_by_600(make_window: Any, qtbot: Any) -> None:
    """Found (#27): selecting a fleet grew a 900x600 window to 1212 px: the summary line did not
    wrap and the Advice table's money columns were off-screen."""
    from gpuws.app.advice import FleetAdviceReport
    from gpuws.core.fleet.model import MissingGpu

    window = _window_with_fleet_lab(make_window, qtbot)
    window.resize(900, 600)
    window.show()
    qtbot.waitExposed(window)
    view = window.fleet_view
    qtbot.wait(200)  # the window settles on its first host first
    window.fleet_list.list.setCurrentRow(0)
    assert window.stack.currentWidget() is view
    snap = _fleet(64)
    snap.missing = [MissingGpu("node-003", 5, None, "GPU-gone", "NVIDIA H100 80GB HBM3", "10.0.0.3:9400",
                               1.7e9, True)]
    view.profile = FleetProfile("lab", "http://127.0.0.1:9", price_per_gpu_hour=3.0)
    view.apply_snapshot(snap)
    view.apply_advice(FleetAdviceReport("lab", 86_400, [
        _advice("a-very-long-node-name-from-a-cloud.example.internal", 3, Advice.STOP, None, -1234.5),
        _advice("node-001", 0, Advice.SMALLER, "2x3g.40gb+1g.10gb", -2.25)]))
    qtbot.wait(50)  # let the layouts settle
    assert window.stack.currentWidget() is view
    assert window.width() <= 900, window.width()
    assert view.width() <= 900 and view.summary.width() <= view.width()
    # The summary counts GPUs and MIG instances apart, carries its currency, and wraps.
    text = view.summary.text()
    assert "GPUs on" in text and "1 not reporting" in text and "/h" in text and "$" in text
    assert view.summary.wordWrap()
    assert view.missing_label.isVisibleTo(view) and "not reporting since" in view.missing_label.text()
    first = view.grid.tiles()[0]  # the GPU that stopped reporting heads the tiles
    assert (first.gpu.host, first.attention, first.note.startswith("not reporting since")) == (
        "node-003", Attention.NOT_REPORTING, True)
    table = view.advice_table
    header = table.horizontalHeader()
    for column in (4, 5, 6):  # per hour, per month, basis
        right = header.sectionViewportPosition(column) + header.sectionSize(column)
        assert right <= table.viewport().width(), (column, right, table.viewport().width())
    assert table.item(0, 5).text() == "-$901,185.00" and table.item(0, 6).text() == "medium"


def test_nvlink_in_the_summary_and_not_exported_on_a_tile(qtbot: Any) -> None:
    view = FleetView(None)
    qtbot.addWidget(view)
    view.resize(1000, 700)
    view.show()
    qtbot.waitExposed(view)
    snap = _fleet(2)
    for g in snap.gpus:
        g.values["util_gpu_pct"] = 80.0
        g.values["nvlink_bandwidth_total"] = 120_000.0  # MB/s, as DCGM field 449 reads
    snap.gpus[0].throttle_source = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
    view.apply_snapshot(snap)
    _frame(qtbot, view.grid)
    assert "NVLink 240 GB/s" in view.summary.text()
    texts = {t.gpu.gpu: t._texts[1].text() for t in view.grid.tiles() if t._texts is not None}
    assert "thrott" in texts[1] and "thrott" not in texts[0], texts
