"""`gpuws --demo --screenshot`: the window rendered offscreen after the simulated host was probed.

The PNGs are kept in each test's tmp_path for a person to look at (light and dark palettes).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QImage

from gpuws.core.paths import config_dir

pytestmark = pytest.mark.gui



def _screenshot(tmp_path: Path, name: str, theme: str) -> QImage:
    (config_dir() / "gui.ini").write_text(f"[prefs]\ntheme={theme}\nconnect_on_start=false\n")
    out = tmp_path / f"{name}.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-m", "gpuws", "--demo", "--screenshot", str(out)], env=env,
                          capture_output=True, text=True, timeout=90)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "before the demo host was ready" not in proc.stderr
    image = QImage(str(out))
    assert not image.isNull()
    return image


def _colours(image: QImage, step: int = 7) -> set[int]:
    return {image.pixel(x, y) for x in range(0, image.width(), step) for y in range(0, image.height(), step)}


def _mean_lightness(image: QImage, step: int = 11) -> float:
    values = [image.pixelColor(x, y).lightness() for x in range(0, image.width(), step)
              for y in range(0, image.height(), step)]  # fmt: skip
    return sum(values) / len(values)


@pytest.mark.slow  # two app start-ups in subprocesses
def test_demo_screenshot_light_and_dark(tmp_path: Path) -> None:
    light = _screenshot(tmp_path, "demo-light", "light")
    dark = _screenshot(tmp_path, "demo-dark", "dark")
    for image in (light, dark):
        assert (image.width(), image.height()) == (1180, 760)  # the window's default size
        assert len(_colours(image)) > 40  # text, cards, badges: far from a blank frame
    assert _mean_lightness(light) > 150 > 90 > _mean_lightness(dark)


def test_demo_in_the_window_is_probed_and_labelled(make_window: Any, qtbot: Any, tmp_path: Path) -> None:
    window = make_window()
    with qtbot.waitSignal(window.demo_ready, timeout=15000):
        window.open_demo()
    qtbot.waitUntil(lambda: window.sidebar.entry("demo").state == "connected", timeout=20000)
    entry = window.sidebar.entry("demo")
    assert entry.simulated and "H100" in entry.summary
    overview = window.detail.tab_widgets[0]
    assert len(overview.gpu_cards) == 4  # the default demo: H100, A100, L40S and a vGPU guest
    assert [c.gpu.is_vgpu_slice for c in overview.gpu_cards] == [False, False, False, True]
    assert window.detail.sim_badge.isVisibleTo(window)
    assert not (config_dir() / "profiles.toml").exists() or "demo" not in (config_dir() / "profiles.toml").read_text()
    window.show()
    image = window.grab().toImage()
    image.save(str(tmp_path / "demo-inprocess.png"))  # for a person to look at
    assert len(_colours(image)) > 40
