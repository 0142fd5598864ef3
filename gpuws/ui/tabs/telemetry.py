"""The Telemetry tab: live GPU cards of the selected host, a detail plot, all hosts, the alert log.

Nothing here reacts to samples. A `FrameClock` (10 fps, stopped while the tab is hidden) reads
the shared `TelemetryStore` and redraws only what has new data or a moved time range. Streams
are run by the app's `TelemetryHub` (one per bridge) for every session the tab has been shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QFileDialog,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpuws.core.errors import GpuwsError
from gpuws.core.simulation import SIM_LABEL
from gpuws.core.states import ConnectionState
from gpuws.core.telemetry.alerts import AlertEvent
from gpuws.ui.flow_layout import FlowLayout
from gpuws.ui.tabs import HostContext
from gpuws.ui.telemetry.alert_log import AlertLogView
from gpuws.ui.telemetry.export import export_range_csv, export_widget_png
from gpuws.ui.telemetry.frame_clock import DEFAULT_FPS, FrameClock
from gpuws.ui.telemetry.gpu_card import mig_device_name
from gpuws.ui.telemetry.host_cards import HostCards
from gpuws.ui.telemetry.hub import TelemetryHub
from gpuws.ui.telemetry.metric_plot import DetailPlot
from gpuws.ui.telemetry.overview_grid import OverviewGrid
from gpuws.ui.telemetry.process_table import ProcessTable
from gpuws.ui.widgets import Badge, Banner, BannerKind, muted_label

if TYPE_CHECKING:
    from gpuws.core.inventory import Inventory

# A host in these states streams nothing now: the readouts are the last values (greyed).
_DOWN_STATES = frozenset({ConnectionState.RECONNECTING, ConnectionState.UNREACHABLE, ConnectionState.AUTH_FAILED,
                          ConnectionState.HOST_KEY_CHANGED, ConnectionState.HOST_KEY_UNKNOWN})

WINDOWS: tuple[tuple[str, float], ...] = (("1 min", 60.0), ("10 min", 600.0), ("1 h", 3600.0), ("24 h", 86400.0))
PAGE_HOST, PAGE_OVERVIEW, PAGE_ALERTS, PAGE_PROCESSES = 0, 1, 2, 3


def _segmented(parent: QWidget, labels: list[str], checked: int) -> tuple[QButtonGroup, list[QToolButton]]:
    group = QButtonGroup(parent)
    buttons = []
    for i, label in enumerate(labels):
        button = QToolButton(parent)
        button.setText(label)
        button.setCheckable(True)
        button.setChecked(i == checked)
        button.setAutoRaise(False)
        group.addButton(button, i)
        buttons.append(button)
    return group, buttons


class TelemetryTab(QWidget):
    """Live utilisation, memory, power, temperature and clocks per GPU, with alerts.

    Interface: `TelemetryTab(parent=None, *, hub=None)`, `set_host(context: HostContext | None)`.
    """

    frame_drawn = Signal()  # after a frame that read the store (tests, benchmarks)

    def __init__(self, parent: QWidget | None = None, *, hub: TelemetryHub | None = None,
                 fps: float = DEFAULT_FPS) -> None:
        super().__init__(parent)
        self.context: HostContext | None = None
        self.hub: TelemetryHub | None = hub
        self.host: str | None = None
        self.window_s = 600.0
        self.paused = False
        self.reads = 0  # frames that read the store
        self._drawn: tuple[object, ...] | None = None
        self._names: dict[str, str] = {}

        # Toolbar: view | time window, pause | source, SIMULATED | export.
        self.page_group, self.page_buttons = _segmented(self, ["This host", "All hosts", "Alerts", "Processes"],
                                                        PAGE_HOST)
        self.page_group.idClicked.connect(self.show_page)
        self.window_group, window_buttons = _segmented(self, [w[0] for w in WINDOWS], 1)
        self.window_group.idClicked.connect(lambda i: self.set_window(WINDOWS[i][1]))
        for button, (_label, seconds) in zip(window_buttons, WINDOWS, strict=True):
            button.setToolTip(f"Show the last {_label}")
            button.setProperty("window_s", seconds)
        self.pause_button = QPushButton("Pause", self)
        self.pause_button.setCheckable(True)
        self.pause_button.setToolTip("Freeze the graphs (data keeps being recorded)")
        self.pause_button.toggled.connect(self.set_paused)
        self.source_label = muted_label("", self)
        self.sim_badge = Badge(SIM_LABEL, parent=self)
        self.sim_badge.hide()
        self.csv_button = QPushButton("Export CSV…", self)
        self.csv_button.setToolTip("Save this host's history over the shown window as CSV")
        self.csv_button.clicked.connect(self._ask_export_csv)
        self.png_button = QPushButton("Save PNG…", self)
        self.png_button.setToolTip("Save the current view as a PNG image")
        self.png_button.clicked.connect(self._ask_export_view_png)

        self.paused_label = Badge("Paused", "warning", self)
        self.paused_label.setToolTip("The graphs are frozen; samples keep being recorded. Resume to follow them.")
        self.paused_label.hide()

        # Wraps onto a second line in a narrow window instead of crushing the buttons.
        toolbar = FlowLayout(spacing=4)
        for button in self.page_buttons:
            toolbar.addWidget(button)
        toolbar.add_spacing(16)
        for button in window_buttons:
            toolbar.addWidget(button)
        toolbar.add_spacing(8)
        toolbar.addWidget(self.pause_button)
        toolbar.addWidget(self.paused_label)
        toolbar.add_stretch()
        toolbar.addWidget(self.source_label)
        toolbar.addWidget(self.sim_badge)
        toolbar.add_spacing(8)
        toolbar.addWidget(self.csv_button)
        toolbar.addWidget(self.png_button)

        self.status_banner = Banner(BannerKind.INFO, "", self)
        self.status_banner.hide()

        self.cards = HostCards(self)
        # Room for a card header and two metric rows; with the advice strip's line this still fits 900x600.
        self.cards.setMinimumHeight(168)
        self.cards.metric_clicked.connect(self.open_detail)
        self.cards.scrolled.connect(self._invalidate)
        self.detail = DetailPlot(self)
        self.detail.close_requested.connect(self.close_detail)
        self.detail.export_requested.connect(lambda: self._ask_export_png(self.detail.plot_widget))
        self.detail.hide()
        self.host_page = QSplitter(Qt.Orientation.Vertical, self)
        self.host_page.addWidget(self.cards)
        self.host_page.addWidget(self.detail)
        self.host_page.setChildrenCollapsible(False)
        self.host_page.setStretchFactor(0, 3)
        self.host_page.setStretchFactor(1, 2)
        self.overview = OverviewGrid(self)
        self.overview.canvas.tile_clicked.connect(self._on_tile_clicked)
        self.alert_view = AlertLogView(self)
        self.process_table = ProcessTable(self)
        self.body = QStackedWidget(self)
        for page in (self.host_page, self.overview, self.alert_view, self.process_table):
            self.body.addWidget(page)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 8, 0, 0)
        layout.setSpacing(8)
        layout.addLayout(toolbar)
        layout.addWidget(self.status_banner)
        layout.addWidget(self.body, 1)

        self.clock = FrameClock(self, self._on_frame, fps)
        if hub is not None:
            self._attach(hub)

    # --- wiring -----------------------------------------------------------------------------

    def _attach(self, hub: TelemetryHub) -> None:
        self.hub = hub
        hub.alert_changed.connect(self._on_alert_changed)
        self._refresh_alerts()

    def set_host(self, context: HostContext | None) -> None:
        """Show `context`'s host (None: no host) and stream it through the hub."""
        if self.context is not None:
            self.context.session.inventory_changed.disconnect(self._on_inventory)
        self.context = context
        self.host = context.profile.name if context is not None else None
        if context is not None:
            if self.hub is None:
                self._attach(context.hub if context.hub is not None else TelemetryHub(context.bridge, parent=self))
            assert self.hub is not None
            self.hub.watch_session(context.session)
            context.session.inventory_changed.connect(self._on_inventory)
            self._on_inventory(context.session.inventory)
        self.cards.clear()
        self.close_detail()
        session = context.session if context is not None else None
        self.process_table.set_source(context.bridge if context is not None else None,
                                      (lambda: getattr(getattr(session, "connection", None), "runner", None))
                                      if session is not None else None,
                                      workspace=self.hub.workspace if context is not None and self.hub else None,
                                      host=context.profile.name if context is not None else "")
        self._drawn = None
        self._on_frame()

    def _on_inventory(self, inventory: Inventory | None) -> None:
        gpus = getattr(inventory, "gpus", None) or []
        self._names = {str(g.index): g.name for g in gpus}
        for g in gpus:  # a MIG card names its profile and GPU instance: "MIG 1g.10gb · GI 3"
            for d in getattr(g, "mig_devices", None) or []:
                if (mig_name := mig_device_name(d.profile, d.gpu_instance_id)) is not None:
                    self._names[f"{g.index}/mig{d.index}"] = mig_name
        self.cards.set_names(self._names)

    # --- controls ---------------------------------------------------------------------------

    def show_page(self, page: int) -> None:
        """Show page `page` (host, overview, alerts or processes)."""
        self.page_group.button(page).setChecked(True)
        self.body.setCurrentIndex(page)
        self.csv_button.setEnabled(page == PAGE_HOST)
        self._drawn = None
        self._on_frame()

    def set_window(self, seconds: float) -> None:
        """Show the last `seconds` of every graph."""
        self.window_s = seconds
        for button in self.window_group.buttons():
            button.setChecked(button.property("window_s") == seconds)
        self._drawn = None
        self._on_frame(force=True)

    def set_paused(self, paused: bool) -> None:
        """Freeze the graphs (samples are still recorded), or go on."""
        self.paused = paused
        self.pause_button.setChecked(paused)
        self.pause_button.setText("Resume" if paused else "Pause")
        self.detail.set_paused(paused)
        self.paused_label.setVisible(paused)
        if not paused:
            self._drawn = None
            self._on_frame()

    def open_detail(self, key: str, metric: str) -> None:
        """Open the large graph of `metric` for GPU `key`."""
        if self.host is None:
            return
        if self.context is not None:
            self.detail.oom_pct = self.context.profile.alerts.mem_used_pct
        self.detail.show_metric(self.host, key, metric)
        if not self.detail.isVisibleTo(self):
            self.detail.show()
            total = max(self.host_page.height(), 400)
            self.host_page.setSizes([total * 11 // 20, total * 9 // 20])
        self._drawn = None
        self._on_frame(force=True)

    def close_detail(self) -> None:
        """Close the large graph."""
        self.detail.hide()
        self.detail.host = self.detail.key = None

    def _on_tile_clicked(self, host: str, key: str) -> None:
        if host == self.host:
            self.show_page(PAGE_HOST)
            self.open_detail(key, "util_gpu_pct")

    def _invalidate(self) -> None:
        self._drawn = None  # the next tick redraws

    # --- the frame ------------------------------------------------------------------------

    def _on_frame(self, force: bool = False) -> None:
        """Read the store and redraw what changed (called by the frame clock)."""
        hub = self.hub
        if hub is None or (self.paused and not force):
            return
        now = time.time()
        t_from = now - self.window_s
        page = self.body.currentIndex()
        self._update_header(hub)
        store = hub.store
        if page == PAGE_OVERVIEW:
            alerted = {(a.host, a.gpu) for a in hub.active_alerts() if a.gpu is not None}
            if self.overview.canvas.refresh(store, t_from, now, alerted=alerted):  # type: ignore[arg-type]
                self.reads += 1
                self.frame_drawn.emit()
            return
        if page != PAGE_HOST or self.host is None:
            return
        # Redraw when there are new samples or the range has moved by about a pixel.
        step = self.window_s / 600.0
        state = (self.host, store.status(self.host).last_t, round(t_from / step), self.window_s,
                 self.detail.key, self.detail.metric_name, len(hub.active_alerts(self.host)))
        if state == self._drawn and not force:
            return
        self._drawn = state
        self.cards.refresh(store, self.host, t_from, now, names=self._names, alerts=hub.active_alerts(self.host))
        if self.detail.isVisibleTo(self) and self.detail.key is not None:
            self.detail.refresh(store, t_from, now)
        self.reads += 1
        self.frame_drawn.emit()

    def _update_header(self, hub: TelemetryHub) -> None:
        host = self.host
        feed = hub.feed(host) if host is not None else None
        status = hub.store.status(host) if host is not None else None
        simulated = bool(self.context and self.context.profile.simulated) or bool(status and status.simulated)
        self.sim_badge.setVisible(simulated)
        if feed is not None and feed.source:
            source = f"source: {feed.source}"
        else:  # not streamed by this app's hub (yet): the store still knows who wrote the samples
            source = f"source: {status.source}" if status is not None and status.source else ""
        if self.source_label.text() != source:
            self.source_label.setText(source)
        banner = ""
        kind = BannerKind.INFO
        # What the Workspace knows of the host's connection: a host that is down, or connected but
        # silent (stale), shows why in words and greys the readouts (they are the last values).
        record = hub.workspace.host(host) if host is not None else None
        down = record is not None and record.state in _DOWN_STATES
        stale = record is not None and record.stale_s is not None
        if self.cards.isEnabled() == (down or stale):
            self.cards.setEnabled(not (down or stale))
        if host is None:
            banner = ""
        elif record is not None and down:
            banner, kind = f"Telemetry paused: {record.detail or record.status_text}.", BannerKind.WARNING
        elif record is not None and stale:
            banner, kind = f"{record.status_text}: the readouts show the last values.", BannerKind.WARNING
        elif feed is not None and feed.problem:
            banner, kind = f"Telemetry interrupted: {feed.problem}. It resumes when the host is back.", \
                BannerKind.WARNING
        elif status is None or status.last_t is None:
            connected = bool(self.context and self.context.session.state == "connected")
            banner = "Waiting for the first samples…" if connected else "Connect to the host to see live telemetry."
        if banner != self.status_banner.text() or kind is not self.status_banner.kind:
            self.status_banner.set_kind(kind)
            self.status_banner.set_text(banner)
        self.status_banner.setVisible(bool(banner) and self.body.currentIndex() == PAGE_HOST)

    # --- alerts -----------------------------------------------------------------------------

    def _on_alert_changed(self, event: AlertEvent) -> None:
        self.alert_view.apply(event)  # one row added or updated, never a rebuild
        self._update_alert_count()
        self._drawn = None

    def _refresh_alerts(self) -> None:
        if self.hub is None:
            return
        self.alert_view.attach(self.hub.service.alert_log, self.hub.service.alerts)
        self._update_alert_count()

    def _update_alert_count(self) -> None:
        if self.hub is None:
            return
        active = self.hub.active_alerts()
        self.page_buttons[PAGE_ALERTS].setText(f"Alerts ({len(active)})" if active else "Alerts")

    # --- export -----------------------------------------------------------------------------

    def export_csv_to(self, path: Path) -> int:
        """Write the selected host's history over the shown window to `path`; returns rows."""
        if self.hub is None or self.host is None:
            raise GpuwsError("no host selected")
        now = time.time()
        return export_range_csv(self.hub.store, self.host, now - self.window_s, now, path)

    def export_png_to(self, path: Path, widget: QWidget | None = None) -> Path:
        """Save `widget` (default: the current view) as a PNG."""
        target = widget if widget is not None else self.body.currentWidget()
        if target is None:
            raise GpuwsError("nothing to save")
        return export_widget_png(target, path)

    def _ask_export_csv(self) -> None:
        name = f"{self.host or 'telemetry'}-{time.strftime('%Y%m%d-%H%M%S')}.csv"
        path, _ = QFileDialog.getSaveFileName(self, "Export telemetry as CSV", name, "CSV files (*.csv)")
        if path:
            self._report(lambda: self.export_csv_to(Path(path)))

    def _ask_export_view_png(self) -> None:
        view = self.body.currentWidget()
        if view is not None:
            self._ask_export_png(view)

    def _ask_export_png(self, widget: QWidget) -> None:
        name = f"{self.host or 'telemetry'}-{time.strftime('%Y%m%d-%H%M%S')}.png"
        path, _ = QFileDialog.getSaveFileName(self, "Save view as PNG", name, "PNG images (*.png)")
        if path:
            self._report(lambda: self.export_png_to(Path(path), widget))

    def _report(self, action: Callable[[], object]) -> None:
        try:
            action()
        except GpuwsError as exc:
            self.status_banner.set_kind(BannerKind.ERROR)
            self.status_banner.set_text(str(exc))
            self.status_banner.show()
