"""The main window: host sidebar, host detail with tabs, menus, shortcuts and persistence.

The window is assembled from parts, one per responsibility (`gpuws.ui.window`): actions and menus
(`actions`), the host list (`hosts`), the detail tabs (`tabs`) and the tray chores (`tray`). This
module builds the widgets, and saves and restores the window's geometry.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, QSettings, Qt
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QApplication, QHBoxLayout, QSplitter, QStackedWidget, QToolButton, QVBoxLayout, QWidget

from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.file_problems import FileProblemsBanner
from gpuws.ui.host_detail import HostDetail
from gpuws.ui.resources import app_icon
from gpuws.ui.settings import Preferences, open_settings
from gpuws.ui.sidebar import HostSidebar
from gpuws.ui.telemetry.hub import TelemetryHub
from gpuws.ui.widgets import Banner, BannerKind
from gpuws.ui.window.actions import WindowActions
from gpuws.ui.window.hosts import HostList
from gpuws.ui.window.tabs import EmptyState, WindowTabs
from gpuws.ui.window.tray import TrayChores

if TYPE_CHECKING:
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.secrets import SecretStore

__all__ = ["EmptyState", "MainWindow"]

log = logging.getLogger(__name__)

_SHUTDOWN_WAIT_S = 3.0  # closing connections and the demo server at exit, at most


class MainWindow(WindowActions, HostList, WindowTabs, TrayChores):
    """The gpuws window. `bridge` must be started; the window never stops it."""

    def __init__(
        self,
        bridge: AsyncBridge,
        *,
        store: ProfileStore | None = None,
        secrets: SecretStore | None = None,
        settings: QSettings | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self._store = store
        self._secrets = secrets
        self.settings = settings or open_settings()
        self.prefs = Preferences.load(self.settings)
        self.profiles = []  # saved ones, as last loaded
        self.sessions = {}
        self.demo = None
        self._demo_starting = None
        self._first_load = True
        self._closed = False

        self.setWindowTitle("gpuws")
        self.setWindowIcon(app_icon())
        self.resize(1180, 760)

        self.sidebar = HostSidebar(self)
        self.sidebar.setMinimumWidth(200)  # with the detail's minimum, the window fits 900 px
        self.detail = HostDetail(self)
        self.empty = EmptyState(self)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.detail)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(self.stack)
        self.splitter.setStretchFactor(0, 0)  # resizing the window keeps the width the user gave the sidebar
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([280, 900])
        self.splitter.setChildrenCollapsible(False)

        self.notice = Banner(BannerKind.ERROR, "", self)
        self._notice_close = QToolButton(self)
        self._notice_close.setText("✕")
        self._notice_close.setAutoRaise(True)
        self._notice_close.setToolTip("Dismiss")
        self._notice_close.clicked.connect(self.hide_notice)
        self._notice_row = QWidget(self)
        notice_row = QHBoxLayout(self._notice_row)
        notice_row.setContentsMargins(12, 8, 12, 4)
        notice_row.addWidget(self.notice, 1)
        notice_row.addWidget(self._notice_close)
        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self._notice_row)
        self.file_problems = FileProblemsBanner(self)
        layout.addWidget(self.file_problems)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)
        self.hide_notice()

        self._wire_tabs()
        self._make_actions()
        self.sidebar.add_button.clicked.connect(self.open_add_dialog)
        self.sidebar.host_selected.connect(self._on_host_selected)
        self.sidebar.host_activated.connect(lambda _name: self.reconnect_current())
        self.detail.reconnect_requested.connect(self.reconnect_current)
        self.detail.retry_requested.connect(self.retry_current)
        self.detail.edit_requested.connect(self.open_edit_dialog)
        self.detail.review_key_requested.connect(self._review_current_key)
        self.empty.add_button.clicked.connect(self.open_add_dialog)
        self.empty.import_button.clicked.connect(self.open_import_dialog)
        self.empty.demo_button.clicked.connect(self.open_demo)
        # The window's one hub over its Workspace (sessions, feeds, tunnels): every view reads it.
        self.telemetry = TelemetryHub(bridge, parent=self)
        self.workspace = self.telemetry.workspace
        self._start_chores()
        self._restore_state()
        self._show_empty_or_detail()
        self.reload_profiles()
        from gpuws.ui.fleet.sidebar import install_fleets  # fleets beside hosts (issue 15)

        self.fleet_view = install_fleets(self)

    # -- persistence and shutdown ---------------------------------------------------------------

    def _restore_state(self) -> None:
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        from gpuws.ui.geometry import fit_to_screen

        fit_to_screen(self)  # the first size, or one saved on a larger monitor, fits this screen (issue 27)
        state = self.settings.value("window/state")
        if isinstance(state, QByteArray):
            self.restoreState(state)
        splitter = self.settings.value("window/splitter")
        if isinstance(splitter, QByteArray):
            self.splitter.restoreState(splitter)
        try:
            tab = int(str(self.settings.value("ui/tab", 0)))
        except ValueError:
            tab = 0
        self.detail.tabs.setCurrentIndex(min(max(tab, 0), self.detail.tabs.count() - 1))

    def save_state(self) -> None:
        """Save the window's geometry, splitter and current tab to the settings."""
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.settings.setValue("window/splitter", self.splitter.saveState())
        self.settings.setValue("ui/tab", self.detail.tabs.currentIndex())
        self.settings.sync()

    def shutdown(self) -> None:
        """Save UI state, close every connection and stop the demo host (bounded wait). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop_chores()
        self.save_state()
        futures = [f for f in (s.close() for s in self.sessions.values()) if f is not None]
        if (fleet_close := self.fleet_view.close_fleet()) is not None:
            futures.append(fleet_close)
        if (demo_stop := self._stop_demo()) is not None:
            futures.append(demo_stop)
        elif (starting := self._demo_starting) is not None:
            # Closed while the demo server was still starting: stop it once it is up.
            try:
                futures.append(self.bridge.run_async(starting.result(_SHUTDOWN_WAIT_S).server.stop()))
            except Exception:  # it failed to start, or took too long; nothing to stop
                log.debug("demo host did not start before shutdown", exc_info=True)
        concurrent.futures.wait(futures, timeout=_SHUTDOWN_WAIT_S)
        self.workspace.close(timeout=_SHUTDOWN_WAIT_S)  # ends the open cost sessions: no billing while closed

    def closeEvent(self, event: QCloseEvent) -> None:
        """Closing the window shuts it down (connections, demo host, state saved)."""
        self.shutdown()
        super().closeEvent(event)

    def quit_app(self) -> None:
        """Quit (Ctrl+Q, the tray): close every gpuws window (Files too), drop the tray, end the process."""
        self.close()
        for widget in QApplication.topLevelWidgets():
            if widget is not self and widget.isVisible():
                widget.close()
        if self.tray is not None:
            self.tray.hide()
        self.quit_requested = True
        app = QApplication.instance()
        if self.end_process and app is not None:
            app.quit()

    # Whether `quit_app` ends the event loop; tests turn it off (it would end the test run's loop).
    end_process: bool = True
    quit_requested: bool = False

