"""The right-hand side for one host: header (name, address, state), problem panel, and the tabs."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QScrollArea, QTabWidget, QVBoxLayout, QWidget

from gpuws.app.workspace import HostRecord
from gpuws.core.simulation import SIM_LABEL
from gpuws.ui.formatting import host_address
from gpuws.ui.hostkey_dialog import HostKeyChangedPanel
from gpuws.ui.tabs import HostContext, HostTab, create_tabs
from gpuws.ui.tabs.resize import ResizeTab
from gpuws.ui.tabs.session import SessionTab
from gpuws.ui.telemetry.advice_strip import AdviceStrip
from gpuws.ui.widgets import Badge, Banner, BannerKind, StatusPill, heading, muted_label

_HINTS = {
    "auth_failed": "Check the user, key or password (Edit host…), then reconnect.",
    "unreachable": "gpuws keeps trying by itself (Retry now tries at once). Check the address and that "
                   "the instance is running.",
    "no_driver": "Install the NVIDIA driver on the host; gpuws reads nvidia-smi.",
    "host_key_unknown": "Review the host's key fingerprint before trusting it.",
}


class VerticalScroll(QScrollArea):
    """Scrolls its widget up and down only: as wide as the widget needs (the window keeps that room,
    so nothing is cut at the right), as short as the screen allows."""

    def minimumSizeHint(self) -> QSize:
        """Qt: the widget's minimum width (and the scroll bar's), a scroll area's own small height."""
        inner = self.widget()
        width = inner.minimumSizeHint().width() if inner is not None else 0
        return QSize(width + self.verticalScrollBar().sizeHint().width(), super().minimumSizeHint().height())

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Qt: when the widget's layout changes (a tab shows results), so may its minimum width:
        ask the window's layout again, which a scroll area does not do by itself."""
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self.updateGeometry()
        return super().eventFilter(watched, event)


class HostDetail(QWidget):
    """Shows one `HostContext`; emits button requests for the window to act on."""

    reconnect_requested = Signal()
    retry_requested = Signal()  # "Retry now": reach the host at once instead of at the slow pace
    edit_requested = Signal()
    review_key_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.context: HostContext | None = None
        self.title = heading("", 1.45, self)
        self.address = muted_label("", self)
        self.sim_badge = Badge(SIM_LABEL, parent=self)
        self.status = StatusPill(self)
        self.reconnect_button = QPushButton("Reconnect")
        self.reconnect_button.setToolTip("Connect again and re-read the inventory (Ctrl+R)")
        self.reconnect_button.clicked.connect(self.reconnect_requested)
        self.retry_button = QPushButton("Retry now")
        self.retry_button.setToolTip("gpuws keeps trying by itself; this tries at once")
        self.retry_button.clicked.connect(self.retry_requested)
        self.retry_button.hide()
        self.edit_button = QPushButton("Edit…")
        self.edit_button.clicked.connect(self.edit_requested)

        header = QHBoxLayout()
        header.setSpacing(10)
        names = QVBoxLayout()
        names.setSpacing(2)
        title_row = QHBoxLayout()
        title_row.setSpacing(10)
        title_row.addWidget(self.title)
        title_row.addWidget(self.sim_badge)
        title_row.addStretch(1)
        names.addLayout(title_row)
        names.addWidget(self.address)
        header.addLayout(names, 1)
        header.addWidget(self.status)
        header.addSpacing(8)
        header.addWidget(self.reconnect_button)
        header.addWidget(self.edit_button)

        self.key_changed_panel = HostKeyChangedPanel(self)
        self.key_changed_panel.hide()
        self.problem = Banner(BannerKind.ERROR, "", self)
        self.problem.hide()
        self.review_button = QPushButton("Review host key…")
        self.review_button.clicked.connect(self.review_key_requested)
        self.review_button.hide()

        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        # A narrow window scrolls the tab bar instead of cutting tab names (issue 16).
        self.tabs.setUsesScrollButtons(True)
        self.tabs.setElideMode(Qt.TextElideMode.ElideNone)
        self.tab_widgets: list[QWidget] = []
        for title, widget in create_tabs(self):
            self.tabs.addTab(widget, title)
            self.tab_widgets.append(widget)
        # The window feeds the Session tab for every host (cost meter, idle stop), not only the shown one.
        self.session_tab: SessionTab = next(w for w in self.tab_widgets if isinstance(w, SessionTab))
        self.advice_strip = AdviceStrip(self)
        self.advice_strip.resize_requested.connect(self.open_resize)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 16, 20, 8)
        layout.setSpacing(12)
        layout.addLayout(header)
        layout.addWidget(self.key_changed_panel)
        problem_row = QHBoxLayout()
        problem_row.addWidget(self.problem, 1)
        problem_row.addWidget(self.review_button)
        problem_row.addWidget(self.retry_button)
        layout.addLayout(problem_row)
        # The strip and the tabs share a spacing-free column: in a small window the strip folds
        # to nothing and the tabs keep their room (900x600 must fit).
        body = QVBoxLayout()
        body.setSpacing(0)
        body.addWidget(self.advice_strip)
        # The tabs scroll (vertically) rather than make the window taller than its screen: with a
        # banner above them (a profile warning, the advice strip) every view still fits 900x600 (#35).
        self.tabs_scroll = VerticalScroll(self)
        self.tabs_scroll.setWidgetResizable(True)
        self.tabs_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.tabs_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.tabs_scroll.setWidget(self.tabs)
        body.addWidget(self.tabs_scroll, 1)
        layout.addLayout(body, 1)

    def set_host(self, context: HostContext | None) -> None:
        if self.context is not None:
            self.context.session.state_changed.disconnect(self._on_state)
            if self.context.hub is not None:
                self.context.hub.alert_changed.disconnect(self._on_feed_change)
                self.context.hub.host_changed.disconnect(self._on_feed_change)
        self.context = context
        if context is not None:
            context.session.state_changed.connect(self._on_state)
            if context.hub is not None:
                # A telemetry stream that dies (or comes back) raises (or clears) an alert.
                context.hub.alert_changed.connect(self._on_feed_change)
                context.hub.host_changed.connect(self._on_feed_change)  # stale / fresh again
            profile = context.profile
            self.title.setText(profile.name)
            self.address.setText(host_address(profile))
            self.sim_badge.setVisible(profile.simulated)
            self.edit_button.setEnabled(not profile.simulated)
            self._on_state(context.session.state, context.session.detail)
        for widget in self.tab_widgets:
            tab: HostTab = widget  # type: ignore[assignment]
            tab.set_host(context)
        self.advice_strip.set_host(context)

    def open_resize(self, gpu: int, target: str) -> None:
        """Show the Resize tab with GPU `gpu` and `target` chosen (from the advice strip)."""
        resize_tab = next(w for w in self.tab_widgets if isinstance(w, ResizeTab))
        self.tabs.setCurrentWidget(resize_tab)
        resize_tab.show_target(gpu, target)

    def _on_feed_change(self, *_event: object) -> None:
        if self.context is not None:
            self._on_state(self.context.session.state, self.context.session.detail)

    def _feed_problem(self) -> str:
        """Why the host's telemetry stream is down ("" while it runs, or when none is owned)."""
        if self.context is None or self.context.hub is None:
            return ""
        feed = self.context.hub.feed(self.context.profile.name)
        return feed.problem if feed is not None else ""

    def _record(self) -> HostRecord | None:
        """The Workspace's record of the shown host (None when shown without a hub)."""
        if self.context is None or self.context.hub is None:
            return None
        return self.context.hub.workspace.host(self.context.profile.name)

    def _on_state(self, state: str, detail: str) -> None:
        record = self._record()
        problem = self._feed_problem() if state == "connected" else ""
        look, words = record.shown_state if record is not None and state == "connected" else (state, "")
        if words:
            # Never "Connected" while no sample came for three intervals (a frozen host): the
            # Workspace's one shown state, as the sidebar shows it.
            self.status.set_state(look, words)
            self.status.setToolTip("The host stopped sending samples; the readouts show the last values.")
        elif problem:  # never "Connected" while a feed this host owns is dead
            self.status.set_state("reconnecting", "Connected \u2014 telemetry interrupted")
            self.status.setToolTip(problem)
        else:
            self.status.set_state(state)
            # The error's class only in the details; the words are in the banner.
            error = record.link.error if record is not None and record.link is not None else None
            self.status.setToolTip(f"{error.error_class}: {error.reason}" if error and state != "connected" else "")
        session = self.context.session if self.context else None
        inv = session.inventory if session else None
        self.sim_badge.setVisible(bool(self.context and self.context.profile.simulated) or bool(inv and inv.simulated))
        if state == "host_key_changed" and session is not None and session.host_key_error is not None:
            self.key_changed_panel.show_error(session.host_key_error)
        else:
            self.key_changed_panel.hide()
        show_problem = state in _HINTS or (state == "reconnecting" and bool(detail))
        if show_problem:
            kind = BannerKind.WARNING if state in ("reconnecting", "host_key_unknown") else BannerKind.ERROR
            self.problem.set_kind(kind)
            hint = _HINTS.get(state, "")
            self.problem.set_text("\n".join(t for t in (detail, hint) if t))
        self.problem.setVisible(show_problem)
        self.review_button.setVisible(state == "host_key_unknown")
        self.retry_button.setVisible(state in ("unreachable", "reconnecting"))
