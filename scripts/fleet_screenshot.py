"""Render the fleet view on a real Prometheus scraping simulated dcgm-exporters, for the README.

    .venv/bin/python scripts/fleet_screenshot.py docs/screenshots [--hosts 8] [--watch 90]

Starts `--hosts` simulated exporters (4 GPUs each, every third GPU in MIG mode), Debian's
`prometheus` on loopback scraping them every second (as the tests do), lets it gather
`--watch` seconds of history so the advice column has a window to judge, and saves fleet.png.
Everything shown is SIMULATED (the view says so).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support lives beside gpuws


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--watch", type=float, default=90.0, help="seconds of history before the shot")
    parser.add_argument("--size", default="1280x820")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))

    from PySide6.QtWidgets import QApplication

    from gpuws.core.fleet.profiles import FleetProfile
    from gpuws.sim.dcgm_exporter import SimFleet, make_hosts
    from gpuws.ui.app import wait_until
    from gpuws.ui.bridge import AsyncBridge
    from gpuws.ui.fleet.view import FleetView
    from tests.support.prometheus import start_prometheus

    app = QApplication(sys.argv[:1])
    fleet = SimFleet(make_hosts(args.hosts, 4, mig_every=3)).start()
    workdir = Path(tempfile.mkdtemp(prefix="gpuws-fleet-shot-"))
    server = start_prometheus(workdir, fleet.targets)
    bridge = AsyncBridge()
    bridge.start()
    view = FleetView(bridge)
    try:
        server.wait_scraped(targets=args.hosts, series_min=args.hosts * 4)
        time.sleep(args.watch)
        view.resize(width, height)
        view.show()
        applied: list[str] = []
        view.snapshot_applied.connect(lambda: applied.append("snapshot"))
        view.history_applied.connect(lambda: applied.append("history"))
        view.advice_applied.connect(lambda: applied.append("advice"))
        view.open_profile(FleetProfile("lab", server.url, price_per_gpu_hour=3.0))
        if not wait_until(app, lambda: {"snapshot", "history", "advice"} <= set(applied), 60):
            print(f"the fleet view did not fill in time (got {applied})", file=sys.stderr)
            return 1
        # A one-hour window: Prometheus has only minutes of history, which a 24 h axis squeezes flat.
        applied.clear()
        view.window_box.setCurrentIndex(0)
        wait_until(app, lambda: {"history", "advice"} <= set(applied), 60)
        wait_until(app, lambda: False, 1.5)
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "fleet.png"
        view.grab().toImage().save(str(path), "PNG")
        print(path)
    finally:
        view.close_fleet()
        wait_until(app, lambda: False, 0.5)
        view.close()
        bridge.shutdown()
        server.stop()
        fleet.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
