"""Starting the GUI: the QApplication, the async bridge, the window; `--demo` and `--screenshot`."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

SCREENSHOT_WAIT_S = 30.0  # at most this long for the demo host to be connected and probed


def run_gui(demo: bool = False, screenshot: str | None = None) -> int:
    """Open the window (connected to the simulated host with `demo`); with `screenshot`, render
    it offscreen to that PNG and exit instead of running the event loop."""
    if screenshot is not None and not os.environ.get("QT_QPA_PLATFORM"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"  # must precede the QApplication
    # Qt hands large fills (long polylines, rounded cards) to a GUI thread pool and waits for it;
    # on small machines that hand-off costs more than the fill (benchmarks/bench_dashboard.py).
    os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")

    from PySide6.QtWidgets import QApplication

    from gpuws.ui.bridge import AsyncBridge
    from gpuws.ui.main_window import MainWindow
    from gpuws.ui.resources import app_icon
    from gpuws.ui.settings import Preferences
    from gpuws.ui.theme import ThemeChoice, apply_theme

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication([sys.argv[0] if sys.argv else "gpuws"])
    app.setApplicationName("gpuws")
    app.setApplicationDisplayName("gpuws")
    app.setDesktopFileName("gpuws")
    app.setWindowIcon(app_icon())
    # Remember what the platform gave us, so "Follow the system" can return to it.
    if app.property("gpuws_system_palette") is None:
        app.setProperty("gpuws_system_palette", app.palette())

    prefs = Preferences.load()
    if prefs.theme is not ThemeChoice.SYSTEM:  # before any widget exists, so all start themed
        app.setStyle("Fusion")  # Fusion honours an explicit palette on every platform
        apply_theme(app, prefs.theme, app.palette())
    bridge = AsyncBridge()
    bridge.start()
    window = MainWindow(bridge)
    try:
        if demo:
            window.open_demo()
        window.show()
        if screenshot is None:
            return int(app.exec())
        return _take_screenshot(app, window, Path(screenshot), demo)
    finally:
        window.shutdown()
        window.close()
        window.deleteLater()
        bridge.shutdown()
        app.processEvents()


def _take_screenshot(app: object, window: object, path: Path, demo: bool) -> int:
    from PySide6.QtWidgets import QApplication

    from gpuws.ui.main_window import MainWindow

    assert isinstance(app, QApplication) and isinstance(window, MainWindow)
    loaded = {"done": False}
    window.profiles_loaded.connect(lambda: loaded.update(done=True))

    def settled() -> bool:
        if not loaded["done"]:
            return False
        if not demo:
            return True
        session = window.sessions.get("demo")
        if window.demo_action.isEnabled() and session is None:
            return True  # the demo failed to start: the notice says why
        return session is not None and session.state not in ("connecting", "disconnected", "reconnecting")

    if not wait_until(app, settled, SCREENSHOT_WAIT_S):
        print(f"gpuws: screenshot taken before the demo host was ready ({SCREENSHOT_WAIT_S:g} s)", file=sys.stderr)
    wait_until(app, lambda: False, 0.3)  # let layouts settle and pending repaints land
    image = window.grab()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"gpuws: cannot write {path}: {exc.strerror}", file=sys.stderr)
        return 1
    if not image.save(str(path), "PNG"):
        print(f"gpuws: cannot write {path}", file=sys.stderr)
        return 1
    return 0


def wait_until(app: object, predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Process Qt events until `predicate()` holds or `timeout_s` passes; returns whether it held."""
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    assert isinstance(app, QApplication)
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        time.sleep(0.01)

