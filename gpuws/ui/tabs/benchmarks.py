"""The Benchmarks tab: run the on-host GPU sanity benchmark and judge it against the datasheet.

Run controls and a live log while it runs (events come from the loop thread as queued signals,
see `gpuws.ui.bench.job`); then the table of checks with verdict badges, the measured-vs-datasheet
chart, and the comparison with earlier runs and other hosts from the results store; export as
JSON or Markdown. Simulated runs and CPU harness checks are labelled wherever a figure is shown.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpuws.app.workspace import Workspace
from gpuws.core.bench.report import run_label
from gpuws.core.bench.results import BenchRun, ResultStore
from gpuws.core.bench.verdicts import Verdict, overall
from gpuws.core.errors import GpuwsError
from gpuws.core.simulation import SIM_LABEL
from gpuws.ui.bench.check_offer import CheckOffer
from gpuws.ui.bench.datasheet_chart import DatasheetChart
from gpuws.ui.bench.export import default_file_name, export_json, export_markdown
from gpuws.ui.bench.history import HostHistory, comparison_for, load_history, short_time
from gpuws.ui.bench.history_view import HistoryView, run_tag
from gpuws.ui.bench.job import BenchJob, JobResult
from gpuws.ui.bench.results_table import ResultsTable, VerdictBadge
from gpuws.ui.bench.run_panel import LiveLog, RunPanel
from gpuws.ui.flow_layout import FlowLayout
from gpuws.ui.tabs import HostContext
from gpuws.ui.theme import state_label
from gpuws.ui.widgets import Badge, Banner, BannerKind, muted_label

if TYPE_CHECKING:
    from gpuws.ui.session_controller import HostSession

log = logging.getLogger(__name__)

PAGE_RESULTS, PAGE_LOG, PAGE_HISTORY = 0, 1, 2
PAGES = ("Results", "Live log", "History")


class BenchmarksTab(QWidget):
    """Measure what the GPU really delivers and compare it with its datasheet.

    Interface: `BenchmarksTab(parent=None, *, store=None)`, `set_host(context: HostContext | None)`.
    One benchmark runs at a time; it keeps running (and is kept in the history) if another host
    is selected meanwhile.
    """

    def __init__(self, parent: QWidget | None = None, *, store: ResultStore | None = None) -> None:
        super().__init__(parent)
        self.store = store if store is not None else ResultStore()
        self.context: HostContext | None = None
        self.job: BenchJob | None = None
        self._own_workspace: Workspace | None = None  # only when shown without the window's hub
        self.history: HostHistory | None = None
        self.shown_run: BenchRun | None = None
        self.last_result: JobResult | None = None
        self._tracked_session: HostSession | None = None

        # Toolbar: pages | overall verdict, SIMULATED | export.
        self.page_group = QButtonGroup(self)
        self.page_buttons: list[QToolButton] = []
        for i, label in enumerate(PAGES):
            button = QToolButton(self)
            button.setText(label)
            button.setCheckable(True)
            button.setChecked(i == PAGE_RESULTS)
            self.page_group.addButton(button, i)
            self.page_buttons.append(button)
        self.page_group.idClicked.connect(self.show_page)
        self.verdict_badge = VerdictBadge(self)
        self.sim_badge = Badge(SIM_LABEL, parent=self)
        self.sim_badge.setToolTip("The simulated GPU host: its figures are simulated, not measured")
        self.sim_badge.hide()
        self.json_button = QPushButton("Export JSON\u2026", self)
        self.json_button.setToolTip("Save the shown run's report as JSON (the `gpuws bench --json` object)")
        self.json_button.clicked.connect(lambda: self._ask_export("json"))
        self.md_button = QPushButton("Export Markdown\u2026", self)
        self.md_button.setToolTip("Save the shown run's report and its comparison as Markdown")
        self.md_button.clicked.connect(lambda: self._ask_export("md"))
        toolbar = FlowLayout(spacing=4)  # wraps in a narrow window rather than clipping its buttons
        for button in self.page_buttons:
            toolbar.addWidget(button)
        toolbar.add_stretch()
        toolbar.addWidget(self.verdict_badge)
        toolbar.addWidget(self.sim_badge)
        toolbar.add_spacing(8)
        toolbar.addWidget(self.json_button)
        toolbar.addWidget(self.md_button)

        # The shown run's label (SIMULATED / CPU harness) and problems (failed run, unsaved result).
        self.label_banner = Banner(BannerKind.SIMULATED, "", self)
        self.label_banner.hide()
        self.problem_banner = Banner(BannerKind.ERROR, "", self)
        self.problem_banner.hide()

        self.check_offer = CheckOffer(self)
        self.check_offer.check_requested.connect(lambda: self.start("check"))
        self.run_panel = RunPanel(self)
        self.run_panel.start_requested.connect(self.start)
        self.run_panel.cancel_requested.connect(self.cancel)
        self.live_log = LiveLog(self)
        self.run_panel.log_cleared.connect(self.live_log.clear)
        self.run_panel.log_line.connect(self.live_log.appendPlainText)

        self.run_summary = muted_label("", self)
        self.run_summary.setWordWrap(True)
        self.table = ResultsTable(self)
        self.verdict_filter = QComboBox(self)
        self.verdict_filter.setToolTip("Show only the checks with this verdict")
        for text, verdict in (("All verdicts", None), ("Failures", Verdict.FAIL), ("Warnings", Verdict.WARN),
                              ("Inconclusive", Verdict.INCONCLUSIVE), ("Passes", Verdict.PASS),
                              ("Skipped", Verdict.SKIPPED)):
            self.verdict_filter.addItem(text, verdict.value if verdict is not None else "")
        self.verdict_filter.currentIndexChanged.connect(self._on_verdict_filter)
        self.chart = DatasheetChart(self)
        results = QWidget(self)
        results_layout = QVBoxLayout(results)
        results_layout.setContentsMargins(0, 0, 0, 0)
        results_layout.setSpacing(4)
        splitter = QSplitter(Qt.Orientation.Vertical, results)
        splitter.addWidget(self.table)
        splitter.addWidget(self.chart)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setChildrenCollapsible(False)
        summary_row = QHBoxLayout()
        summary_row.addWidget(self.run_summary, 1)
        summary_row.addWidget(QLabel("Show", self))
        summary_row.addWidget(self.verdict_filter)
        results_layout.addLayout(summary_row)
        results_layout.addWidget(splitter, 1)
        self.history_view = HistoryView(self)
        self.history_view.run_selected.connect(lambda run: self.show_run(run, from_list=True))
        self.body = QStackedWidget(self)
        for page in (results, self.live_log, self.history_view):
            self.body.addWidget(page)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 8, 0, 0)
        layout.setSpacing(8)
        layout.addLayout(toolbar)
        layout.addWidget(self.check_offer)
        layout.addWidget(self.run_panel)
        layout.addWidget(self.label_banner)
        layout.addWidget(self.problem_banner)
        layout.addWidget(self.body, 1)
        self.show_run(None)
        self._update_can_start()

    # -- host ------------------------------------------------------------------------------------

    @property
    def host(self) -> str | None:
        """The shown host's name, if any."""
        return self.context.profile.name if self.context is not None else None

    @property
    def running(self) -> bool:
        """Whether a benchmark runs."""
        return self.job is not None

    def set_host(self, context: HostContext | None) -> None:
        """Show `context`'s host (None: no host) with its history."""
        if self._tracked_session is not None:
            with contextlib.suppress(RuntimeError, TypeError):  # the session is already gone
                self._tracked_session.state_changed.disconnect(self._on_session_state)
            self._tracked_session = None
        self.context = context
        self.history = None
        self.show_run(None)
        self.problem_banner.hide()
        self.sim_badge.setVisible(bool(context is not None and context.profile.simulated))
        if context is not None:
            context.session.state_changed.connect(self._on_session_state)
            self._tracked_session = context.session
            self._load_history(context)
        self.check_offer.hide()
        self._update_can_start()
        self._offer_check()

    def _workspace_of(self, context: HostContext) -> Workspace:
        """The window's Workspace (over the hub); shown on its own, a Workspace of the tab's."""
        if context.hub is not None:
            workspace = context.hub.workspace
        else:
            if self._own_workspace is None:
                bridge = context.bridge
                self._own_workspace = Workspace(lambda coro: bridge.run_async(coro), post=bridge.post, stream=False)
            workspace = self._own_workspace
        if workspace.host(context.profile.name) is None:
            workspace.add_host(context.profile)
        return workspace

    def _on_session_state(self, *_: object) -> None:
        self._update_can_start()
        self._offer_check()

    def _offer_check(self) -> None:
        """Right after a host's first connection: offer the two-minute check."""
        if self.context is not None and self.context.session.connection is not None and self.job is None:
            self.check_offer.connected(self.context.profile.name)

    def _update_can_start(self) -> None:
        if self.job is not None:
            other = "" if self.job.host == self.host else f" on {self.job.host}"
            self.run_panel.set_can_start(False, f"A benchmark is running{other}.")
        elif self.context is None:
            self.run_panel.set_can_start(False, "Select a host to benchmark its GPUs.")
        elif self.context.session.connection is None:
            state = state_label(str(self.context.session.state))
            self.run_panel.set_can_start(False, f"Connect to {self.host} to run a benchmark ({state}).")
        else:
            self.run_panel.set_can_start(True)

    def _load_history(self, context: HostContext) -> None:
        host = context.profile.name
        try:
            context.bridge.run_blocking(lambda: load_history(self.store, host),
                                        lambda history: self._on_history(host, history),
                                        lambda exc: self._show_problem(f"Could not read the benchmark history: {exc}"))
        except RuntimeError:  # the bridge is not running (the app is closing)
            log.debug("benchmark history not loaded: bridge stopped")

    def _on_history(self, host: str, history: HostHistory) -> None:
        if host != self.host:
            return  # another host was selected meanwhile
        self.history = history
        self.show_run(history.latest)

    # -- running ---------------------------------------------------------------------------------

    def start(self, mode: str = "quick") -> None:
        """Start a `mode` ("quick", "full" or "check") benchmark on the selected host."""
        context = self.context
        if self.job is not None or context is None:
            return
        connection = context.session.connection
        if connection is None:
            self._update_can_start()
            return
        job = BenchJob(context.profile.name, mode, self._workspace_of(context), self.store,
                       runner=connection.runner, parent=self)
        job.event_received.connect(self._on_event, Qt.ConnectionType.QueuedConnection)
        try:
            job.start(context.bridge, lambda result: self._on_job_done(job, result),
                      lambda exc: self._on_job_failed(job, exc))
        except (RuntimeError, GpuwsError) as exc:
            job.deleteLater()
            self._show_problem(f"Cannot start the benchmark: {exc}")
            return
        self.job = job
        self.problem_banner.hide()
        self.check_offer.hide()
        if mode in self.run_panel.mode_buttons:
            self.run_panel.set_mode(mode)
        self.run_panel.begin(job.host, mode)
        self.show_page(PAGE_LOG)
        self._update_can_start()

    def cancel(self) -> None:
        """Stop the running benchmark; the tab hears back once the host has been cleaned up."""
        if self.job is not None:
            self.job.cancel()

    def _on_event(self, event: object) -> None:
        if isinstance(event, dict):
            self.run_panel.add_event(event)

    def _on_job_done(self, job: BenchJob, result: JobResult) -> None:
        self._end_job(job)
        self.last_result = result
        run = result.run
        if run is None:
            self.run_panel.finish("Cancelled: the benchmark was stopped on the host and its files removed.",
                                  completed=False)
            return
        verdict = run.verdict()
        if run.error:
            self.run_panel.finish(f"Did not complete: {run.error}", completed=False)
        else:
            report = f" Report for the provider: {result.check_report}" if result.check_report else ""
            self.run_panel.finish(f"Finished: {verdict.value.upper()} ({_counts_text(run)}).{report}", completed=True)
        if result.save_error:
            self._show_problem(f"The result was not kept in the history: {result.save_error}")
        if result.host == self.host and result.history is not None:
            self.history = result.history
            self.show_run(run)
            self.show_page(PAGE_RESULTS)

    def _on_job_failed(self, job: BenchJob, exc: BaseException) -> None:
        self._end_job(job)
        message = str(exc) if isinstance(exc, GpuwsError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, GpuwsError):
            log.error("benchmark job failed", exc_info=exc)
        self.run_panel.finish(f"Benchmark failed: {message}", completed=False)
        self._show_problem(f"Benchmark failed: {message}")

    def _end_job(self, job: BenchJob) -> None:
        if self.job is job:
            self.job = None
        job.deleteLater()
        self._update_can_start()

    # -- showing a run ---------------------------------------------------------------------------

    def show_run(self, run: BenchRun | None, *, from_list: bool = False) -> None:
        """Fill the table, chart, labels and comparison with `run` (None: nothing to show)."""
        self.shown_run = run
        outcomes = run.outcomes() if run is not None else []
        names = _gpu_names(run)
        label = run_label(run) if run is not None else None
        self.table.set_outcomes(outcomes, names)
        self.chart.set_outcomes(outcomes, names, run_tag(run) if run is not None else None)
        if label:
            self.label_banner.set_kind(BannerKind.SIMULATED if run is not None and run.simulated
                                       else BannerKind.WARNING)
            self.label_banner.set_text(label)
        self.label_banner.setVisible(bool(label))
        if run is None:
            self.verdict_badge.set_verdict(None)
            self.run_summary.setText("No benchmark has been run on this host yet." if self.context else "")
        else:
            self.verdict_badge.set_verdict(overall(outcomes), f"Overall verdict: {_counts_text(run)}")
            self.run_summary.setText(_summary_text(run))
        for button in (self.json_button, self.md_button):
            button.setEnabled(run is not None)
        if from_list:
            self.history_view.show_comparison(run)
        else:
            self.history_view.set_history(self.history, run)

    def _on_verdict_filter(self, _index: int) -> None:
        value = str(self.verdict_filter.currentData() or "")
        self.table.set_verdict_filter(Verdict(value) if value else None)

    def show_page(self, page: int) -> None:
        """Show page `page` of the tab."""
        self.page_group.button(page).setChecked(True)
        self.body.setCurrentIndex(page)

    def _show_problem(self, text: str) -> None:
        self.problem_banner.set_text(text)
        self.problem_banner.show()

    # -- export ----------------------------------------------------------------------------------

    def export_json(self, path: Path) -> Path:
        """Write the shown run's report as JSON (raises `ExportError`, a GpuwsError)."""
        if self.shown_run is None:
            raise GpuwsError("no benchmark run to export")
        return export_json(self.shown_run, path)

    def export_markdown(self, path: Path) -> Path:
        """Write the shown run's report and its comparison as Markdown."""
        run = self.shown_run
        if run is None:
            raise GpuwsError("no benchmark run to export")
        comparison = comparison_for(run, self.history) if self.history is not None else None
        return export_markdown(run, path, comparison)

    def _ask_export(self, kind: str) -> None:
        if self.shown_run is None:
            return
        suffix, what = (".json", "JSON (*.json)") if kind == "json" else (".md", "Markdown (*.md)")
        start = str(Path.home() / default_file_name(self.shown_run, suffix))
        name, _ = QFileDialog.getSaveFileName(self, "Export benchmark report", start, what)
        if not name:
            return
        try:
            written = self.export_json(Path(name)) if kind == "json" else self.export_markdown(Path(name))
        except GpuwsError as exc:
            self._show_problem(str(exc))
            return
        self.run_summary.setText(f"{_summary_text(self.shown_run)}  Exported to {written}.")


def _gpu_names(run: BenchRun | None) -> dict[int, str]:
    names: dict[int, str] = {}
    for g in (run.summary.get("gpus") or []) if run is not None else []:
        if isinstance(g, dict) and isinstance(g.get("index"), int):
            names[g["index"]] = str(g.get("name") or f"GPU {g['index']}")
    return names


def _counts_text(run: BenchRun) -> str:
    counts = Counter(o.verdict for o in run.outcomes())
    order = (Verdict.PASS, Verdict.WARN, Verdict.FAIL, Verdict.INCONCLUSIVE, Verdict.SKIPPED)
    return ", ".join(f"{counts[v]} {v.value}" for v in order if counts[v]) or "no checks"


def _summary_text(run: BenchRun) -> str:
    s = run.summary
    parts = [f"{run.mode.capitalize()} run of {short_time(run.started_at)} UTC"]
    if s.get("backend"):
        parts.append(f"backend {s['backend']}")
    if s.get("driver_version"):
        parts.append(f"driver {s['driver_version']}")
    if s.get("cuda_driver_version"):
        parts.append(f"CUDA {s['cuda_driver_version']}")
    if isinstance(s.get("duration_s"), (int, float)):
        parts.append(f"{float(s['duration_s']):.1f} s")
    if run.cancelled or run.timed_out or run.error:
        parts.append("did not complete")
    return " \u00b7 ".join(parts)
