"""GUI-thread responsiveness while many hosts stream telemetry into the real window.

    QT_QPA_PLATFORM=offscreen python -m benchmarks.bench_gui_responsiveness [--hosts 50] [--hz 1] [--seconds 30]

Checks the promise "never block the GUI thread; the UI stays responsive while 50 hosts stream".
The real `MainWindow` (real `AsyncBridge`, `HostSession`s, `TelemetryHub`, Telemetry tab) talks
SSH to N in-process simulated hosts (`gpuws.sim.server.DemoHost`, one H100 each, own state dir),
which run on a loop thread of their own, never on the GUI thread. Each connected host streams
through its on-host agent (a python subprocess with the fake NVML), as `gpuws --demo` does.

A 10 ms PreciseTimer on the GUI thread records every gap between its ticks; lateness is the gap
minus 10 ms, and the longest gap is the longest single GUI-thread stall. Phases, one run:

1. baseline: the window with no hosts (its empty state), nothing streaming
2. connect: N hosts connecting and being probed, until every one has streamed a sample
3. host view: N hosts streaming, the Telemetry tab showing the first host
4. overview: N hosts streaming, the Telemetry tab's "All hosts" small multiples

Per phase: median, p99 and max lateness, the longest stall, stalls over 50 ms, the CPU of the GUI
thread (measured on it, so a stall that burnt CPU tells from one that waited for the GIL or for
a busy machine), of the whole process and of the machine (the hosts' agents are other
processes), and the samples/s that reached `hub.store`. While the GUI thread is stalled a
watchdog thread samples its Python stack (`sys._current_frames()`), so any stall is printed with
the code path it was in. A stack that ends in the event loop (`QEventLoop.exec`) means Qt's own
C++ work (layout, paint) or a wait for the GIL, not Python code of ours.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

TICK_MS = 10
STALL_MS = 50.0  # a stall people notice as a hitch; its stack is sampled
WATCHDOG_PERIOD_S = 0.002
CONNECT_TIMEOUT_S = 120.0
REPO = Path(__file__).resolve().parents[1]


# --- the GUI-thread probe and the stall watchdog -------------------------------------------------


@dataclasses.dataclass
class Stall:
    """One gap between probe ticks longer than STALL_MS."""

    gap_ms: float
    cpu_ms: float  # GUI-thread CPU time during the gap
    runq_ms: float  # time the GUI thread was runnable but waited for a core (starved)
    stacks: list[tuple[str, ...]]  # the GUI thread's stack, sampled by the watchdog


@dataclasses.dataclass
class PhaseTicks:
    gaps_s: list[float] = dataclasses.field(default_factory=list)
    stalls: list[Stall] = dataclasses.field(default_factory=list)
    gui_cpu_s: float = 0.0
    gui_runq_s: float = 0.0


class TickProbe:
    """A 10 ms timer on the GUI thread recording the gap between its ticks (only inside a phase)."""

    def __init__(self) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._tick)
        # The GUI thread's scheduler statistics: time spent waiting on a run queue tells a thread
        # starved by a busy machine from one blocked on a lock (the GIL) or on I/O.
        self._schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        self.last_tick = time.perf_counter()  # read by the watchdog thread
        self._last_cpu = time.thread_time()
        self._last_runq = self._runq()
        self.phase: PhaseTicks | None = None
        self.stall_samples: list[tuple[str, ...]] = []  # appended by the watchdog while stalled
        self.timer.start()

    def begin(self) -> None:
        self.phase = PhaseTicks()
        self._restart()

    def end(self) -> PhaseTicks:
        phase, self.phase = self.phase, None
        assert phase is not None
        return phase

    def close(self) -> None:
        self.timer.stop()
        os.close(self._schedstat)

    def _runq(self) -> float:
        return int(os.pread(self._schedstat, 100, 0).split()[1]) / 1e9

    def _restart(self) -> None:
        self.last_tick, self._last_cpu, self._last_runq = time.perf_counter(), time.thread_time(), self._runq()
        self.stall_samples = []

    def _tick(self) -> None:
        now, cpu, runq = time.perf_counter(), time.thread_time(), self._runq()
        gap, cpu_used, waited = now - self.last_tick, cpu - self._last_cpu, runq - self._last_runq
        samples, self.stall_samples = self.stall_samples, []  # one atomic swap under the GIL
        self.last_tick, self._last_cpu, self._last_runq = now, cpu, runq
        phase = self.phase
        if phase is None:
            return
        phase.gaps_s.append(gap)
        phase.gui_cpu_s += cpu_used
        phase.gui_runq_s += waited
        if gap * 1000 > STALL_MS:
            phase.stalls.append(Stall(gap * 1000, cpu_used * 1000, waited * 1000, samples))


class StallWatchdog(threading.Thread):
    """Samples the GUI thread's Python stack whenever the probe has not ticked for STALL_MS."""

    def __init__(self, probe: TickProbe) -> None:
        super().__init__(name="bench-stall-watchdog", daemon=True)
        self.probe = probe
        self.main_id = threading.main_thread().ident
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(WATCHDOG_PERIOD_S):
            probe = self.probe
            if probe.phase is None or (time.perf_counter() - probe.last_tick) * 1000 <= STALL_MS:
                continue
            frame = sys._current_frames().get(self.main_id)
            if frame is not None:
                stack = _stack_of(frame)
                # Let go at once: a frame object held here keeps the GUI thread's locals alive
                # past their function's end (a QPainter then outlives its paintEvent).
                del frame
                probe.stall_samples.append(stack)


def _stack_of(frame: FrameType) -> tuple[str, ...]:
    """The innermost frames, outermost first, as 'path:line function'."""
    raw = []
    current: FrameType | None = frame
    while current is not None and len(raw) < 24:  # no linecache reads: this runs mid-stall
        raw.append((current.f_code.co_filename, current.f_lineno, current.f_code.co_name))
        current = current.f_back
    lines = [f"{_short(path)}:{line} {name}" for path, line, name in reversed(raw)]
    # Drop the harness's own outer frames (runpy, this module's phase loop): the event loop is
    # the root of everything the GUI thread does.
    while len(lines) > 1 and lines[0].startswith(("<frozen", "benchmarks/")):
        lines.pop(0)
    return tuple(lines[-14:])


def _short(filename: str) -> str:
    for marker in (str(REPO) + os.sep, "site-packages" + os.sep):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


# --- CPU accounting from /proc --------------------------------------------------------------------


@dataclasses.dataclass
class CpuSnapshot:
    at: float
    process_ticks: int
    thread_ticks: dict[int, int]
    machine_busy: int
    machine_total: int


def _ticks_of(stat_path: str) -> int:
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15 of stat)


def cpu_snapshot() -> CpuSnapshot:
    threads = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            threads[int(tid)] = _ticks_of(f"/proc/self/task/{tid}/stat")
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return CpuSnapshot(time.monotonic(), _ticks_of("/proc/self/stat"), threads, sum(values) - idle, sum(values))


@dataclasses.dataclass
class CpuUse:
    """Percent of one core over a phase (machine: percent of all cores)."""

    process_pct: float
    machine_pct: float
    threads_pct: dict[str, float]


def cpu_use(before: CpuSnapshot, after: CpuSnapshot) -> CpuUse:
    hz = os.sysconf("SC_CLK_TCK")
    seconds = max(after.at - before.at, 1e-9)
    names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    names[threading.main_thread().native_id or 0] = "GUI"
    threads: collections.Counter[str] = collections.Counter()
    for tid, ticks in after.thread_ticks.items():
        name = names.get(tid, "other")
        if name.startswith(("ThreadPoolExecutor", "asyncio_")):
            name = "executors"
        threads[name] += (ticks - before.thread_ticks.get(tid, 0)) / hz / seconds * 100
    total = after.machine_total - before.machine_total
    machine = 100.0 * (after.machine_busy - before.machine_busy) / total if total else 0.0
    process = (after.process_ticks - before.process_ticks) / hz / seconds * 100
    return CpuUse(process, machine, dict(threads.most_common()))


# --- samples reaching the store ------------------------------------------------------------------


class IngestCounter:
    """Counts the samples `store.ingest` receives (wraps the instance's method; loop thread)."""

    def __init__(self, store: Any) -> None:
        self.samples = 0
        self.batches: collections.Counter[str] = collections.Counter()
        original = store.ingest

        def ingest(host: str, batch: Any) -> None:
            original(host, batch)
            self.samples += len(batch.samples)
            self.batches[host] += 1

        store.ingest = ingest


# --- the simulated hosts -------------------------------------------------------------------------


async def start_hosts(count: int, root: Path) -> list[Any]:
    from gpuws.sim.server import DemoHost

    hosts = [DemoHost(gpus="h100", state_dir=root / f"host{i:02d}") for i in range(count)]
    await asyncio.gather(*(host.start() for host in hosts))
    return hosts


def nice_host_commands(hosts: list[Any], niceness: int) -> None:
    """Run the hosts' heavy commands (`nvidia-smi` emulator, agent python) under `nice`.

    A diagnostic: on a real deployment those run on other machines, here they compete with the
    GUI thread for the same cores. Rewrites the wrappers the demo host installed in its own state
    dir (`<state_dir>/bin`); gpuws.sim itself is untouched.
    """
    for host in hosts:
        for name in ("nvidia-smi", "python3"):
            wrapper = host.state_dir / "bin" / name
            text = wrapper.read_text()
            if 'exec "' not in text:
                raise SystemExit(f"--nice-hosts: unexpected wrapper {wrapper}")
            # Each command runs in a session of its own (setsid), so with autogroup scheduling
            # (Linux's default) it is a peer of this whole process whatever its own nice value:
            # the session's autogroup is niced too.
            renice = f"echo {niceness} > /proc/self/autogroup 2>/dev/null\n"
            wrapper.write_text(text.replace('exec "', f'{renice}exec nice -n {niceness} "', 1))


async def stop_hosts(hosts: list[Any]) -> None:
    await asyncio.gather(*(host.stop() for host in hosts), return_exceptions=True)


# --- the run -------------------------------------------------------------------------------------


@dataclasses.dataclass
class PhaseResult:
    name: str
    ticks: PhaseTicks
    cpu: CpuUse
    seconds: float
    samples: int
    hosts_streaming: int


def spin(app: Any, seconds: float, until: Any = None) -> bool:
    """Run the Qt event loop (no polling sleeps of our own) for `seconds` or until `until()` holds."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(round(seconds * 1000), loop.quit)
    check = None
    if until is not None:
        check = QTimer()
        check.setInterval(100)
        check.timeout.connect(lambda: loop.quit() if until() else None)
        check.start()
    loop.exec()
    if check is not None:
        check.stop()
    return until() if until is not None else True


def measure(name: str, app: Any, probe: TickProbe, counter: IngestCounter, seconds: float,
            until: Any = None) -> PhaseResult:
    samples, before_batches = counter.samples, collections.Counter(counter.batches)
    cpu_before, start = cpu_snapshot(), time.monotonic()
    probe.begin()
    spin(app, seconds, until)
    ticks = probe.end()
    cpu = cpu_use(cpu_before, cpu_snapshot())
    streaming = sum(1 for host, n in counter.batches.items() if n > before_batches.get(host, 0))
    return PhaseResult(name, ticks, cpu, time.monotonic() - start, counter.samples - samples, streaming)


def run(hosts_wanted: int, hz: float, seconds: float, root: Path, niceness: int) -> list[PhaseResult]:
    from PySide6.QtWidgets import QApplication

    from gpuws.remote.loop import LoopThread
    from gpuws.sim.server import demo_profile
    from gpuws.ui.bridge import AsyncBridge
    from gpuws.ui.main_window import MainWindow
    from gpuws.ui.session_controller import HostSession
    from gpuws.ui.tabs.telemetry import PAGE_HOST, PAGE_OVERVIEW, TelemetryTab

    app = QApplication.instance() or QApplication(sys.argv[:1])
    bridge = AsyncBridge()
    bridge.start()
    host_loop = LoopThread(name="sim-hosts")  # the hosts stand in for remote machines: not our loop
    host_loop.start()
    window = MainWindow(bridge)
    window.resize(1280, 820)
    hosts: list[Any] = []
    probe = TickProbe()
    watchdog = StallWatchdog(probe)
    watchdog.start()
    results: list[PhaseResult] = []
    try:
        window.show()
        spin(app, 10.0, lambda: not window._first_load)  # the (empty) profile list has loaded
        hub = window.telemetry
        hub.service.hz = hz
        counter = IngestCounter(hub.store)
        spin(app, 1.0)  # first paint, font caches
        results.append(measure("baseline (no hosts)", app, probe, counter, max(5.0, seconds / 3)))

        started = time.monotonic()
        hosts = host_loop.submit(start_hosts(hosts_wanted, root)).result(timeout=120)
        print(f"  started {len(hosts)} simulated hosts in {time.monotonic() - started:.1f} s", flush=True)
        if niceness:
            nice_host_commands(hosts, niceness)
        sessions, profiles = [], []
        for i, host in enumerate(hosts):
            info = host.info
            profile = dataclasses.replace(demo_profile(info), name=f"sim-{i:02d}")
            key = " ".join(info.known_hosts_line.split()[1:3])
            session = HostSession(profile, bridge, password=info.password, known_host_key=key, parent=window)
            window._add_session(session)
            sessions.append(session)
            profiles.append(profile)
        window.profiles = profiles  # listed as saved hosts are, so _sync_sessions keeps them
        window._sync_sessions()
        window.sidebar.select(profiles[0].name)
        telemetry = next(w for w in window.detail.tab_widgets if isinstance(w, TelemetryTab))
        window.detail.tabs.setCurrentWidget(telemetry)
        telemetry.show_page(PAGE_HOST)
        for session in sessions:
            session.connect_host()

        def all_streaming() -> bool:
            return len(counter.batches) >= len(hosts)

        connect = measure("connect + probe", app, probe, counter, CONNECT_TIMEOUT_S, all_streaming)
        results.append(connect)
        states = collections.Counter(s.state for s in sessions)
        print(f"  connect: {connect.seconds:.1f} s, states {dict(states)}, "
              f"{len(counter.batches)}/{len(hosts)} hosts streamed", flush=True)
        spin(app, 2.0)  # let the last streams settle before the steady phases
        results.append(measure(f"host view ({len(hosts)} streaming)", app, probe, counter, seconds / 2))
        telemetry.show_page(PAGE_OVERVIEW)
        results.append(measure(f"overview ({len(hosts)} streaming)", app, probe, counter, seconds / 2))
    finally:
        watchdog.stopping.set()
        probe.close()
        window.shutdown()
        if hosts:
            try:
                host_loop.submit(stop_hosts(hosts)).result(timeout=30)
            except Exception as exc:  # report, but still close everything else
                print(f"  stopping the hosts failed: {exc!r}", file=sys.stderr)
        host_loop.stop()
        window.close()
        window.deleteLater()
        bridge.shutdown()
        app.processEvents()
        watchdog.join(1.0)
    return results


# --- the report ----------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def report(results: list[PhaseResult], hz: float) -> None:
    print(f"\nGUI-thread lateness of a {TICK_MS} ms timer (ms), stalls > {STALL_MS:.0f} ms; "
          f"CPU in % of one core (machine: % of all {os.cpu_count()} cores)")
    header = (f"{'phase':<26}{'s':>5}{'ticks':>7}{'median':>8}{'p99':>8}{'max':>8}{'stall':>8}"
              f"{'>50ms':>6}{'GUI cpu':>8}{'starved':>8}{'proc':>7}{'machine':>8}{'samples/s':>10}{'hosts':>6}")
    print(header)
    for r in results:
        late = [max(0.0, g * 1000 - TICK_MS) for g in r.ticks.gaps_s] or [0.0]
        longest = max(r.ticks.gaps_s, default=0.0) * 1000
        gui = r.ticks.gui_cpu_s / max(r.seconds, 1e-9) * 100
        starved = r.ticks.gui_runq_s / max(r.seconds, 1e-9) * 100
        print(f"{r.name:<26}{r.seconds:>5.0f}{len(r.ticks.gaps_s):>7}{statistics.median(late):>8.2f}"
              f"{_pct(late, 0.99):>8.1f}{max(late):>8.1f}{longest:>8.1f}{len(r.ticks.stalls):>6}"
              f"{gui:>8.1f}{starved:>8.1f}{r.cpu.process_pct:>7.0f}{r.cpu.machine_pct:>8.0f}"
              f"{r.samples / max(r.seconds, 1e-9):>10.1f}{r.hosts_streaming:>6}")
    print(f"(starved: % of the time the GUI thread was runnable but waited for a core; "
          f"expected samples/s while streaming: hosts x {hz:g} Hz x 1 GPU)")
    print("\nprocess CPU by thread (% of one core):")
    for r in results:
        parts = ", ".join(f"{name} {pct:.0f}" for name, pct in r.cpu.threads_pct.items() if pct >= 0.5)
        print(f"  {r.name:<26}{parts}")
    stalls = [(r.name, s) for r in results for s in r.ticks.stalls]
    if not stalls:
        print(f"\nno GUI-thread stall over {STALL_MS:.0f} ms")
        return
    print("\nlongest stalls: the gap = GUI thread running (cpu) + waiting for a core (starved) + "
          "blocked (the GIL, I/O, a lock)")
    for name, stall in sorted(stalls, key=lambda x: -x[1].gap_ms)[:8]:
        top = collections.Counter(s[-1] for s in stall.stacks).most_common(1)
        where = top[0][0] if top else "(no sample)"
        blocked = max(0.0, stall.gap_ms - stall.cpu_ms - stall.runq_ms)
        print(f"  {stall.gap_ms:6.0f} ms: cpu {stall.cpu_ms:4.0f}, starved {stall.runq_ms:4.0f}, "
              f"blocked {blocked:4.0f}  [{name}]  at {where}")
    stacks = collections.Counter(stack for _name, s in stalls for stack in s.stacks)
    total = sum(stacks.values())
    print(f"\nGUI-thread stacks sampled during stalls ({total} samples every "
          f"{WATCHDOG_PERIOD_S * 1000:.0f} ms), most frequent first:")
    for stack, n in stacks.most_common(4):
        print(f"  {n} samples ({100 * n / total:.0f}%):")
        for line in stack:
            print(f"      {line}")


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50, help="simulated hosts streaming (default 50)")
    parser.add_argument("--hz", type=float, default=1.0, help="telemetry rate per host (default 1)")
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="streaming measured, half host view, half overview (default 30)")
    parser.add_argument("--nice-hosts", type=int, default=0, metavar="N",
                        help="diagnostic: run the hosts' commands at niceness N (they stand in for "
                             "remote machines but share this machine's cores)")
    args = parser.parse_args(argv if argv is not None else [])  # `python -m benchmarks`: defaults
    if args.hosts < 1 or args.hz <= 0 or args.seconds <= 0:
        parser.error("--hosts, --hz and --seconds must be positive")
    niced = f", host commands at nice {args.nice_hosts}" if args.nice_hosts else ""
    print(f"{args.hosts} simulated hosts x 1 H100 at {args.hz:g} Hz, {args.seconds:g} s streaming{niced}; "
          f"{os.cpu_count()} CPUs, load average {_loadavg()}", flush=True)
    saved_config = os.environ.get("GPUWS_CONFIG_DIR")
    with tempfile.TemporaryDirectory(prefix="gpuws-bench-gui-") as tmp:
        os.environ["GPUWS_CONFIG_DIR"] = str(Path(tmp) / "config")  # no user profiles or settings
        try:
            results = run(args.hosts, args.hz, args.seconds, Path(tmp) / "hosts", args.nice_hosts)
        finally:
            if saved_config is None:
                os.environ.pop("GPUWS_CONFIG_DIR", None)
            else:
                os.environ["GPUWS_CONFIG_DIR"] = saved_config
    report(results, args.hz)
    print(f"\nload average after: {_loadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
