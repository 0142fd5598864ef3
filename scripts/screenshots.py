"""Render the README screenshots: the demo host in every tab, after some live telemetry.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/screenshots.py docs/screenshots [--watch S]

Uses the real window, the in-process simulated host and the real telemetry stream; the only
difference from a user's session is that the window is grabbed instead of shown on a screen.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("GPUWS_CONFIG_DIR", tempfile.mkdtemp(prefix="gpuws-shots-"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--watch", type=float, default=25.0, help="seconds of telemetry before the shots")
    args = parser.parse_args()

    from PySide6.QtWidgets import QApplication

    from gpuws.ui.app import wait_until
    from gpuws.ui.bridge import AsyncBridge
    from gpuws.ui.main_window import MainWindow
    from gpuws.ui.tabs.benchmarks import BenchmarksTab
    from gpuws.ui.tabs.telemetry import TelemetryTab

    app = QApplication(sys.argv[:1])
    bridge = AsyncBridge()
    bridge.start()
    window = MainWindow(bridge)
    window.resize(1280, 820)
    try:
        window.open_demo()
        window.show()
        connected = wait_until(app, lambda: getattr(window.sessions.get("demo"), "state", "") == "connected", 30)
        if not connected:
            print("the demo host did not connect", file=sys.stderr)
            return 1
        telemetry = next(w for w in window.detail.tab_widgets if isinstance(w, TelemetryTab))
        telemetry.set_window(60.0)  # a one-minute window: the graphs fill while we wait
        wait_until(app, lambda: False, args.watch)
        bench = next(w for w in window.detail.tab_widgets if isinstance(w, BenchmarksTab))
        window.detail.tabs.setCurrentWidget(bench)
        bench.start("quick")
        if not wait_until(app, lambda: not bench.running, 120):
            print("the benchmark did not finish", file=sys.stderr)
        args.out.mkdir(parents=True, exist_ok=True)
        for index in range(window.detail.tabs.count()):
            window.detail.tabs.setCurrentIndex(index)
            wait_until(app, lambda: False, 1.5)
            name = window.detail.tabs.tabText(index).lower()
            path = args.out / f"{name}.png"
            window.grab().save(str(path), "PNG")
            print(path)
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
