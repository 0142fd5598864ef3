"""The fleet view's utilisation line: painted at the right height, broken at gaps, no pyqtgraph."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from PySide6.QtGui import QColor, QImage

from gpuws.ui.fleet.util_plot import FleetUtilPlot
from gpuws.ui.telemetry.metrics import series_colour

pytestmark = pytest.mark.gui
T0 = 1_700_000_000.0


def near(a: QColor, b: QColor) -> bool:
    return abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue()) < 120


def test_the_line_sits_at_its_value_and_breaks_at_gaps(qtbot: Any) -> None:
    plot = FleetUtilPlot()
    qtbot.addWidget(plot)
    plot.resize(648, 120)
    times = T0 + np.arange(121) * 720.0
    values = np.full(121, 50.0, dtype=np.float32)
    values[40:80] = np.nan  # nothing scraped for a third of the window
    plot.set_data(times, values, float(times[0]), float(times[-1]))
    image = QImage(plot.size(), QImage.Format.Format_ARGB32)
    image.fill(plot.palette().window().color())
    plot.render(image)
    rect = plot.plot_rect()
    colour = series_colour("util", plot.palette())
    y_half = round(rect.bottom() - 0.5 * rect.height())

    def line_at(x: float) -> list[int]:
        return [y for y in range(image.height()) if near(image.pixelColor(round(x), y), colour)]

    before = line_at(rect.left() + rect.width() * 0.15)
    gap = line_at(rect.left() + rect.width() * 0.5)
    after = line_at(rect.left() + rect.width() * 0.85)
    assert before and all(abs(y - y_half) <= 2 for y in before)
    assert after and all(abs(y - y_half) <= 2 for y in after)
    assert gap == []
    t, v = plot.plotted()
    assert t is times and v is values


def test_the_fleet_view_does_not_load_pyqtgraph() -> None:
    code = "import sys, gpuws.ui.fleet.sidebar; print('pyqtgraph' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "False"
