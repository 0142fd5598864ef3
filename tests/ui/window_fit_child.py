"""Run by tests/ui/test_window_fits_screen.py under a real Xvfb screen (xcb): opens the main
window with the demo host and a fleet configured, selects every view, and prints, as JSON, the
window's frame and the screen's available area after each one."""

from __future__ import annotations

import json
import sys
from typing import Any


def _snapshot() -> Any:
    from gpuws.core.fleet.model import FleetGpu
    from gpuws.remote.prometheus import Snapshot

    gpus = []
    for i in range(32):
        gpu = FleetGpu(host=f"node-{i // 16:03d}", gpu=i % 16, uuid=f"GPU-{i:08d}", model="NVIDIA H100 80GB HBM3")
        gpu.values = {"util_gpu_pct": float(i * 3 % 100), "mem_used_mib": 1000.0 + 2000.0 * (i % 5),
                      "mem_total_mib": 81559.0, "power_w": 400.0}
        gpus.append(gpu)
    return Snapshot("lab", 1.0, gpus)


def main() -> int:
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QApplication

    from gpuws.core.fleet.profiles import FleetProfile, FleetStore
    from gpuws.ui.app import wait_until
    from gpuws.ui.bridge import AsyncBridge
    from gpuws.ui.main_window import MainWindow
    from gpuws.ui.tabs.telemetry import TelemetryTab

    app = QApplication(sys.argv[:1])
    if not FleetStore().load():  # the second run (on the small screen) finds it saved
        FleetStore().add(FleetProfile("lab", "http://127.0.0.1:9"))  # unreachable: the view still shows
    bridge = AsyncBridge()
    bridge.start()
    window = MainWindow(bridge)
    window.end_process = False
    if "--save-at" in sys.argv:
        # As a user leaves it on a large monitor: this size and place are saved on exit.
        x, y, width, height = (int(v) for v in sys.argv[sys.argv.index("--save-at") + 1].split(","))
        window.show()
        window.setGeometry(x, y, width, height)
        wait_until(app, lambda: window.geometry().width() == width, 5)
        window.shutdown()
        window.close()
        bridge.shutdown()
        return 0
    views: list[dict[str, Any]] = []

    def record(name: str) -> None:
        wait_until(app, lambda: False, 0.4)  # layouts settle, the window grows if a view asks it to
        screen = window.screen()
        area: QRect = screen.availableGeometry()
        frame = window.frameGeometry()
        views.append({"view": name, "frame": [frame.x(), frame.y(), frame.width(), frame.height()],
                      "available": [area.x(), area.y(), area.width(), area.height()],
                      "notice": window.file_problems.banner.text() if window.file_problems.isVisible() else ""})

    try:
        window.show()
        record("first")
        window.open_demo()
        if not wait_until(app, lambda: getattr(window.sessions.get("demo"), "state", "") == "connected", 60):
            print("the demo host did not connect", file=sys.stderr)
            return 1
        window.sidebar.select("demo")
        for index in range(window.detail.tabs.count()):
            window.detail.tabs.setCurrentIndex(index)
            widget = window.detail.tabs.widget(index)
            if isinstance(widget, TelemetryTab):
                for page in range(len(widget.page_buttons)):
                    widget.show_page(page)
                    record(f"{window.detail.tabs.tabText(index)}/{widget.page_buttons[page].text()}")
            else:
                record(window.detail.tabs.tabText(index))
        wait_until(app, lambda: window.fleet_list.list.count() == 1, 10)
        window.fleet_list.list.setCurrentRow(0)
        if window.stack.currentWidget() is not window.fleet_view:
            print("the fleet view did not open", file=sys.stderr)
            return 1
        record("fleet lab (no data)")
        window.fleet_view.apply_snapshot(_snapshot())  # as if read from Prometheus: 2 hosts, 16 GPUs each
        record("fleet lab")
        window.sidebar.select("demo")
        record("back to demo")
    finally:
        window.shutdown()
        window.close()
        bridge.shutdown()
    print(json.dumps(views))
    return 0


if __name__ == "__main__":
    sys.exit(main())
