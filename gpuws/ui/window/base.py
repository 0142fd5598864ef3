"""What every part of the main window shares: its signals, state, stores and notices."""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, TypeVar

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import QDialog, QMainWindow, QSplitter, QStackedWidget, QWidget

from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile, SecretKind
from gpuws.ui.widgets import Banner, BannerKind

if TYPE_CHECKING:
    from PySide6.QtGui import QAction

    from gpuws.app.workspace import Workspace
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.secrets import SecretStore
    from gpuws.ui.bridge import AsyncBridge
    from gpuws.ui.demo import RunningDemo
    from gpuws.ui.file_problems import FileProblemsBanner
    from gpuws.ui.fleet.view import FleetView
    from gpuws.ui.host_detail import HostDetail
    from gpuws.ui.session_controller import HostSession
    from gpuws.ui.settings import Preferences
    from gpuws.ui.sidebar import HostSidebar
    from gpuws.ui.telemetry.hub import TelemetryHub
    from gpuws.ui.tray import GpuwsTray
    from gpuws.ui.window.tabs import EmptyState

DialogT = TypeVar("DialogT", bound=QDialog)


class WindowBase(QMainWindow):
    """The state and helpers the window's parts share; `gpuws.ui.main_window.MainWindow` builds it."""

    profiles_loaded = Signal()
    profile_saved = Signal(str)  # a profile (and its secret) reached disk/keyring
    notice_shown = Signal(str)
    demo_ready = Signal(str)  # the demo host's profile name, once it is being connected

    bridge: AsyncBridge
    settings: QSettings
    prefs: Preferences
    profiles: list[HostProfile]  # saved ones, as last loaded
    sessions: dict[str, HostSession]
    demo: RunningDemo | None
    _demo_starting: concurrent.futures.Future[RunningDemo] | None
    _store: ProfileStore | None
    _secrets: SecretStore | None
    _first_load: bool
    _closed: bool
    sidebar: HostSidebar
    detail: HostDetail
    empty: EmptyState
    stack: QStackedWidget
    splitter: QSplitter
    notice: Banner
    file_problems: FileProblemsBanner
    _notice_row: QWidget
    telemetry: TelemetryHub
    workspace: Workspace
    tray: GpuwsTray | None
    fleet_view: FleetView
    demo_action: QAction
    reconnect_action: QAction
    edit_action: QAction
    remove_action: QAction

    if TYPE_CHECKING:  # implemented by the other parts; declared here so each part type-checks alone

        def all_profiles(self) -> list[HostProfile]:
            """Saved profiles plus the demo host (`hosts`)."""

        def current_profile(self) -> HostProfile | None:
            """The selected host's profile (`hosts`)."""

        def reload_profiles(self) -> None:
            """Read the profiles again (`hosts`)."""

        def reconnect_current(self) -> None:
            """Connect the selected host again (`hosts`)."""

        def save_profile(self, profile: HostProfile, old_name: str | None, kind: SecretKind | None = None,
                         secret: str | None = None) -> None:
            """Add or update a profile and its secret (`hosts`)."""

        def remove_host(self, name: str) -> None:
            """Remove a host without asking (`hosts`)."""

        def open_demo(self) -> None:
            """Start and select the demo host (`hosts`)."""

        def show_tab(self, index: int) -> None:
            """Show one tab of the detail (`tabs`)."""

        def quit_app(self) -> None:
            """Close every window and end the process (`main_window`)."""

        def _import_profiles(self, profiles: list[HostProfile]) -> None: ...
        def _update_actions(self) -> None: ...
        def _show_empty_or_detail(self) -> None: ...
        def _sync_sessions(self) -> None: ...

    # -- stores (created lazily: the keyring is only touched when a secret is) --------------------

    @property
    def store(self) -> ProfileStore:
        """The profile store (the one given to the window, or the default file)."""
        if self._store is None:
            from gpuws.core.profiles import ProfileStore

            self._store = ProfileStore()
        return self._store

    @property
    def secrets(self) -> SecretStore:
        """The keyring store (the one given to the window, or the OS keyring)."""
        if self._secrets is None:
            from gpuws.core.secrets import SecretStore

            self._secrets = SecretStore()
        return self._secrets

    # -- window helpers ---------------------------------------------------------------------------

    def _raise_window(self) -> None:
        self.showNormal()
        self.raise_()
        self.activateWindow()

    def _open(self, dialog: DialogT) -> DialogT:
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    # -- notices --------------------------------------------------------------------------------

    def show_notice(self, text: str, kind: BannerKind = BannerKind.ERROR) -> None:
        """Show `text` in the banner above the hosts (an error unless `kind` says otherwise)."""
        self.notice.set_kind(kind)
        self.notice.set_text(text)
        self._notice_row.show()
        self.notice_shown.emit(text)

    def hide_notice(self) -> None:
        """Hide the banner (its ✕ button)."""
        self._notice_row.hide()

    def _on_store_error(self, exc: BaseException) -> None:
        text = str(exc) if isinstance(exc, GpuwsError) else f"Unexpected error: {type(exc).__name__}: {exc}"
        self.show_notice(text)
