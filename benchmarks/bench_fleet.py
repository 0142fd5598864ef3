"""Fleet scale: 1,024 GPUs (64 simulated hosts x 16) through a real Prometheus.

`python -m benchmarks.bench_fleet` starts `gpuws demo-fleet --hosts 64 --gpus-per-host 16` in its
own process (so the exporters do not count towards this process), Debian's `prometheus` scraping
it, and then measures, side by side in one run (medians):

1. `fleet snapshot`: one instant query per metric for the whole fleet, joined per GPU and
   encoded as the CLI's JSON (target < 1 s);
2. the fleet overview frame with 1,024 GPUs: the tiles on screen painted (target < 16 ms), and,
   apart, the work of taking in a new snapshot (ranking all 1,024 GPUs);
3. this process's RSS with the fleet view open on a 24 h window for 1,024 GPUs (target < 150 MB):
   the history stays in Prometheus, the view holds what it draws;
4. right-size advice for every GPU over 24 h (`gpuws advise FLEET`, the fleet view's Advice
   column), beside a snapshot in the same run, and the column's fill on the GUI thread. The
   Prometheus here holds minutes, so its window has fewer points per series than a full day's 360.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")

HOSTS = 64
GPUS_PER_HOST = 16
SNAPSHOTS = 15
FRAMES = 60
ADVICE_RUNS = 5
SCRAPE_S = 2  # kinder than 1 s to a shared 2-core machine; the figures do not depend on it


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(values) * 1000:.1f} ms (p95 {p95 * 1000:.1f})"


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo))
    from tests.support.prometheus import start_prometheus

    exporters = subprocess.Popen(
        [sys.executable, "-m", "gpuws", "demo-fleet", "--hosts", str(HOSTS), "--gpus-per-host", str(GPUS_PER_HOST)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(repo)})
    prom = None
    try:
        assert exporters.stdout is not None
        targets = json.loads(exporters.stdout.readline())["targets"]
        prom = start_prometheus(Path(tempfile.mkdtemp(prefix="gpuws-bench-fleet-")), targets, interval_s=SCRAPE_S)
        prom.wait_scraped(targets=HOSTS, series_min=HOSTS * GPUS_PER_HOST, timeout=180)
        time.sleep(2 * SCRAPE_S)
        _measure(prom.url)
    finally:
        if prom is not None:
            prom.stop()
        exporters.terminate()
        exporters.communicate(timeout=30)


def _measure(url: str) -> None:
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QImage, QPainter, QRegion
    from PySide6.QtWidgets import QApplication

    from gpuws.app.fleet import open_fleet
    from gpuws.core.fleet.profiles import FleetProfile
    from gpuws.remote.prometheus import FleetHistory, Snapshot
    from gpuws.ui.fleet.view import FleetView

    app = QApplication.instance() or QApplication([])
    view = FleetView(None)
    view.resize(1280, 860)
    view.show()
    app.processEvents()
    rss_start = _rss_mib()  # Python, Qt, httpx and an empty fleet view (no pyqtgraph: see ui/fleet/util_plot.py)
    profile = FleetProfile("bench", url)

    cpu: list[float] = []

    advice_times: list[float] = []
    advice_cpu: list[float] = []
    reports: list[Any] = []

    async def snapshots() -> tuple[list[float], Snapshot, FleetHistory, int]:
        from gpuws.app.advice import advise_fleet

        times: list[float] = []
        async with open_fleet(profile) as source:
            for _ in range(ADVICE_RUNS):
                start, start_cpu = time.perf_counter(), time.process_time()
                reports.append(await advise_fleet(source, window_s=86_400, host_profiles=[]))
                json.dumps(reports[-1].to_dict())
                advice_times.append(time.perf_counter() - start)
                advice_cpu.append(time.process_time() - start_cpu)
            snap = await source.snapshot()  # warm the connection pool
            for _ in range(SNAPSHOTS):
                start, start_cpu = time.perf_counter(), time.process_time()
                snap = await source.snapshot()
                json.dumps(snap.to_dict())
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            history = await source.history(86_400, 120)
        return times, snap, history, len(snap.gpus)

    snap_times, snap, history, devices = asyncio.run(snapshots())
    print(f"fleet snapshot, {devices} devices ({HOSTS * GPUS_PER_HOST} GPUs + MIG instances), one query per metric: "
          f"{_ms(snap_times)}; target < 1 s; gpuws' own CPU per snapshot {_ms(cpu)}", flush=True)

    window = reports[-1].gpus[0].advice.stats
    points = window.samples if window is not None else 0
    print(f"fleet advice, {len(reports[-1].gpus)} GPUs over 24 h ({points} points per series held): "
          f"{_ms(advice_times)}, {statistics.median(advice_times) / statistics.median(snap_times):.1f}x a snapshot; "
          f"gpuws' own CPU {_ms(advice_cpu)}", flush=True)
    fills: list[float] = []
    for _ in range(5):
        start = time.perf_counter()
        view.apply_advice(reports[-1])
        fills.append(time.perf_counter() - start)
    print(f"the Advice column's fill on the GUI thread, {view.advice_table.rowCount()} rows: {_ms(fills)}", flush=True)

    ingest: list[float] = []
    for _ in range(10):
        start = time.perf_counter()
        view.apply_snapshot(snap)
        ingest.append(time.perf_counter() - start)
    view.apply_history(history)
    app.processEvents()
    grid = view.grid
    viewport = view.scroll_area.viewport().size()
    image = QImage(viewport, QImage.Format.Format_ARGB32_Premultiplied)  # what a screen would hold
    frames: list[float] = []
    bar = view.scroll_area.verticalScrollBar()
    for i in range(FRAMES):
        bar.setValue(bar.maximum() * (i % 10) // 9)  # anywhere in the list: the same work
        app.processEvents()
        visible = grid.visibleRegion().boundingRect()
        painter = QPainter(image)
        start = time.perf_counter()
        grid.render(painter, QPoint(0, 0), QRegion(visible))
        frames.append(time.perf_counter() - start)
        painter.end()
    print(f"fleet overview frame, {len(grid.tiles())} tiles, {grid.painted_last_frame} on screen painted: "
          f"{_ms(frames)}; target < 16 ms", flush=True)
    print(f"taking in a new snapshot (rank {len(grid.tiles())} GPUs, summary, alerts, tiles): {_ms(ingest)}",
          flush=True)
    rss = _rss_mib()
    print(f"app RSS with the fleet view open on a 24 h window for {devices} devices: {rss:.0f} MiB "
          f"(the window with no fleet: {rss_start:.0f} MiB; the view's history arrays "
          f"{history.nbytes / 2**20:.2f} MiB, step {history.step:.0f} s); target < 150 MB", flush=True)
    load = os.getloadavg()
    print(f"(machine load average during the run: {load[0]:.1f} on {os.cpu_count()} cores)", flush=True)
    view.close()


if __name__ == "__main__":
    main()
