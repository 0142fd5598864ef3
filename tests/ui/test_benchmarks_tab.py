"""The Benchmarks tab under pytest-qt, driven against the real runner on this machine.

`LocalRunner` runs the same `sh` wrapper and runner zip (gpuws_bench.pyz) the host would get; with
GPUWS_SIMULATED=1 and the emulated `nvidia-smi` first on PATH that is the simulated GPU host
(H100, A100, L40S and a vGPU guest), without them it is a CPU-only host (the CPU harness check).
Screenshots go to each test's own tmp_path (benchmarks-*.png) for a person to look at.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from gpuws.core.bench.results import BenchRun, ResultStore
from gpuws.core.bench.verdicts import CPU_LABEL, Verdict
from gpuws.core.models import HostProfile
from gpuws.core.runner import LocalRunner
from gpuws.ui import theme
from gpuws.ui.bench.datasheet_chart import chart_bars
from gpuws.ui.bench.export import ExportError
from gpuws.ui.bench.history import HostHistory, comparison_baselines
from gpuws.ui.bench.results_table import Column
from gpuws.ui.bench.run_panel import describe_event
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.tabs import HostContext
from gpuws.ui.tabs.benchmarks import PAGE_LOG, PAGE_RESULTS, BenchmarksTab
from tests.support.sshd import install_sim_nvidia_smi

pytestmark = pytest.mark.gui


class FakeConnection:
    def __init__(self, runner: LocalRunner) -> None:
        self.runner = runner


class FakeSession(QObject):
    """The part of HostSession the tab uses: profile, state and its signal, the connection."""

    state_changed = Signal(str, str)

    def __init__(self, profile: HostProfile, connection: FakeConnection | None) -> None:
        super().__init__()
        self.profile = profile
        self.connection = connection
        self.state = "connected" if connection is not None else "disconnected"


def host_runner(root: Path, *, simulated: bool, **env: str) -> LocalRunner:
    """This machine as a host: the simulated GPU host, or a CPU-only one. TMPDIR is `root`."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(sys.executable)
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "TMPDIR": str(root), "HOME": str(root)}
    if simulated:
        install_sim_nvidia_smi(bin_dir)
        state = root / "simstate"
        state.mkdir()
        base |= {"GPUWS_SIMULATED": "1", "GPUWS_SIM_STATE": str(state)}
    return LocalRunner({**base, **env})


def make_tab(qtbot: Any, bridge: AsyncBridge, store: ResultStore, name: str = "demo",
             runner: LocalRunner | None = None, *, simulated: bool = True) -> tuple[BenchmarksTab, FakeSession]:
    tab = BenchmarksTab(store=store)
    qtbot.addWidget(tab)
    tab.resize(1000, 760)
    profile = HostProfile(name=name, host="127.0.0.1", simulated=simulated)
    session = FakeSession(profile, FakeConnection(runner) if runner is not None else None)
    tab.set_host(HostContext(profile, session, bridge))  # type: ignore[arg-type]
    return tab, session


def wait_idle(qtbot: Any, tab: BenchmarksTab, timeout: int = 60000) -> None:
    qtbot.waitUntil(lambda: not tab.running, timeout=timeout)


def row(tab: BenchmarksTab, check: str, gpu: int | None) -> int:
    index = tab.table.results_model.row_of(check, gpu)
    assert index >= 0, f"no row for {check} on GPU {gpu}"
    return index


def save_shot(tab: BenchmarksTab, folder: Path, name: str) -> None:
    """Save the tab for a person to look at, in the test's own tmp_path (pytest keeps the last runs)."""
    tab.show()
    QApplication.processEvents()
    assert tab.grab().toImage().save(str(folder / name))


def leftovers(root: Path) -> tuple[list[str], list[str]]:
    """Processes still running from `root` and benchmark directories left in it."""
    out = subprocess.run(["pgrep", "-af", str(root)], capture_output=True, text=True).stdout
    procs = [line for line in out.splitlines() if "pgrep" not in line]
    return procs, sorted(p.name for p in root.glob("gpuws-bench.*"))


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real simulated quick run (GPU 0 plays a degraded card), as stored: for the data-only tests."""
    from gpuws.remote.bench import run_benchmark

    root = tmp_path_factory.mktemp("recorded")
    runner = host_runner(root, simulated=True, GPUWS_SIM_BENCH_DEGRADED="0")
    run = asyncio.run(run_benchmark(runner, "quick", host="demo", timeout=60))
    assert run.error is None and run.simulated
    return run.to_dict()


def copy_run(data: dict[str, Any], host: str, started_at: str, scale: float = 1.0) -> BenchRun:
    """`data` as a run of `host` at `started_at`, every figure multiplied by `scale`."""
    run = BenchRun.from_dict(json.loads(json.dumps(data)))
    run.host, run.started_at = host, started_at
    for r in run.results:
        if isinstance(r.get("value"), (int, float)) and r.get("check") != "stress":
            r["value"] = r["value"] * scale
    return run


# -- a full simulated run, driven through the tab ---------------------------------------------


def test_simulated_run_shows_progress_table_chart_and_labels(qtbot: Any, bridge: AsyncBridge,
                                                             tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "store")
    runner = host_runner(tmp_path / "host", simulated=True, GPUWS_SIM_BENCH_DEGRADED="0")
    tab, _ = make_tab(qtbot, bridge, store, runner=runner)
    qtbot.waitUntil(lambda: tab.history is not None, timeout=5000)  # empty history loaded
    assert tab.run_panel.start_button.isEnabled()
    assert "No benchmark has been run" in tab.run_summary.text()

    steps: list[int] = []
    tab.run_panel.progress.valueChanged.connect(steps.append)
    tab.start("quick")
    assert tab.running and tab.body.currentIndex() == PAGE_LOG
    assert not tab.run_panel.start_button.isEnabled() and tab.run_panel.cancel_button.isEnabled()
    wait_idle(qtbot, tab)

    # Progress moved through the runner's steps and finished full; the log saw them arrive.
    assert tab.run_panel.progress.maximum() == 1 and tab.run_panel.progress.value() == 1
    assert len(set(steps)) >= 3, steps
    log = tab.live_log.toPlainText()
    assert "[1/8] environment" in log and "[3/8] simulated measurements" in log
    assert "GEMM BF16 (GPU 0):" in log and "SIMULATED GPU host" in log
    assert tab.run_panel.status_label.text().startswith("Finished: FAIL")
    assert tab.body.currentIndex() == PAGE_RESULTS

    # The table: degraded GPU 0 fails, the A100 has no FP8, the vGPU is scored as a time slice of
    # the whole card it is cut from (the 40 GB A100 for "GRID A100-10C"), never a framebuffer share.
    bf16 = row(tab, "gemm_bf16", 0)
    assert tab.table.cell(bf16, Column.CHECK) == "GEMM BF16"
    assert tab.table.cell(bf16, Column.DATASHEET) == "990 TFLOP/s"  # H100 SXM dense BF16 (989.5)
    assert tab.table.cell(bf16, Column.VERDICT) == "\u2715 FAIL"
    assert "of H100" in (tab.table.tooltip(bf16, Column.VERDICT) or "")
    assert tab.table.cell(row(tab, "gemm_bf16", 1), Column.VERDICT) == "\u2713 PASS"
    assert tab.table.cell(row(tab, "gemm_fp8", 1), Column.VERDICT) == "\u2013 SKIPPED"
    vgpu = row(tab, "gemm_bf16", 3)
    assert tab.table.cell(vgpu, Column.VERDICT) == "\u2713 PASS"
    assert tab.table.cell(vgpu, Column.DATASHEET) == "312 TFLOP/s"
    assert "vGPU" in (tab.table.tooltip(vgpu, Column.VERDICT) or "")
    percent = tab.table.cell(row(tab, "mem_copy", 2), Column.PERCENT)
    assert percent.endswith(" %") and 60 <= int(percent[:-2]) <= 115

    # Found: failures buried mid-table, headers that do not sort, no filter by verdict.
    shown = [tab.table.shown_cell(i, Column.VERDICT) for i in range(tab.table.shown_rows())]
    fails = [i for i, v in enumerate(shown) if v == "\u2715 FAIL"]
    assert fails and fails == list(range(len(fails)))  # failures first
    tab.table.sortByColumn(Column.PERCENT, Qt.SortOrder.DescendingOrder)
    ratios = [o.ratio for o in (tab.table.results_model.outcomes[tab.table.proxy.mapToSource(
        tab.table.proxy.index(i, 0)).row()] for i in range(tab.table.shown_rows())) if o.datasheet is not None]
    assert ratios == sorted(ratios, reverse=True)
    tab.verdict_filter.setCurrentIndex(tab.verdict_filter.findText("Failures"))
    assert tab.table.shown_rows() == len(fails)
    assert {tab.table.shown_cell(i, Column.VERDICT) for i in range(len(fails))} == {"\u2715 FAIL"}
    tab.verdict_filter.setCurrentIndex(0)
    tab.table.sortByColumn(Column.VERDICT, Qt.SortOrder.AscendingOrder)

    # The chart: GPU 0's figures as % of datasheet, each with its own thresholds.
    assert tab.chart.gpu == 0 and tab.chart.showing_plot()
    bars = {b.label: b for b in tab.chart.bars}
    outcome = tab.table.results_model.outcomes[bf16]
    assert outcome.ratio is not None
    assert bars["GEMM BF16"].percent == pytest.approx(outcome.ratio * 100)
    assert bars["GEMM BF16"].verdict is Verdict.FAIL
    assert (bars["GEMM BF16"].pass_at, bars["GEMM BF16"].warn_at) == pytest.approx((70, 50))
    assert (bars["Memory copy"].pass_at, bars["Memory copy"].warn_at) == pytest.approx((75, 55))
    assert "Peer to peer \u2192 1" in bars
    assert tab.chart.title.text().startswith("SIMULATED")
    tab.chart.set_gpu(3)  # the vGPU guest: drawn against its share of the card
    assert tab.chart.showing_plot()
    tab.chart.set_gpu(0)

    # Labelled SIMULATED everywhere; the run is kept in the store and listed in the history.
    assert tab.sim_badge.isVisibleTo(tab)
    assert tab.label_banner.isVisibleTo(tab) and tab.label_banner.text().startswith("SIMULATED")
    assert tab.verdict_badge.text() == "\u2715 FAIL"
    assert len(store.history("demo")) == 1 and tab.history_view.run_count() == 1
    assert tab.last_result is not None and tab.last_result.saved_path is not None

    save_shot(tab, tmp_path, "benchmarks-light.png")
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    original = QPalette(app.palette())
    app.setPalette(theme.dark_palette())
    try:
        QApplication.processEvents()
        assert theme.is_dark(tab.palette())
        save_shot(tab, tmp_path, "benchmarks-dark.png")
        tab.show_page(2)
        save_shot(tab, tmp_path, "benchmarks-history-dark.png")
    finally:
        app.setPalette(original)


def test_cancel_stops_the_run_on_the_host(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "store")
    root = tmp_path / "host"
    tab, _ = make_tab(qtbot, bridge, store, runner=host_runner(root, simulated=True))
    tab.start("full")  # ~0.1 s per figure: long enough to cancel mid-way
    qtbot.waitUntil(lambda: "GEMM FP32 (GPU 0)" in tab.live_log.toPlainText(), timeout=30000)
    assert leftovers(root)[0], "the runner is running before the cancel"
    tab.run_panel.cancel_button.click()
    assert not tab.run_panel.cancel_button.isEnabled()  # pressed once, until the run reports back
    wait_idle(qtbot, tab, timeout=15000)

    assert tab.last_result is not None and tab.last_result.cancelled
    assert tab.run_panel.status_label.text().startswith("Cancelled")
    assert tab.run_panel.progress.format() == "stopped"
    assert leftovers(root) == ([], []), "no process and no temporary directory left on the host"
    assert store.history("demo") == []  # a cancelled run is not kept
    assert tab.run_panel.start_button.isEnabled()


def test_cpu_only_host_is_labelled_and_never_passes_gpu_checks(qtbot: Any, bridge: AsyncBridge,
                                                               tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "store")
    tab, _ = make_tab(qtbot, bridge, store, "cpu-box", host_runner(tmp_path / "host", simulated=False),
                      simulated=False)
    tab.start("quick")
    wait_idle(qtbot, tab)

    assert tab.label_banner.isVisibleTo(tab) and tab.label_banner.text() == CPU_LABEL
    assert not tab.sim_badge.isVisibleTo(tab)
    assert tab.verdict_badge.verdict is Verdict.INCONCLUSIVE
    model = tab.table.results_model
    gpu_checks = [o for o in model.outcomes if o.check.startswith(("gemm_", "mem_", "h2d", "d2h"))]
    assert gpu_checks and all(o.verdict is not Verdict.PASS for o in gpu_checks)
    toolchain = row(tab, "toolchain", None)
    assert tab.table.cell(toolchain, Column.VERDICT) == "? INCONCLUSIVE"
    assert "no CUDA toolchain" in tab.table.cell(toolchain, Column.NOTE)
    assert not tab.chart.showing_plot()  # nothing here may be drawn against a datasheet
    save_shot(tab, tmp_path, "benchmarks-cpu-light.png")


class RecordedRunner:
    """A runner that replays recorded output lines, then optionally fails (a lost connection)."""

    def __init__(self, lines: list[str], error: BaseException | None = None) -> None:
        self.lines, self.error = lines, error

    async def run(self, argv: Any, **_: Any) -> Any:
        from gpuws.core.runner import CommandResult

        return CommandResult(tuple(argv), 0, "", "")

    async def stream(self, argv: Any, **_: Any) -> AsyncIterator[str]:
        for line in self.lines:
            await asyncio.sleep(0)
            yield line
        if self.error is not None:
            raise self.error


def test_a_run_that_cannot_start_says_why(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "store")
    fatal = RecordedRunner(['{"type":"fatal","reason":"no python3 on the host"}'])
    tab, _ = make_tab(qtbot, bridge, store, "bare", fatal, simulated=False)  # type: ignore[arg-type]
    tab.start("quick")
    wait_idle(qtbot, tab, timeout=15000)
    assert tab.run_panel.status_label.text() == "Did not complete: no python3 on the host"
    assert "could not start: no python3 on the host" in tab.live_log.toPlainText()
    assert tab.verdict_badge.verdict is Verdict.INCONCLUSIVE  # never a pass
    notes = [tab.table.cell(i, Column.NOTE) for i in range(tab.table.results_model.rowCount())]
    assert "run did not complete: no python3 on the host" in notes


def test_an_unexpected_failure_is_shown_not_raised(qtbot: Any, bridge: AsyncBridge, tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    store = ResultStore(tmp_path / "store")
    broken = RecordedRunner(['{"type":"progress","step":1,"total":8,"message":"environment"}'],
                            OSError("pipe closed"))
    tab, _ = make_tab(qtbot, bridge, store, "flaky", broken, simulated=False)  # type: ignore[arg-type]
    tab.start("full")
    wait_idle(qtbot, tab, timeout=15000)
    assert tab.run_panel.status_label.text() == "Benchmark failed: OSError: pipe closed"
    assert tab.problem_banner.isVisibleTo(tab) and "pipe closed" in tab.problem_banner.text()
    assert tab.run_panel.start_button.isEnabled() and store.history("flaky") == []
    assert "benchmark job failed" in caplog.text


# -- controls, history, export ----------------------------------------------------------------


def test_start_needs_a_connected_host(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    tab = BenchmarksTab(store=ResultStore(tmp_path / "store"))
    qtbot.addWidget(tab)
    assert not tab.run_panel.start_button.isEnabled()
    assert "Select a host" in tab.run_panel.start_button.toolTip()
    tab, session = make_tab(qtbot, bridge, ResultStore(tmp_path / "store"), "gpu-1", simulated=False)
    assert not tab.run_panel.start_button.isEnabled()
    assert tab.run_panel.status_label.text() == "Connect to gpu-1 to run a benchmark (Not connected)."
    tab.start("quick")
    assert not tab.running  # refused, not crashed
    session.connection = FakeConnection(LocalRunner())
    session.state = "connected"
    session.state_changed.emit("connected", "")
    assert tab.run_panel.start_button.isEnabled()
    tab.set_host(None)
    assert not tab.run_panel.start_button.isEnabled()


def test_history_compares_with_earlier_runs_and_other_hosts(qtbot: Any, bridge: AsyncBridge, tmp_path: Path,
                                                            recorded_run: dict[str, Any]) -> None:
    store = ResultStore(tmp_path / "store")
    store.save(copy_run(recorded_run, "demo", "2024-05-01T10:00:00.000000Z", scale=1.25))
    store.save(copy_run(recorded_run, "demo", "2024-05-02T10:00:00.000000Z"))
    store.save(copy_run(recorded_run, "other", "2024-05-01T11:00:00.000000Z"))
    real = copy_run(recorded_run, "other", "2024-05-01T12:00:00.000000Z")
    real.summary["simulated"] = False
    for r in real.results:
        r["simulated"], r["harness"] = False, "gpu"
    store.save(real)  # a real run: never compared with simulated ones
    tab, _ = make_tab(qtbot, bridge, store)
    qtbot.waitUntil(lambda: tab.shown_run is not None, timeout=5000)

    assert tab.shown_run is not None and tab.shown_run.started_at.startswith("2024-05-02")  # the newest
    view = tab.history_view
    assert view.run_count() == 2 and view.labels == ["earlier 2024-05-01 10:00", "host other"]
    assert tab.history is not None
    assert "host other" in comparison_baselines(tab.shown_run, tab.history)
    assert comparison_baselines(tab.shown_run, tab.history)["host other"].simulated  # not the real run
    first = view.rows[0]
    assert first.baseline is not None and first.change is not None
    cells = [view.cell(0, c) for c in range(view.compare_table.columnCount())]
    assert cells[4] == f"{first.change:+.1%}" and first.change < -0.05  # 1.0 vs 1.25 and 1.0
    tab.show_page(2)
    save_shot(tab, tmp_path, "benchmarks-history-light.png")

    view.select_run(1)  # the older run: shown, and compared with nothing earlier on this host
    assert tab.shown_run is not None and tab.shown_run.started_at.startswith("2024-05-01")
    assert view.labels == ["host other"]
    assert view.run_count() == 2  # selecting a run does not rebuild the list


def test_export_json_and_markdown(qtbot: Any, bridge: AsyncBridge, tmp_path: Path,
                                  recorded_run: dict[str, Any]) -> None:
    store = ResultStore(tmp_path / "store")
    store.save(copy_run(recorded_run, "demo", "2024-05-01T10:00:00.000000Z", scale=0.9))
    store.save(copy_run(recorded_run, "demo", "2024-05-02T10:00:00.000000Z"))
    tab, _ = make_tab(qtbot, bridge, store)
    qtbot.waitUntil(lambda: tab.shown_run is not None, timeout=5000)
    assert tab.json_button.isEnabled() and tab.md_button.isEnabled()

    report = json.loads(tab.export_json(tmp_path / "report.json").read_text())
    assert report["host"] == "demo" and report["simulated"] is True
    assert report["label"].startswith("SIMULATED") and report["verdict"] == "fail"
    assert {(c["check"], c["gpu"]) for c in report["checks"]} >= {("gemm_bf16", 0), ("mem_copy", 2)}
    markdown = tab.export_markdown(tmp_path / "report.md").read_text()
    assert markdown.startswith("# gpuws benchmark: demo")
    assert "> **SIMULATED" in markdown and "## Compared with other runs" in markdown
    assert "earlier 2024-05-01 10:00" in markdown
    with pytest.raises(ExportError, match="does not exist"):
        tab.export_json(tmp_path / "missing" / "report.json")
    assert not list(tmp_path.glob(".report*"))  # no temporary file left behind


# -- pure parts ---------------------------------------------------------------------------------


def test_live_log_lines_survive_malformed_events() -> None:
    assert describe_event({"type": "progress", "step": 2, "total": 8, "message": "toolchain"}) == "[2/8] toolchain"
    assert describe_event({"type": "result", "check": "gemm_bf16", "gpu": 0, "status": "ok", "value": 812.25,
                           "unit": "TFLOP/s"}) == "    GEMM BF16 (GPU 0): 812 TFLOP/s"
    assert describe_event({"type": "result", "check": "p2p", "gpu": 0, "peer": 1, "status": "skipped",
                           "reason": "one GPU"}) == "    Peer to peer (GPU 0 \u2192 1): skipped \u2014 one GPU"
    # Hostile or broken lines never raise.
    assert describe_event({"type": "result", "check": "x", "status": "ok", "value": "NaN", "unit": 5}) == "    x: done"
    assert describe_event({"type": "summary", "duration_s": "long"}) == "runner finished"
    assert describe_event({"type": "unknown"}) is None


def test_chart_bars_only_for_figures_against_a_datasheet(recorded_run: dict[str, Any]) -> None:
    run = BenchRun.from_dict(recorded_run)
    outcomes = run.outcomes()
    bars = chart_bars(outcomes, 1)  # the A100: no FP8 bar, no environment checks
    labels = [b.label for b in bars]
    assert "GEMM FP8" not in labels and "GEMM BF16" in labels
    assert not any(label.startswith(("ECC", "PCIe")) for label in labels)
    assert chart_bars(outcomes, 3)  # the vGPU guest, against its share of the card
    assert all(b.verdict is not Verdict.PASS or b.percent >= (b.pass_at or 0) for b in bars)
    history = HostHistory("demo", [run])
    assert comparison_baselines(run, history) == {}


@pytest.fixture(autouse=True)
def _no_stray_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The runner must see only the environment the test gives it.
    monkeypatch.delenv("GPUWS_SIMULATED", raising=False)
    yield
    assert os.environ.get("GPUWS_SIMULATED") is None
