"""Graphs people can read: throttle badges agree with the Throttle row; the detail plot's axes,
legend, labelled threshold, readout (with a background, gone when the mouse leaves) and paused state."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QPointF

from gpuws.core.telemetry.alerts import Alert, AlertKind, Severity
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui.telemetry.gpu_card import GpuCard
from gpuws.ui.telemetry.metric_plot import DetailPlot
from tests.ui.telemetry_samples import fill_store, h100_sample


def _power_alert(t: float) -> Alert:
    return Alert(1, "demo", "0", AlertKind.POWER_THROTTLE, Severity.INFO, "power throttling", t)


def test_power_badge_and_throttle_row_come_from_the_same_reasons(qtbot: Any) -> None:
    """Found: a "Power throttle" badge beside a Throttle row saying "none"."""
    card = GpuCard("0", "H100")
    qtbot.addWidget(card)
    now = time.time()
    calm = h100_sample(now, 0)
    calm.throttle_reasons = []
    card.update_view(calm, None, now - 60, now, alerts=[_power_alert(now - 30)])  # alert still clearing
    assert card.fact("Throttle") == "none" and "Power throttle" not in card.badge_texts()
    capped = h100_sample(now, 0)
    capped.throttle_reasons = ["sw_power_cap"]
    card.update_view(capped, None, now - 60, now, alerts=[])  # capping before its alert's hold
    assert "sw power cap" in card.fact("Throttle") and card.badge_texts() == ["Power throttle"]


def _plot(qtbot: Any) -> tuple[DetailPlot, float]:
    store = TelemetryStore()
    now = time.time()
    fill_store(store, "demo", now - 120, 120, gpus=1)
    plot = DetailPlot()
    qtbot.addWidget(plot)
    plot.resize(800, 400)
    plot.show()
    plot.show_metric("demo", "0", "util_gpu_pct")
    plot.refresh(store, now - 120, now)
    return plot, now


def test_detail_plot_has_labelled_axes_legend_and_threshold(qtbot: Any) -> None:
    plot, _now = _plot(qtbot)
    assert plot.plot.getAxis("bottom").labelText == "Time"
    assert plot.plot.getAxis("left").labelText == "GPU utilisation" and plot.plot.getAxis("left").labelUnits == "%"
    assert plot.legend_names() == ["GPU utilisation"]
    plot.show_metric("demo", "0", "mem_used_mib")
    plot.set_threshold(90.0, "OOM risk 90 %", y=72_000.0)
    assert plot.threshold_line.isVisible() and plot.threshold_text() == "OOM risk 90 %"


def test_readout_follows_the_mouse_with_a_background_and_hides_on_leave(qtbot: Any) -> None:
    plot, now = _plot(qtbot)
    qtbot.waitExposed(plot)
    vb = plot.plot.vb
    inside = vb.mapViewToScene(QPointF(now - 60, 50.0))
    plot._on_mouse_moved(inside)
    assert plot.hover_label.isVisible() and plot.hover_label.fill.style() != 0  # a filled background
    assert plot.readout_text()
    # Near the right edge the readout flips to the left of the cursor instead of sliding off.
    edge = vb.mapViewToScene(QPointF(now - 1, 50.0))
    plot._on_mouse_moved(edge)
    assert plot.hover_label.anchor.x() == 1.0
    plot.leave_plot()
    assert not plot.hover_label.isVisible() and not plot.v_line.isVisible()


def test_paused_state_is_visible_on_the_plot(qtbot: Any) -> None:
    plot, _now = _plot(qtbot)
    assert not plot.paused_badge.isVisibleTo(plot)
    plot.set_paused(True)
    assert plot.paused_badge.isVisibleTo(plot) and "Paused" in plot.paused_badge.text()
    plot.set_paused(False)
    assert not plot.paused_badge.isVisibleTo(plot)


def test_sparklines_stay_readable_in_the_24_h_window(qtbot: Any) -> None:
    """Found: in the 24 h window the sparklines shrink to a pixel."""
    store = TelemetryStore()
    now = time.time()
    fill_store(store, "demo", now - 600, 600, gpus=1)  # ten minutes of history
    card = GpuCard("0", "H100")
    qtbot.addWidget(card)
    card.resize(700, 400)
    card.show()
    window = store.window("demo", "0", now - 86_400, now)
    card.update_view(h100_sample(now, 0), window, now - 86_400, now)
    row = list(card.rows).index("util_gpu_pct")
    width = card.plots.plot_rect(row).width()
    assert card.plots.line_extent(row) > 0.8 * width


def test_dark_theme_recolours_the_detail_plot_and_shows_check_boxes(qtbot: Any) -> None:
    """Found: in the dark theme the detail plot stays white and "Stop when idle for" is invisible."""
    from PySide6.QtGui import QColor
    from PySide6.QtWidgets import QApplication, QCheckBox

    from gpuws.ui import theme

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    before_palette, before_style = app.palette(), app.style().name()
    plot, _now = _plot(qtbot)
    try:
        theme.apply_theme(app, theme.ThemeChoice.DARK, before_palette)
        qtbot.waitUntil(lambda: plot.plot_widget.backgroundBrush().color().lightness() < 80, timeout=2000)
        box = QCheckBox("Stop when idle for")
        qtbot.addWidget(box)
        box.resize(200, 30)
        image = box.grab().toImage()
        background = QColor(image.pixel(box.width() - 2, 2)).lightness()
        indicator = [QColor(image.pixel(x, y)).lightness() for x in range(0, 20) for y in range(0, 30)]
        assert max(indicator) - background > 60  # the box's outline stands out from the window
    finally:
        app.setPalette(before_palette)
        app.setStyle(before_style)


def test_a_vgpu_never_shows_more_than_100_percent(qtbot: Any) -> None:
    """Found: a vGPU showed "101 %" utilisation."""
    card = GpuCard("0", "A100 vGPU")
    qtbot.addWidget(card)
    now = time.time()
    sample = h100_sample(now, 0)
    sample.util_gpu_pct = 101.0
    card.update_view(sample, None, now - 60, now)
    assert card.rows["util_gpu_pct"].value_text == "100 %"
