"""The fleet view: a fleet-wide summary, its recent past, and every GPU as a tile, most urgent first.

Data comes from Prometheus on the asyncio loop thread (`gpuws.app.fleet.FleetConnection`):
a snapshot every few seconds, the history for the chosen window (up to 30 days, downsampled by
Prometheus) when the window changes and once a minute. Nothing of the history is kept here beyond
what is drawn. Clicking a GPU asks for its host profile (`host_requested(host, uuid)`).

Beside the tiles, the Advice column: right-size advice per GPU with the money, from the same
app-layer call as `gpuws advise FLEET` (`gpuws.app.advice.advise_fleet`, on the loop thread) over
the chosen window. Clicking a row asks for its host with the Resize wizard on the target
(`resize_requested(host, uuid, gpu, target)`), or the host alone when there is no target.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpuws.core.advice import HISTORY_MIN_DATA_S, HOURS_PER_MONTH, Advice, AdvicePolicy, GpuAdvice
from gpuws.core.fleet.advice import FleetGpuAdvice
from gpuws.core.fleet.alerts import FleetAlerts
from gpuws.core.fleet.model import Attention, FleetGpu, SeriesKey, rank, summarize
from gpuws.core.fleet.profiles import FleetProfile
from gpuws.core.models import AlertThresholds
from gpuws.core.money import currency_of, money, rate
from gpuws.core.simulation import SIM_LABEL
from gpuws.core.telemetry.alerts import AlertKind
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.fleet.tiles import FleetTile, FleetTileGrid
from gpuws.ui.fleet.util_plot import FleetUtilPlot
from gpuws.ui.widgets import heading, muted_label

#: (label, seconds) of the time windows offered; the longest is Prometheus' 30 days.
WINDOWS: tuple[tuple[str, int], ...] = (("1 h", 3600), ("6 h", 6 * 3600), ("24 h", 86_400), ("7 days", 7 * 86_400),
                                        ("30 days", 30 * 86_400))
SNAPSHOT_MS = 5000
NARROW_PX = 1000  # narrower than this, the Advice table goes under the tiles
HISTORY_MS = 60_000
TILE_POINTS = 120  # per-GPU history points: a tile's sparkline is about this wide


#: Advice rows, most worth acting on first (then the biggest saving).
_ADVICE_ORDER = {Advice.STOP: 0, Advice.SMALLER: 1, Advice.LARGER: 2, Advice.KEEP: 3, Advice.NOT_ENOUGH_DATA: 4}
ADVICE_COLUMNS = ("Host", "GPU", "Now", "Advice", "Per hour", "Per month", "Basis")


def _money(delta: float | None, currency: str, scale: float = 1.0) -> str:
    """A price change with its sign and currency: "+$1.20", "-€3.00"."""
    if delta is None:
        return "-"
    value = delta * scale
    return ("+" if value > 0 else "") + money(value, currency)


def basis_text(advice: GpuAdvice) -> str:
    """What a projection rests on, in the table: its confidence and how much data ("low, 2 min")."""
    span = None if advice.stats is None else advice.stats.span_s
    if span is None:
        return advice.confidence.value
    minutes = span / 60
    amount = f"{span:.0f} s" if span < 120 else f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.0f} h"
    return f"{advice.confidence.value}, {amount}"


def advice_text(entry: FleetGpuAdvice) -> str:
    """The Advice cell: what to do and to which layout."""
    a = entry.advice
    if a.advice is Advice.STOP:
        return "stop (idle)" + (f"; or {a.alternative}" if a.alternative else "")
    if a.target:
        return f"{a.advice.value} → {a.target}"
    if a.advice is Advice.NOT_ENOUGH_DATA:
        return a.waiting_text  # "not enough data yet (33 s of 600 s)"
    return a.advice.value


def _window_label(seconds: float) -> str:
    return next((label for label, s in WINDOWS if s == round(seconds)), f"{seconds:g} s")


def _num(value: float | None, unit: str = "", scale: float = 1.0, digits: int = 0) -> str:
    return "-" if value is None else f"{value * scale:,.{digits}f}{unit}"


class FleetView(QWidget):
    """One fleet at a time. `host_requested(host, uuid)` when the user clicks a GPU."""

    host_requested = Signal(str, str)
    resize_requested = Signal(str, str, int, str)  # host, uuid, GPU index on the host, target layout
    snapshot_applied = Signal()
    history_applied = Signal()
    advice_applied = Signal()

    def __init__(self, bridge: AsyncBridge | None, parent: QWidget | None = None,
                 thresholds: AlertThresholds | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.thresholds = thresholds or AlertThresholds()
        self.profile: FleetProfile | None = None
        self._connection: Any = None
        self._alerts: FleetAlerts | None = None
        self._gpus: list[FleetGpu] = []
        self._per_gpu: dict[SeriesKey, np.ndarray] = {}
        self._pending: dict[str, concurrent.futures.Future[Any]] = {}
        self.advice: list[FleetGpuAdvice] = []
        # () -> (host profiles, {profile name: GPU UUIDs seen there}), read on the GUI thread from
        # what the main window already holds; None: advise_fleet reads the saved profiles itself.
        self.host_profiles: Any = None
        # A history's minimum, as `gpuws advise FLEET` has it: no money from seconds of data (#35).
        self.advice_policy: AdvicePolicy | None = AdvicePolicy(min_data_s=HISTORY_MIN_DATA_S)

        self.title = heading("Fleet", parent=self)
        self.sim_badge = QLabel(f"{SIM_LABEL}", self)
        self.sim_badge.setVisible(False)
        self.insecure_badge = QLabel("INSECURE: TLS not verified", self)
        self.insecure_badge.setToolTip("This fleet is read without checking the server's TLS certificate (--insecure)")
        self.insecure_badge.setVisible(False)
        self.window_box = QComboBox(self)
        for label, seconds in WINDOWS:
            self.window_box.addItem(label, seconds)
        self.window_box.setCurrentIndex(2)
        self.window_box.setAccessibleName("Time window")
        self.window_box.currentIndexChanged.connect(lambda _i: self.refresh_history())
        self.window_box.currentIndexChanged.connect(lambda _i: self.refresh_advice())
        self.refresh_button = QToolButton(self)
        self.refresh_button.setText("↻")
        self.refresh_button.setToolTip("Read the fleet again")
        self.refresh_button.clicked.connect(self.refresh)
        top = QHBoxLayout()
        top.addWidget(self.title)
        top.addWidget(self.sim_badge)
        top.addWidget(self.insecure_badge)
        top.addStretch(1)
        top.addWidget(muted_label("Window", self))
        top.addWidget(self.window_box)
        top.addWidget(self.refresh_button)

        self.summary = QLabel("", self)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)  # 900 px wide windows: the line wraps instead of widening the window
        self.missing_label = QLabel("", self)  # GPUs not reporting: above everything else urgent
        self.missing_label.setTextFormat(Qt.TextFormat.PlainText)
        self.missing_label.setWordWrap(True)
        self.missing_label.setVisible(False)
        self.alerts_label = QLabel("", self)
        self.alerts_label.setTextFormat(Qt.TextFormat.PlainText)
        self.alerts_label.setWordWrap(True)
        self.status = muted_label("", self)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # Prometheus' error text is a remote string
        self.status.setWordWrap(True)

        self.plot = FleetUtilPlot(self)

        self.grid = FleetTileGrid(self)
        self.grid.gpu_clicked.connect(self._on_gpu_clicked)
        self.scroll_area = QScrollArea(self)
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setWidget(self.grid)

        self.advice_title = QLabel("Advice", self)
        bold = self.advice_title.font()
        bold.setBold(True)
        self.advice_title.setFont(bold)
        self.advice_summary = muted_label("", self)
        self.advice_summary.setTextFormat(Qt.TextFormat.PlainText)
        self.advice_summary.setWordWrap(True)
        self.advice_table = QTableWidget(0, len(ADVICE_COLUMNS), self)
        self.advice_table.setAccessibleName("Right-size advice per GPU")
        self.advice_table.setHorizontalHeaderLabels(list(ADVICE_COLUMNS))
        self.advice_table.verticalHeader().setVisible(False)
        self.advice_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.advice_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.advice_table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.advice_table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # The advice text takes what is left and is elided (the tooltip has it whole), so the money
        # columns stay in view instead of behind a horizontal scroll.
        header.setSectionResizeMode(ADVICE_COLUMNS.index("Advice"), QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(ADVICE_COLUMNS.index("Host"), QHeaderView.ResizeMode.Stretch)  # long node names
        header.setStretchLastSection(False)
        self.advice_table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.advice_table.setWordWrap(False)
        self.advice_table.cellClicked.connect(lambda r, _c: self.activate_advice(r))
        self.advice_table.setToolTip("Click a GPU to open its host with the Resize wizard on the target")
        advice_panel = QWidget(self)
        advice_box = QVBoxLayout(advice_panel)
        advice_box.setContentsMargins(8, 0, 0, 0)
        advice_box.addWidget(self.advice_title)
        advice_box.addWidget(self.advice_summary)
        advice_box.addWidget(self.advice_table, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.addWidget(self.scroll_area)
        self.splitter.addWidget(advice_panel)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setChildrenCollapsible(True)
        self._split_done = False  # the first show gives the advice its share (see showEvent)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 16, 8)
        layout.addLayout(top)
        layout.addWidget(self.summary)
        layout.addWidget(self.missing_label)
        layout.addWidget(self.alerts_label)
        layout.addWidget(self.plot)
        layout.addWidget(self.status)
        layout.addWidget(self.splitter, 1)

        self._snapshot_timer = QTimer(self)
        self._snapshot_timer.setInterval(SNAPSHOT_MS)
        self._snapshot_timer.timeout.connect(self.refresh_snapshot)
        self._history_timer = QTimer(self)
        self._history_timer.setInterval(HISTORY_MS)
        self._history_timer.timeout.connect(self.refresh_history)
        self._history_timer.timeout.connect(self.refresh_advice)

    # -- opening and polling ----------------------------------------------------------------------

    @property
    def window_s(self) -> int:
        return int(self.window_box.currentData())

    def open_profile(self, profile: FleetProfile) -> None:
        """Show this fleet (closing the one shown before) and start polling it."""
        from gpuws.app.fleet import FleetConnection

        if self.profile is not None and profile == self.profile and self._connection is not None:
            return
        self.close_fleet()
        self.profile = profile
        self.title.setText(f"Fleet {profile.name}")
        self.insecure_badge.setVisible(profile.insecure)
        self.status.setText(f"Reading {profile.prometheus}" + (f" via {profile.via}" if profile.via else "") + " …")
        self._alerts = FleetAlerts(profile.name, self.thresholds, profile.price_per_gpu_hour)
        self._connection = FleetConnection(profile, thresholds=self.thresholds)
        self._gpus, self._per_gpu = [], {}
        self.grid.set_tiles([])
        self.apply_advice(None)
        self.refresh()
        self._snapshot_timer.start()
        self._history_timer.start()

    def close_fleet(self) -> concurrent.futures.Future[Any] | None:
        """Stop polling and close the connection (on the loop thread); returns that closing."""
        self._snapshot_timer.stop()
        self._history_timer.stop()
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()
        connection, self._connection = self._connection, None
        if connection is not None and self.bridge is not None and self.bridge.running:
            return self.bridge.run_async(connection.close(), owner=self)
        return None

    def refresh(self) -> None:
        self.refresh_snapshot()
        self.refresh_history()
        self.refresh_advice()

    def refresh_snapshot(self) -> None:
        self._request("snapshot", lambda c: c.snapshot(), self.apply_snapshot)

    def refresh_history(self) -> None:
        window = self.window_s
        self._request("history", lambda c: c.history(window, TILE_POINTS), self.apply_history)

    def refresh_advice(self) -> None:
        """Ask for right-size advice over the chosen window (the profiles are read here, on the GUI thread)."""
        window = self.window_s
        options: dict[str, Any] = {"policy": self.advice_policy}
        if self.host_profiles is not None:
            options["host_profiles"], options["uuids"] = self.host_profiles()
        self._request("advice", lambda c: c.advice(window, **options), self.apply_advice)

    def _request(self, what: str, call: Any, done: Any) -> None:
        connection = self._connection
        if connection is None or self.bridge is None or not self.bridge.running:
            return
        if what in self._pending and not self._pending[what].done():
            return  # one of each in flight: a slow Prometheus is not asked twice

        def ok(result: Any) -> None:
            if connection is self._connection:
                done(result)

        def failed(exc: BaseException) -> None:
            if connection is self._connection:
                self.status.setText(str(exc))  # one line, and never a secret (the errors say so)

        self._pending[what] = self.bridge.run_async(call(connection), ok, failed, owner=self)

    # -- results ------------------------------------------------------------------------------

    def apply_snapshot(self, snapshot: Any) -> None:
        """Show a `Snapshot`: rank, sum up, evaluate alerts, lay out tiles."""
        self._gpus = list(snapshot.gpus)
        missing = list(snapshot.missing)
        ranked = rank(self._gpus, self.thresholds)
        # GPUs that stopped reporting head the tiles: nothing else about them will say so.
        gone = [FleetTile(FleetGpu(host=m.host, gpu=m.gpu, uuid=m.uuid, model=m.model, gi=m.gi),
                          Attention.NOT_REPORTING, None,
                          note="exporter down" if m.exporter_up is False else "not reporting" + (
                              "" if m.since is None else time.strftime(" since %H:%M:%S", time.localtime(m.since))))
                for m in missing]
        self.grid.set_tiles(gone + [FleetTile(g, a, self._per_gpu.get(g.key)) for a, g in ranked])
        price = self.profile.price_per_gpu_hour if self.profile else None
        s = summarize(self._gpus, self.thresholds, price, missing=missing)
        simulated = any(g.simulated for g in self._gpus)
        self.sim_badge.setVisible(simulated)
        self.insecure_badge.setVisible(snapshot.insecure)
        # Urgent kinds only; application XIDs are information, said apart.
        attention = ", ".join(f"{n} {Attention[k.upper()].label}" for k, n in sorted(s.attention.items())
                              if Attention[k.upper()].urgent) or "nothing"
        if info := s.attention.get(Attention.XID_INFO.name.lower()):
            attention += f"  ·  {info} with an application XID (information)"
        money = ("" if s.idle_cost_per_hour is None
                 else f"  ·  idle GPUs burn {rate(s.idle_cost_per_hour, currency_of(None))}")
        self.summary.setText(
            f"{s.counted()}  ·  util {_num(s.util_avg_pct, ' %')}  ·  memory "
            f"{_num(s.mem_used_mib, ' GiB', 1 / 1024)} of {_num(s.mem_total_mib, ' GiB', 1 / 1024)}  ·  power "
            f"{_num(s.power_w, ' kW', 1 / 1000, 1)}"
            + ("" if s.nvlink_mb_s is None else f"  ·  NVLink {_num(s.nvlink_mb_s, ' GB/s', 1 / 1000)}")
            + f"  ·  needs attention: {attention}{money}")
        self.missing_label.setText("\n".join(f"{m.host} GPU {m.device_key}: {m.describe()}" for m in missing[:5])
                                   + (f"\n… and {len(missing) - 5} more" if len(missing) > 5 else ""))
        self.missing_label.setVisible(bool(missing))
        if self._alerts is not None:
            self._alerts.evaluate(snapshot.t, self._gpus, missing)
            active = self._alerts.active()
            first = (AlertKind.GPU_NOT_REPORTING, AlertKind.OOM_RISK, AlertKind.IDLE_GPU)
            shown = [a for a in active if a.kind in first] + \
                    [a for a in active if a.kind not in (*first, AlertKind.NOT_EXPORTED)]
            lines = [a.message for a in shown[:3]] + ([f"… and {len(shown) - 3} more"] if len(shown) > 3 else [])
            blind = sum(1 for g in self._gpus if g.gi is None and g.throttle_source is None)
            if blind:  # information, one line: never pushes an urgent alert out of view
                lines.append(f"Throttle reasons not exported for {blind} GPU{'s' * (blind != 1)} "
                             "(DCGM_FI_DEV_CLOCKS_EVENT_REASONS): throttling cannot be seen there")
            self.alerts_label.setText("\n".join(lines))
        if snapshot.empty_message:
            self.status.setText(snapshot.empty_message)  # why nothing shows: no series, or all too old
        else:
            stale = [g for g in self._gpus if g.stale]
            old = (f"; values of {len(stale)} older than two scrape intervals (up to "
                   f"{max(g.age_s or 0.0 for g in stale):.0f} s)") if stale else ""
            self.status.setText(f"Read {s.counted()} from {snapshot.fleet} at "
                                f"{time.strftime('%H:%M:%S', time.localtime(snapshot.t))}{old}")
        self.snapshot_applied.emit()

    def apply_history(self, history: Any) -> None:
        """Show a `FleetHistory`: the fleet's utilisation line and each tile's sparkline."""
        self.plot.set_data(history.times, history.util_avg_pct, history.start, history.end)
        self._per_gpu = dict(history.per_gpu_util)
        tiles = [FleetTile(t.gpu, t.attention, self._per_gpu.get(t.gpu.key), note=t.note) for t in self.grid.tiles()]
        self.grid.set_tiles(tiles)
        self.history_applied.emit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Advice beside the tiles, or under them when the window is narrow."""
        super().resizeEvent(event)
        # Narrow windows (900 px screens): the advice goes under the tiles at full width, so its
        # money columns stay in view; side by side again when there is room.
        wanted = Qt.Orientation.Vertical if self.width() < NARROW_PX else Qt.Orientation.Horizontal
        if self.splitter.orientation() != wanted:
            self.splitter.setOrientation(wanted)
            self._split_done = False
            self._share_split()

    def _share_split(self) -> None:
        if self._split_done or not self.isVisible():
            return
        self._split_done = True
        horizontal = self.splitter.orientation() == Qt.Orientation.Horizontal
        size = max(1, self.splitter.width() if horizontal else self.splitter.height())
        self.splitter.setSizes([size * 3 // 5, size - size * 3 // 5])

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        # Stretch factors share only what is left after the tiles' size hint, which left the
        # advice a sliver with its money columns scrolled away: 3/5 tiles, 2/5 advice instead.
        self._share_split()

    def apply_advice(self, report: Any) -> None:
        """Show a `FleetAdviceReport` (None: clear): one row per GPU, most worth acting on first."""
        entries = [] if report is None else sorted(
            report.gpus, key=lambda e: (_ADVICE_ORDER[e.advice.advice], e.advice.price_delta_per_hour or 0.0,
                                        e.host, e.advice.gpu))
        self.advice = entries
        table = self.advice_table
        table.setSortingEnabled(False)
        table.setRowCount(len(entries))
        for r, entry in enumerate(entries):
            a = entry.advice
            currency = self._currency(entry)
            cells = (entry.host, str(a.gpu), a.current, advice_text(entry), _money(a.price_delta_per_hour, currency),
                     _money(a.price_delta_per_hour, currency, HOURS_PER_MONTH), basis_text(a))
            tip = "\n".join((f"{entry.host} GPU {a.gpu} ({entry.model or 'unknown model'}, {entry.uuid or 'no UUID'})",
                             f"{a.confidence.value} confidence" + (f"; host profile {entry.profile}"
                                                                   if entry.profile else "; no host profile"),
                             *a.reasons))
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)  # plain text: host names and layouts are remote strings
                item.setToolTip(tip)
                if c in (4, 5):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                table.setItem(r, c, item)
        if report is None:
            self.advice_summary.setText("")
        else:
            act = [e for e in entries if e.advice.advice in (Advice.STOP, Advice.SMALLER, Advice.LARGER)]
            savings: dict[str, float] = {}  # per currency: hosts priced in EUR and USD are never summed
            for e in act:
                if (d := e.advice.price_delta_per_hour) is not None and d < 0:
                    savings[self._currency(e)] = savings.get(self._currency(e), 0.0) + d
            saved = "; ".join(f"{rate(-v, c)} ({money(-v * HOURS_PER_MONTH, c)}/month)"
                              for c, v in sorted(savings.items()))
            waiting = [e.advice for e in entries if e.advice.advice is Advice.NOT_ENOUGH_DATA]
            over = f"Over {_window_label(report.window_s)}: "
            if waiting and len(waiting) == len(entries):  # nothing is projected from too little data
                furthest = max(waiting, key=lambda a: a.stats.span_s if a.stats is not None else 0.0)
                self.advice_summary.setText(over + furthest.waiting_text)
            else:
                self.advice_summary.setText(
                    over + f"{len(act)} of {len(entries)} GPUs to act on" + (f"; saves {saved}" if saved else "")
                    + (f"; {len(waiting)} not enough data yet" if waiting else "")
                    + " (projections from the data in Basis)")
            self.advice_applied.emit()

    def _currency(self, entry: FleetGpuAdvice) -> str:
        """The currency of an advice row's prices: its host profile's, else the fleet's (the locale's)."""
        if entry.profile and self.host_profiles is not None:
            profiles, _ = self.host_profiles()
            for profile in profiles:
                if profile.name == entry.profile:
                    return currency_of(getattr(profile, "currency", None))
        return currency_of(None)

    def activate_advice(self, row: int) -> None:
        """A click on an advice row: its host with the wizard on the target, or the host alone."""
        if not 0 <= row < len(self.advice):
            return
        from gpuws.ui.telemetry.advice_strip import resize_target

        entry = self.advice[row]
        target = resize_target(entry.advice)
        if target is not None:
            self.resize_requested.emit(entry.host, entry.uuid or "", entry.advice.gpu, target)
        else:
            self.host_requested.emit(entry.host, entry.uuid or "")

    def gpus(self) -> list[FleetGpu]:
        return list(self._gpus)

    def _on_gpu_clicked(self, gpu: FleetGpu) -> None:
        self.host_requested.emit(gpu.host, gpu.uuid or "")

    def show_message(self, text: str) -> None:
        self.status.setText(text)
