"""Render the README screenshots: the demo host in every tab, in live states, at any window size.

    .venv/bin/python scripts/screenshots.py docs/screenshots [--size 1600x1000] [--watch S]
    xvfb-run -a .venv/bin/python scripts/screenshots.py OUT --size 900x600 --report OUT/report.json

Uses the real window, the in-process simulated host and the real telemetry stream. Before the
shots it brings the host into the states worth seeing: GPU 1 resized to a MIG layout through the
Resize tab, a Jupyter tunnel opened from the Session tab, an alert raised (the demo's thresholds
are made tight), a finished benchmark, the memory detail plot with its OOM-risk line, and the
process table.

For each shot it also checks the window for what a person would call broken and writes it to
`--report` (JSON): buttons and labels narrower than their text needs (clipped), widgets that stick
out of the window, and shots that are mostly one flat colour (empty).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("GPUWS_CONFIG_DIR", tempfile.mkdtemp(prefix="gpuws-shots-"))


def _size(text: str) -> tuple[int, int]:
    width, _, height = text.partition("x")
    return int(width), int(height)


def clipped_widgets(window: Any) -> list[str]:
    """Visible buttons and labels that cannot show their text, or that stick out of the window."""
    from PySide6.QtCore import QPoint, QRect
    from PySide6.QtWidgets import QAbstractButton, QLabel, QScrollArea, QWidget

    problems: list[str] = []
    frame = QRect(QPoint(0, 0), window.size())
    for widget in window.findChildren(QWidget):
        if not widget.isVisible() or widget.window() is not window or widget.width() <= 0:
            continue
        if _inside_scroll_area(widget, QScrollArea):
            continue  # a scroll area's content may be larger than its viewport: it scrolls
        if isinstance(widget, QAbstractButton | QLabel):
            text = widget.text().replace("&", "")
            if not text or (isinstance(widget, QLabel) and widget.wordWrap()):
                continue
            needed = widget.minimumSizeHint().width() if isinstance(widget, QAbstractButton) else (
                widget.fontMetrics().horizontalAdvance(text.splitlines()[0]))
            if isinstance(widget, QLabel) and widget.textFormat() != 0 and "<" in text:
                continue  # rich text: its width is not the plain text's
            if widget.width() + 1 < needed:
                problems.append(f"{type(widget).__name__} {text[:40]!r}: {widget.width()} px of {needed}")
        rect = QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())
        if isinstance(widget, QAbstractButton) and not frame.contains(rect):
            problems.append(f"{type(widget).__name__} {widget.text()[:40]!r} outside the window")
    return problems


def _inside_scroll_area(widget: Any, scroll_area_type: type) -> bool:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, scroll_area_type):
            return True
        parent = parent.parentWidget()
    return False


def flat_fraction(image: Any, tiles: int = 8) -> float:
    """Share of the image's tiles that are one flat colour (an empty region)."""
    width, height = image.width(), image.height()
    flat = 0
    for ty in range(tiles):
        for tx in range(tiles):
            colours = {image.pixel(x, y)
                       for x in range(tx * width // tiles, (tx + 1) * width // tiles, 6)
                       for y in range(ty * height // tiles, (ty + 1) * height // tiles, 6)}
            flat += len(colours) <= 1
    return flat / (tiles * tiles)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", type=_size, default=(1280, 820), help="window size, WIDTHxHEIGHT")
    parser.add_argument("--watch", type=float, default=20.0, help="seconds of telemetry before the shots")
    parser.add_argument("--report", type=Path, help="write what was checked on each shot here (JSON)")
    parser.add_argument("--prefix", default="", help="file name prefix, e.g. '900x600-'")
    args = parser.parse_args()

    from PySide6.QtWidgets import QApplication

    import gpuws.ui.external
    from gpuws.core.models import AlertThresholds
    from gpuws.core.telemetry.alerts import AlertKind
    from gpuws.ui.app import wait_until
    from gpuws.ui.bridge import AsyncBridge
    from gpuws.ui.main_window import MainWindow
    from gpuws.ui.tabs.benchmarks import BenchmarksTab
    from gpuws.ui.tabs.health import HealthTab
    from gpuws.ui.tabs.resize import ResizeTab
    from gpuws.ui.tabs.session import SessionTab
    from gpuws.ui.tabs.telemetry import PAGE_ALERTS, PAGE_HOST, PAGE_PROCESSES, TelemetryTab

    # No browser opens during the shots: the Session tab then offers "Copy URL", as it would.
    gpuws.ui.external.open_in_browser = lambda _url: False  # type: ignore[assignment]

    app = QApplication(sys.argv[:1])
    bridge = AsyncBridge()
    bridge.start()
    window = MainWindow(bridge)
    window.end_process = False
    window.resize(*args.size)
    report: dict[str, Any] = {"size": list(args.size), "shots": {}}

    def settle(seconds: float = 1.0) -> None:
        wait_until(app, lambda: False, seconds)

    try:
        window.open_demo()
        window.show()
        connected = wait_until(app, lambda: getattr(window.sessions.get("demo"), "state", "") == "connected", 30)
        if not connected:
            print("the demo host did not connect", file=sys.stderr)
            return 1
        tabs = {type(w): w for w in window.detail.tab_widgets}
        telemetry: TelemetryTab = tabs[TelemetryTab]
        resize: ResizeTab = tabs[ResizeTab]
        session: SessionTab = tabs[SessionTab]
        bench: BenchmarksTab = tabs[BenchmarksTab]
        health: HealthTab = tabs[HealthTab]

        # An alert: tight thresholds on the demo host, and power capping reported at once.
        hub = telemetry.hub
        if hub is not None:
            profile = window.sessions["demo"].profile
            hub.service.alerts.set_policy(AlertKind.POWER_THROTTLE, hold_s=2.0)
            hub.service.alerts.configure("demo", AlertThresholds(mem_used_pct=40.0, idle_minutes=0.2),
                                         profile.price_per_hour, profile.currency or "")
        telemetry.set_window(60.0)  # a one-minute window: the graphs fill while we wait

        # A MIG layout: GPU 1 (the A100) to seven slices, through the Resize tab as a user would.
        window.detail.tabs.setCurrentWidget(resize)
        wait_until(app, lambda: bool(resize.gpus), 30)
        combo = resize.picker.gpu_combo
        combo.setCurrentIndex(combo.findData(1))
        if resize.picker.select_target("7x1g.10gb") and wait_until(
                app, lambda: resize.preview is not None, 30):
            if resize.processes_view.processes:
                resize.processes_view.stop_checkbox.setChecked(True)
            resize.confirmation.field.setText("demo")
            if resize.confirmation.apply_button.isEnabled():
                resize.confirmation.apply_button.click()
                wait_until(app, lambda: resize.progress_view.finished and not resize.applying, 90)
        wait_until(app, resize.refresh_button.isEnabled, 30)

        # A Jupyter tunnel from the Session tab.
        window.detail.tabs.setCurrentWidget(session)
        settle(0.5)
        session.open_tunnel()
        wait_until(app, lambda: session.tunnel_table.rowCount() > 0, 60)
        if session.tunnel_table.rowCount():
            session.tunnel_table.selectRow(0)
            session.open_selected_tunnel()  # no browser here: says so and offers Copy URL

        wait_until(app, lambda: False, args.watch)

        window.detail.tabs.setCurrentWidget(bench)
        bench.start("quick")
        if not wait_until(app, lambda: not bench.running, 120):
            print("the benchmark did not finish", file=sys.stderr)

        # The passive health check, as a user would run it from the Health tab.
        window.detail.tabs.setCurrentWidget(health)
        health.start()
        if not wait_until(app, lambda: health.tree.topLevelItemCount() > 0, 60):
            print("the health check did not finish", file=sys.stderr)

        args.out.mkdir(parents=True, exist_ok=True)

        def shoot(name: str) -> None:
            settle(1.2)
            path = args.out / f"{args.prefix}{name}.png"
            image = window.grab().toImage()
            image.save(str(path), "PNG")
            report["shots"][name] = {
                "path": str(path), "width": image.width(), "height": image.height(),
                "flat_fraction": round(flat_fraction(image), 3), "clipped": clipped_widgets(window),
            }
            print(path)

        for index in range(window.detail.tabs.count()):
            window.detail.tabs.setCurrentIndex(index)
            widget = window.detail.tabs.widget(index)
            if widget is telemetry:
                telemetry.show_page(PAGE_HOST)
                settle(0.5)
                cards = telemetry.cards.cards
                if cards:
                    telemetry.open_detail(next(iter(cards)), "mem_used_mib")
            shoot(window.detail.tabs.tabText(index).lower())
        window.detail.tabs.setCurrentWidget(telemetry)
        telemetry.show_page(PAGE_ALERTS)
        shoot("alerts")
        telemetry.show_page(PAGE_PROCESSES)
        wait_until(app, lambda: bool(telemetry.process_table.processes), 20)
        shoot("processes")
        telemetry.show_page(PAGE_HOST)
        if args.report is not None:
            args.report.parent.mkdir(parents=True, exist_ok=True)
            args.report.write_text(json.dumps(report, indent=2))
    finally:
        window.shutdown()
        window.close()
        window.deleteLater()
        bridge.shutdown()
        app.processEvents()
    return 0


if __name__ == "__main__":
    start = time.monotonic()
    code = main()
    print(f"done in {time.monotonic() - start:.1f} s", file=sys.stderr)
    raise SystemExit(code)
