"""The Telemetry tab and its widgets, fed from a real TelemetryStore (pytest-qt, offscreen)."""

from __future__ import annotations

import csv
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtGui import QColor, QImage

from gpuws.core.models import AlertThresholds
from gpuws.core.telemetry.alerts import AlertKind
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.tabs.telemetry import PAGE_ALERTS, PAGE_OVERVIEW, TelemetryTab
from gpuws.ui.telemetry.hub import TelemetryHub
from gpuws.ui.telemetry.metrics import NOT_SUPPORTED, series_colour
from tests.ui.telemetry_samples import fill_store, h100_sample

pytestmark = pytest.mark.gui



@pytest.fixture
def hub(bridge: AsyncBridge) -> Iterator[TelemetryHub]:
    hub = TelemetryHub(bridge)
    hub.notifier.enabled = True
    yield hub
    hub.shutdown()
    hub.deleteLater()


@pytest.fixture
def tab(hub: TelemetryHub, qtbot: Any) -> Iterator[TelemetryTab]:
    widget = TelemetryTab(hub=hub)
    qtbot.addWidget(widget)
    widget.host = "demo"
    widget.resize(1100, 820)
    yield widget
    widget.clock.stop()


def test_cards_show_values_and_not_supported(tab: TelemetryTab, hub: TelemetryHub, qtbot: Any) -> None:
    fill_store(hub.store, "demo", time.time() - 120, 120, gpus=2, mig=True)
    tab.show()
    qtbot.waitUntil(lambda: set(tab.cards.cards) == {"0", "0/mig1", "1"}, timeout=2000)
    qtbot.waitUntil(lambda: not any(c.stale for c in tab.cards.cards.values()), timeout=2000)
    gpu0 = tab.cards.cards["0"]
    assert gpu0.rows["util_gpu_pct"].value_text.endswith(" %")
    assert "/ 79.6 GiB" in gpu0.rows["mem_used_mib"].value_text
    assert "/ 700 W" in gpu0.rows["power_w"].value_text
    assert gpu0.fact("Fan") == NOT_SUPPORTED  # None, never "0 %"
    assert gpu0.fact("Processes").startswith("python3 (4242)")
    assert gpu0.pstate.text() == "P0"
    mig = tab.cards.cards["0/mig1"]
    assert mig.rows["util_gpu_pct"].value_text == NOT_SUPPORTED
    assert not mig.rows["util_gpu_pct"].supported
    assert mig.rows["mem_used_mib"].value_text == "3.9 / 9.6 GiB"
    idle = tab.cards.cards["1"]
    assert "GPU idle" in idle.fact("Throttle") and idle.fact("Throttle").startswith("none")
    assert idle.rows["util_gpu_pct"].value_text == "0 %"  # a real zero stays a zero


def test_gaps_are_nan_breaks_in_cards_and_detail_plot(tab: TelemetryTab, hub: TelemetryHub, qtbot: Any) -> None:
    fill_store(hub.store, "demo", time.time() - 300, 300, gpus=1, gap=(100, 160))
    tab.show()
    qtbot.waitUntil(lambda: "0" in tab.cards.cards and not tab.cards.cards["0"].stale, timeout=2000)
    _t, ys = tab.cards.cards["0"].rows["util_gpu_pct"].series()
    assert np.isnan(ys[0]).sum() >= 1
    tab.open_detail("0", "util_gpu_pct")
    pt, py = tab.detail.plotted()
    nan_at = np.flatnonzero(np.isnan(py))
    assert nan_at.size >= 1 and 0 < nan_at[0] < py.size - 1
    finite_t = pt[np.isfinite(py)]
    jump = np.diff(finite_t).argmax()
    assert finite_t[jump + 1] - finite_t[jump] > 50  # the 60 s outage...
    assert np.isnan(py[(pt > finite_t[jump]) & (pt < finite_t[jump + 1])]).any()  # ...is broken by NaN
    curve = tab.detail.curve
    assert curve.opts["connect"] == "finite"
    assert curve.opts["autoDownsample"] and curve.opts["downsampleMethod"] == "peak"
    assert curve.opts["clipToView"] and curve.opts["antialias"] is False
    hover = tab.detail.hover_text(float(pt[nan_at[0]]))
    assert hover is not None and hover.endswith("gap")
    assert tab.detail.hover_text(float(pt[-1])).endswith(" %")  # type: ignore[union-attr]


def test_frame_clock_is_bounded_and_stops_when_hidden(tab: TelemetryTab, hub: TelemetryHub, qtbot: Any) -> None:
    fill_store(hub.store, "demo", time.time() - 30, 30, gpus=1)
    assert not tab.clock.running  # never shown: no timer, no reads
    tab.show()
    assert tab.clock.running and tab.clock.fps == pytest.approx(10, rel=0.05)
    start = tab.clock.frames
    qtbot.wait(600)
    frames = tab.clock.frames - start
    assert 3 <= frames <= 8  # ~10 fps, never one frame per sample or a busy loop
    assert tab.reads <= tab.clock.frames  # a frame reads the store at most once
    tab.hide()
    assert not tab.clock.running
    hidden_at = tab.clock.frames
    qtbot.wait(300)
    assert tab.clock.frames == hidden_at


def test_frames_only_redraw_on_new_data(tab: TelemetryTab, hub: TelemetryHub, qtbot: Any) -> None:
    now = time.time()
    fill_store(hub.store, "demo", now - 30, 30, gpus=1)
    tab.set_window(86400.0)  # the range moves by a redraw step every 144 s: not within this test (mostly)
    tab.show()
    qtbot.wait(350)
    reads, frames = tab.reads, tab.clock.frames
    qtbot.wait(700)
    assert tab.clock.frames - frames >= 4  # the clock ticked...
    assert tab.reads - reads <= 1  # ...but without new samples nothing was read (one step boundary at most)
    reads = tab.reads
    hub.store.ingest_samples("demo", [h100_sample(now + 0.5, 0)])
    qtbot.waitUntil(lambda: tab.reads > reads, timeout=1000)


def test_alerts_show_on_card_log_and_notifier(tab: TelemetryTab, hub: TelemetryHub, qtbot: Any) -> None:
    now = time.time()
    fill_store(hub.store, "demo", now - 20, 20, gpus=1)
    hub.service.alerts.configure("demo", AlertThresholds(mem_used_pct=90.0), 3.0)
    tab.show()
    full = h100_sample(now, 0)
    full.mem_used_mib = 0.95 * 81_559.0
    hub.store.ingest_samples("demo", [full])
    # The engine runs on the loop thread in the app; its event reaches the GUI through the bridge.
    hub.bridge.run_async(_evaluate(hub, [full]))
    qtbot.waitUntil(lambda: any(r[4] == "OOM risk" for r in tab.alert_view.rows()), timeout=3000)
    row = next(r for r in tab.alert_view.rows() if r[4] == "OOM risk")
    assert row[1:4] == ["Warning", "demo", "0"] and row[7] == "active" and "95%" in row[5] and row[6] == "1"
    qtbot.waitUntil(lambda: "OOM risk" in tab.cards.cards["0"].badge_texts(), timeout=2000)
    assert hub.notifier.shown and hub.notifier.shown[-1][0] == "OOM risk on demo"
    assert tab.page_buttons[PAGE_ALERTS].text() == "Alerts (1)"
    ok = h100_sample(now + 1, 0)
    ok.mem_used_mib = 0.5 * 81_559.0
    # h100_sample power-throttles for a fifth of each wave (by wall clock): a badge the card must
    # show, so this sample is made calm or the test depends on the time of day.
    ok.throttle_reasons = []
    # As in the app: the sample is in the store (so the card has a new frame to draw) before the
    # engine sees it.
    hub.store.ingest_samples("demo", [ok])
    hub.bridge.run_async(_evaluate(hub, [ok]))
    qtbot.waitUntil(lambda: tab.alert_view.rows()[0][7] != "active", timeout=3000)
    qtbot.waitUntil(lambda: tab.cards.cards["0"].badge_texts() == [], timeout=2000)
    assert [a.kind for a in hub.alerts()] == [AlertKind.OOM_RISK]
    # Raised again soon after: the same row counts 2 and the desktop is not told twice.
    shown = len(hub.notifier.shown)
    hub.bridge.run_async(_evaluate(hub, [full]))
    qtbot.waitUntil(lambda: tab.alert_view.rows()[0][6] == "2", timeout=3000)
    assert len(tab.alert_view.rows()) == 1 and len(hub.notifier.shown) == shown
    assert tab.alert_view.model.resets == 1  # appended and updated, never rebuilt


def test_acknowledge_mute_and_hold_from_the_alert_view(tab: TelemetryTab, hub: TelemetryHub, qtbot: Any) -> None:
    now = time.time()
    hub.service.alerts.configure("demo", AlertThresholds(mem_used_pct=90.0), 3.0)
    tab.show()
    full = h100_sample(now, 0)
    full.mem_used_mib = 0.95 * 81_559.0
    hub.bridge.run_async(_evaluate(hub, [full]))
    qtbot.waitUntil(lambda: len(tab.alert_view.rows()) == 1, timeout=3000)
    view = tab.alert_view
    view.table.selectRow(0)
    assert view.ack_button.isEnabled()
    view.ack_button.click()
    assert view.rows()[0][7] == "active, seen" and not view.ack_button.isEnabled()
    view.mute_button.click()
    assert hub.service.alert_log.is_muted("demo", AlertKind.OOM_RISK)
    assert view.mute_button.text().startswith("Unmute") and "OOM risk on demo" in view.muted_label.text()
    shown = len(hub.notifier.shown)
    other = h100_sample(now, 1)
    other.mem_used_mib = 0.95 * 81_559.0
    hub.bridge.run_async(_evaluate(hub, [other]))  # a new alert of a muted kind: logged, not notified
    qtbot.waitUntil(lambda: len(view.rows()) == 2, timeout=3000)
    assert len(hub.notifier.shown) == shown
    view.hold_kind.setCurrentIndex(view.hold_kind.findData(AlertKind.POWER_THROTTLE))
    assert view.hold_spin.value() == 60
    view.hold_spin.setValue(120)
    assert hub.service.alerts.policy(AlertKind.POWER_THROTTLE).hold_s == 120.0


async def _evaluate(hub: TelemetryHub, samples: list[Any]) -> None:
    hub.service.alerts.evaluate("demo", samples)


def test_export_csv_and_png(tab: TelemetryTab, hub: TelemetryHub, qtbot: Any, tmp_path: Path) -> None:
    fill_store(hub.store, "demo", time.time() - 60, 60, gpus=2)
    tab.show()
    qtbot.waitUntil(lambda: len(tab.cards.cards) == 2, timeout=2000)
    rows = tab.export_csv_to(tmp_path / "demo.csv")
    with (tmp_path / "demo.csv").open(newline="") as f:
        table = list(csv.DictReader(f))
    assert rows == len(table) >= 110 and {r["device"] for r in table} == {"0", "1"}
    assert table[0]["host"] == "demo" and float(table[0]["util_gpu_pct"]) >= 0
    assert table[0]["fan_pct"] == ""  # missing stays empty, not 0
    tab.open_detail("0", "power_w")
    png = tab.export_png_to(tmp_path / "plot", tab.detail.plot_widget)
    assert png.suffix == ".png" and QImage(str(png)).width() > 100


def _colour_share(image: QImage, colour: QColor, tolerance: int = 40) -> float:
    """Fraction of all pixels close to `colour`.

    Every pixel, not a grid: a one-pixel line lies on a sampled row only some of the time, which
    made the share swing around a threshold with the time of day (the test data's wave).
    """
    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    width, height, stride = rgb.width(), rgb.height(), rgb.bytesPerLine()
    raw = np.frombuffer(rgb.constBits(), dtype=np.uint8, count=stride * height).reshape(height, stride)
    pixels = raw[:, : width * 3].reshape(height, width, 3).astype(np.int16)
    distance = np.abs(pixels - np.array([colour.red(), colour.green(), colour.blue()], dtype=np.int16)).sum(axis=2)
    return float((distance < tolerance).mean())


@pytest.mark.parametrize("palette", ["light", "dark"])
def test_screenshot_has_content(tab: TelemetryTab, hub: TelemetryHub, qtbot: Any, qapp: Any, palette: str,
                                tmp_path: Path) -> None:
    from gpuws.ui import theme

    old = qapp.palette()
    qapp.setPalette(theme.dark_palette() if palette == "dark" else theme.light_palette())
    try:
        now = time.time()
        fill_store(hub.store, "demo", now - 600, 600, gpus=3, mig=True, gap=(300, 340))
        fill_store(hub.store, "other-host", now - 600, 600, gpus=2)
        tab.show()
        qtbot.waitUntil(lambda: len(tab.cards.cards) == 4 and not tab.cards.cards["0"].stale, timeout=2000)
        tab.open_detail("0", "mem_used_mib")
        qtbot.wait(150)
        path = tmp_path / f"telemetry-tab-{palette}.png"
        assert tab.grab().save(str(path))
        image = QImage(str(path))
        assert image.width() == 1100
        pal = tab.palette()
        assert _colour_share(image, series_colour("util", pal)) > 0.0003  # utilisation lines drawn
        assert _colour_share(image, series_colour("memory", pal)) > 0.0005  # memory lines and the detail plot
        background = pal.color(pal.ColorRole.Window)
        assert _colour_share(image, background, 12) < 0.8  # not an empty page
        tab.show_page(PAGE_OVERVIEW)
        qtbot.waitUntil(lambda: len(tab.overview.canvas.tiles) == 5, timeout=2000)
        shot = tab.grab()
        assert shot.save(str(tmp_path / f"telemetry-overview-{palette}.png"))
        assert _colour_share(shot.toImage(), series_colour("util", pal)) > 0.0002
    finally:
        qapp.setPalette(old)


def test_narrow_toolbar_wraps_instead_of_crushing_and_pause_is_visible(tab: TelemetryTab, qtbot: Any) -> None:
    """Found: forced smaller, the toolbar is crushed ("T…t", "Al…ts"); paused shows only in a button text."""
    tab.resize(640, 500)
    tab.show()
    qtbot.waitExposed(tab)
    buttons = [*tab.page_buttons, tab.pause_button, tab.csv_button, tab.png_button]
    for button in buttons:
        assert button.width() >= button.sizeHint().width(), button.text()
        assert button.geometry().right() <= tab.width(), button.text()
    assert tab.png_button.y() > tab.page_buttons[0].y()  # on a second line
    assert not tab.paused_label.isVisibleTo(tab)
    tab.set_paused(True)
    assert tab.paused_label.isVisibleTo(tab) and tab.detail.paused_badge.isVisibleTo(tab.detail)
