"""Dashboard frame cost: `python -m benchmarks.bench_dashboard` prints medians and p95.

A frame is what the Telemetry tab does on each tick of its frame clock when there is new data:
read the store (newest samples and the window's history for every device), hand the arrays to
the widgets, and paint. Measured offscreen (QT_QPA_PLATFORM=offscreen) on a 1100x820 view.

1. host view: 64 GPU cards (7 sparklines each) of one host, 1 h window: the cards on screen read,
   updated and painted (target: whole frame < 10 ms); then all 64 cards read and updated
2. host view while streaming: before each (untimed) frame one new 1 Hz sample per GPU is
   ingested and the window moves on by 1 s, so every series and every pixel position changed.
   At 10 fps with 1 Hz data this is the frame actually paid for: frames without new samples do
   not read the store at all (see TelemetryTab)
3. overview: 64 GPUs on 16 hosts as small multiples, 1 h window, the tiles on screen read and
   painted
4. flat cost per GPU: the host view frame with 64, 256 and 1,024 GPUs (the same cards on screen;
   the grid is virtual, so card widgets exist only for the rows on screen), as ratios to the
   64-GPU frame (target: within 10 %)

Wall-clock medians are the figures; CPU time of the GUI thread is printed beside them, which
tells a slow frame from a frame that waited for a busy machine.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The setting the GUI is meant to run with (to be set before the QApplication in gpuws/ui/app.py;
# until then the app pays the pool's hand-offs, ~1-2 ms a frame here): without it Qt's raster engine
# hands every fill of 96 spans or more (a long 1 px polyline, a card's rounded rect) to a GUI
# thread pool of idealThreadCount() / 4 threads (one, on 2 cores) and waits for it.
os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from gpuws.core.telemetry.sample import GpuSample, SampleBatch
from gpuws.core.telemetry.store import TelemetryStore

GPUS = 64
WINDOW_S = 3600.0
ROUNDS = 60


def sample(t: float, gpu: int) -> GpuSample:
    wave = 0.5 + 0.5 * math.sin(t / 30.0 + gpu)
    return GpuSample(
        t=t, gpu=gpu, util_gpu_pct=100 * wave, util_mem_pct=60 * wave, mem_used_mib=8000 + 70000 * wave,
        mem_total_mib=81559.0, temp_c=40 + 40 * wave, power_w=100 + 600 * wave, power_limit_w=700.0,
        sm_clock_mhz=1980.0, sm_clock_max_mhz=1980.0, mem_clock_mhz=2619.0, mem_clock_max_mhz=2619.0,
        pcie_rx_kib_s=1e6 * wave, pcie_tx_kib_s=3e5 * wave, pstate="P0", throttle_reasons=[], idle=False,
        ecc_errors_corrected=0, ecc_errors_uncorrected=0, enc_util_pct=0.0, dec_util_pct=0.0, processes=[],
    )


def filled_store(hosts: int, gpus_per_host: int, now: float) -> TelemetryStore:
    store = TelemetryStore()
    for h in range(hosts):
        store.set_rate(f"host-{h:02d}", 1.0)
    for s in range(int(WINDOW_S)):
        t = now - WINDOW_S + s
        for h in range(hosts):
            batch = [sample(t, g) for g in range(gpus_per_host)]
            store.ingest(f"host-{h:02d}", SampleBatch(t, batch, "nvml"))
    return store


def wavy_store(gpus: int, now: float) -> TelemetryStore:
    """1 h of 1 Hz history for `gpus` GPUs of one host, filled quickly (rows computed per second)."""
    import numpy as np

    from gpuws.core.telemetry.store import METRICS, _row_of

    store = TelemetryStore()
    store.set_rate("host-00", 1.0)
    samples = [sample(now, g) for g in range(gpus)]
    base = np.array([_row_of(x) for x in samples], dtype=np.float32)
    phase = np.arange(gpus, dtype=np.float32)[:, None]
    scale = np.ones(len(METRICS), dtype=np.float32)
    for s in range(int(WINDOW_S)):
        t = now - WINDOW_S + s
        for x in samples:
            x.t = t
        wave = 0.5 + 0.5 * np.sin(t / 30.0 + phase) * scale
        store.ingest_samples("host-00", samples, source="nvml", rows=(base * wave).astype(np.float32))
    return store


def frame_median(frame: Callable[[], None]) -> float:
    for _ in range(5):
        frame()
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        frame()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(frame: Callable[[], None], before: Callable[[], None] | None = None) -> str:
    """Median and p95 wall time of `frame` (after an untimed `before`), with the median CPU time."""
    for _ in range(5):
        if before:
            before()
        frame()  # warm up: first layout, font caches
    times, cpu = [], []
    for _ in range(ROUNDS):
        if before:
            before()
        start, start_cpu = time.perf_counter(), time.thread_time()
        frame()
        times.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
    times.sort()
    med, p95 = statistics.median(times), times[int(len(times) * 0.95) - 1]
    return f"median {med * 1e3:.2f} ms, p95 {p95 * 1e3:.2f} ms (CPU median {statistics.median(cpu) * 1e3:.2f} ms)"


def main() -> None:
    app = QApplication.instance() or QApplication([])
    from gpuws.ui.telemetry.host_cards import HostCards
    from gpuws.ui.telemetry.overview_grid import OverviewGrid

    now = time.time()
    print(f"QT_NO_GUI_THREADPOOL={os.environ.get('QT_NO_GUI_THREADPOOL')!r}")
    print(f"filling stores with 1 h of 1 Hz history for {GPUS} GPUs ...", flush=True)
    one_host = filled_store(1, GPUS, now)
    many_hosts = filled_store(16, GPUS // 16, now)
    image = QImage(1100, 820, QImage.Format.Format_ARGB32_Premultiplied)

    cards = HostCards()
    cards.resize(1100, 820)
    cards.show()
    cards.refresh(one_host, "host-00", now - WINDOW_S, now)
    for _ in range(5):  # let the layout settle: which cards are on screen depends on it
        app.processEvents()

    def host_frame() -> None:
        cards.refresh(one_host, "host-00", now - WINDOW_S, now)
        cards.render(image)

    def host_frame_all() -> None:
        cards.refresh(one_host, "host-00", now - WINDOW_S, now, force_all=True)
        cards.render(image)

    def store_only() -> None:
        for key in one_host.device_keys("host-00"):
            one_host.window("host-00", key, now - WINDOW_S, now)
        one_host.latest("host-00")

    print(f"host view, store reads only ({GPUS} devices, 1 h): {measure(store_only)}")
    figures = measure(host_frame)
    visible = sum(not c.visibleRegion().isEmpty() for c in cards.cards.values())
    print(f"host view frame ({GPUS} cards, the {visible} on screen read, updated and painted, 1 h): "
          f"{figures} (target < 10 ms)")
    print(f"host view frame, every card widget read and updated (the margin rows' too), visible painted: "
          f"{measure(host_frame_all)}")

    # Streaming: a new sample per GPU before every frame, the window following it.
    clock = [now]
    streaming = TelemetryStore()
    streaming.set_rate("host-00", 1.0)
    for s in range(int(WINDOW_S)):
        t = now - WINDOW_S + s
        streaming.ingest("host-00", SampleBatch(t, [sample(t, g) for g in range(GPUS)], "nvml"))

    def new_samples() -> None:
        clock[0] += 1.0
        t = clock[0]
        streaming.ingest("host-00", SampleBatch(t, [sample(t, g) for g in range(GPUS)], "nvml"))

    def streaming_frame() -> None:
        cards.refresh(streaming, "host-00", clock[0] - WINDOW_S, clock[0])
        cards.render(image)

    print(f"host view frame with a new sample for every GPU (10 fps display, 1 Hz data: the frame that "
          f"redraws): {measure(streaming_frame, new_samples)}")

    overview = OverviewGrid()
    overview.resize(1100, 820)
    overview.show()
    app.processEvents()
    canvas = overview.canvas
    canvas.refresh(many_hosts, now - WINDOW_S, now, alerted=set())
    app.processEvents()

    def overview_frame() -> None:
        canvas._seen.clear()  # every host counts as having new samples: all tiles on screen are read
        canvas.refresh(many_hosts, now - WINDOW_S, now, alerted=set())
        overview.render(image)

    figures = measure(overview_frame)
    on_screen = sum(canvas.tile_rect(i).top() < overview.viewport().height() for i in range(len(canvas.tiles)))
    print(f"overview frame ({GPUS} GPUs on 16 hosts, all with new samples: the {on_screen} tiles on screen read "
          f"and painted, 1 h): {figures} (target < 10 ms)")
    cards.close()
    overview.close()
    cards.deleteLater()
    overview.deleteLater()
    app.processEvents()
    flat_cost_per_gpu(app, now, image)


def flat_cost_per_gpu(app: QApplication, now: float, image: QImage) -> None:
    """The host frame at 64, 256 and 1,024 GPUs, measured interleaved (one frame of each size per
    round), so that drift in the machine's load falls on every size alike."""
    from gpuws.ui.telemetry.gpu_card import GpuCard
    from gpuws.ui.telemetry.host_cards import HostCards

    sizes = (64, 256, 1024)
    frames: dict[int, Callable[[], None]] = {}
    views: list[HostCards] = []
    on_screen: dict[int, int] = {}
    card_widgets: dict[int, int] = {}
    for gpus in sizes:
        store = wavy_store(gpus, now)
        cards = HostCards()
        cards.resize(1100, 820)
        cards.show()
        cards.refresh(store, "host-00", now - WINDOW_S, now)
        for _ in range(5):
            app.processEvents()

        def frame(cards: HostCards = cards, store: TelemetryStore = store) -> None:
            cards.refresh(store, "host-00", now - WINDOW_S, now)
            cards.render(image)

        frames[gpus] = frame
        views.append(cards)
        on_screen[gpus] = len(cards._on_screen())
        card_widgets[gpus] = len(cards.viewport().findChildren(GpuCard))
    times: dict[int, list[float]] = {gpus: [] for gpus in sizes}
    for round_ in range(5 + 2 * ROUNDS):
        for gpus in sizes:
            start = time.perf_counter()
            frames[gpus]()
            if round_ >= 5:  # the first rounds warm up
                times[gpus].append(time.perf_counter() - start)
    medians = {gpus: statistics.median(t) for gpus, t in times.items()}
    for cards in views:
        cards.close()
        cards.deleteLater()
    app.processEvents()
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    base = medians[64]
    print("flat cost per GPU, host view frame (cards on screen read, updated, painted; 1 h; interleaved): " + ", ".join(
        f"{g} GPUs {m * 1e3:.2f} ms ({m / base:.2f}x, {on_screen[g]} cards on screen)" for g, m in medians.items())
        + f" (target <= 1.10x; load {load})")
    widgets = ", ".join(f"{g} GPUs {n}" for g, n in card_widgets.items())
    print(f"  card widgets in existence (virtual grid: the rows on screen and a margin row): {widgets}")


if __name__ == "__main__":
    main()
