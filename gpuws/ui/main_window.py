"""The main window: host sidebar, host detail with tabs, menus, shortcuts and persistence.

All disk and keyring work goes through `AsyncBridge.run_blocking` and all remote work through
`HostSession`, so the GUI thread only ever updates widgets.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Sequence
from typing import Any, TypeVar

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QHBoxLayout,
    QInputDialog,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpuws.app.workspace import Change
from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile, SecretKind
from gpuws.ui import theme
from gpuws.ui.about_dialog import AboutDialog
from gpuws.ui.bridge import AsyncBridge, ask_on_gui_thread
from gpuws.ui.demo import DEMO_NAME, RunningDemo, start_demo
from gpuws.ui.file_problems import FileProblemsBanner
from gpuws.ui.host_detail import HostDetail
from gpuws.ui.host_dialog import HostDialog
from gpuws.ui.hostkey_dialog import HostKeyChoice, HostKeyDialog
from gpuws.ui.import_dialog import ImportSshConfigDialog
from gpuws.ui.resources import app_icon
from gpuws.ui.session_controller import HostSession
from gpuws.ui.settings import Preferences, open_settings
from gpuws.ui.settings_dialog import SettingsDialog
from gpuws.ui.sidebar import HostSidebar
from gpuws.ui.tabs import HostContext
from gpuws.ui.telemetry.hub import TelemetryHub
from gpuws.ui.tray import GpuwsTray, TrayHost
from gpuws.ui.widgets import Banner, BannerKind, heading, muted_label

log = logging.getLogger(__name__)
DialogT = TypeVar("DialogT", bound=QDialog)

_IDLE_CHECK_MS = 10_000  # idle-stop and tray refresh period
_TRAY_COALESCE_MS = 250  # changes this close together refresh the tray once
_SHUTDOWN_WAIT_S = 3.0  # closing connections and the demo server at exit, at most


class EmptyState(QWidget):
    """'No hosts yet' with the three ways to get one."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.add_button = QPushButton("Add host…")
        self.import_button = QPushButton("Import from ~/.ssh/config…")
        self.demo_button = QPushButton("Open demo")
        self.demo_button.setToolTip("Connect to the built-in simulated GPU host")
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        title = heading("No hosts yet", 1.6, self)
        title.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        blurb = muted_label(
            "Add a GPU host you rent, import the hosts you already reach with ssh, "
            "or try gpuws on the built-in simulated host.",
            self,
        )
        blurb.setWordWrap(True)
        blurb.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        blurb.setFixedWidth(460)
        # An aligned item gets its one-line size hint: reserve the wrapped height explicitly.
        blurb.setMinimumHeight(blurb.heightForWidth(460))
        layout.addWidget(title)
        layout.addSpacing(6)
        layout.addWidget(blurb, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addSpacing(16)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for button in (self.add_button, self.import_button, self.demo_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        layout.addStretch(2)


class MainWindow(QMainWindow):
    """The gpuws window. `bridge` must be started; the window never stops it."""

    profiles_loaded = Signal()
    profile_saved = Signal(str)  # a profile (and its secret) reached disk/keyring
    notice_shown = Signal(str)
    demo_ready = Signal(str)  # the demo host's profile name, once it is being connected

    def __init__(
        self,
        bridge: AsyncBridge,
        *,
        store: Any = None,
        secrets: Any = None,
        settings: QSettings | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self._store = store
        self._secrets = secrets
        self.settings = settings or open_settings()
        self.prefs = Preferences.load(self.settings)
        self.profiles: list[HostProfile] = []  # saved ones, as last loaded
        self.sessions: dict[str, HostSession] = {}
        self.demo: RunningDemo | None = None
        self._demo_starting: concurrent.futures.Future[RunningDemo] | None = None
        self._first_load = True
        self._closed = False

        self.setWindowTitle("gpuws")
        self.setWindowIcon(app_icon())
        self.resize(1180, 760)

        self.sidebar = HostSidebar(self)
        self.sidebar.setMinimumWidth(200)  # with the detail's minimum, the window fits 900 px
        self.detail = HostDetail(self)
        from gpuws.ui.tabs.resize import ResizeTab

        for tab in self.detail.tab_widgets:
            if isinstance(tab, ResizeTab):
                tab.price_changed.connect(self._on_price_changed)
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

        self._make_actions()
        self.sidebar.add_button.clicked.connect(self.open_add_dialog)
        self.sidebar.host_selected.connect(self._on_host_selected)
        self.sidebar.host_activated.connect(lambda _name: self.reconnect_current())
        self.detail.reconnect_requested.connect(self.reconnect_current)
        self.detail.edit_requested.connect(self.open_edit_dialog)
        self.detail.review_key_requested.connect(self._review_current_key)
        self.detail.tabs.currentChanged.connect(lambda i: self.settings.setValue("ui/tab", i))
        self.empty.add_button.clicked.connect(self.open_add_dialog)
        self.empty.import_button.clicked.connect(self.open_import_dialog)
        self.empty.demo_button.clicked.connect(self.open_demo)
        # The window's one hub over its Workspace (sessions, feeds, tunnels): every view reads it.
        self.telemetry = TelemetryHub(bridge, parent=self)
        self.workspace = self.telemetry.workspace
        self.tray = self._make_tray()
        # Idle stop, budget stop and the tray read telemetry and cost on a slow clock, never per
        # sample; the policies themselves are the Workspace's (gpuws.app.workspace).
        self._idle_clock = QTimer(self)
        self._idle_clock.setInterval(_IDLE_CHECK_MS)
        self._idle_clock.timeout.connect(self._check_idle_and_tray)
        self._idle_clock.start()
        # The tray follows the Workspace (subscribed once): a state change or a ledger write
        # refreshes it soon, several changes at once only once.
        self._tray_refresh = QTimer(self)
        self._tray_refresh.setSingleShot(True)
        self._tray_refresh.setInterval(_TRAY_COALESCE_MS)
        self._tray_refresh.timeout.connect(self._refresh_costs_and_tray)
        self._unsubscribe_tray = self.workspace.subscribe(self._on_workspace_change)
        self._restore_state()
        self._show_empty_or_detail()
        self.reload_profiles()
        from gpuws.ui.fleet.sidebar import install_fleets  # fleets beside hosts (issue 15)

        self.fleet_view = install_fleets(self)

    # -- telemetry-driven chores: idle stop and the tray ----------------------------------------

    def _make_tray(self) -> GpuwsTray | None:
        if not GpuwsTray.available():
            return None  # offscreen, or a desktop without a tray: the window shows the same warnings
        tray = GpuwsTray(
            open_window=self._raise_window,
            connect_host=lambda name: self.sessions[name].connect_host() if name in self.sessions else None,
            stop_host=self._stop_host_from_tray,
            icon=app_icon(),
            parent=self,
            quit_app=self.quit_app,
        )
        self.telemetry.notifier.set_tray(tray)
        tray.show()
        return tray

    def _raise_window(self) -> None:
        self.showNormal()
        self.raise_()
        self.activateWindow()

    def _stop_host_from_tray(self, name: str) -> None:
        self.sidebar.select(name)
        self.detail.tabs.setCurrentWidget(self.detail.session_tab)
        self._raise_window()

    def _on_workspace_change(self, change: Change, _host: str) -> None:
        if change in (Change.STATE, Change.COST, Change.IDLE, Change.REMOVED) and not self._closed:
            self._tray_refresh.start()

    def _check_idle_and_tray(self) -> None:
        for event in self.workspace.check_idle(time.time()):  # warns; stops the hosts whose settings ask to
            if self.tray is not None:
                self.tray.notify("Idle GPU host", event.message)
        self._refresh_costs_and_tray()

    def _refresh_costs_and_tray(self) -> None:
        """Budget stops for every host (shown or not) and the tray's hosts, from the ledger."""
        now = time.time()
        workspace = self.workspace
        hosts = [(name, session.profile, session.state) for name, session in self.sessions.items()]
        profiles = [profile for _name, profile, _state in hosts]

        def done(costs: dict[str, Any]) -> None:
            for cost in costs.values():
                workspace.enforce_budget(cost)  # stop at 100 % of a budget, shown or not
            if self.tray is not None:
                self.tray.update_hosts([
                    TrayHost(name, state, costs[name].running if name in costs else None,
                             workspace.idle.idle(name), profile.currency or "")
                    for name, profile, state in hosts])

        # The running costs come from the ledger on disk: read it off the GUI thread.
        self.bridge.run_blocking(lambda: workspace.cost_report(profiles, now), done, owner=self)

    # -- stores (created lazily: the keyring is only touched when a secret is) --------------------

    @property
    def store(self) -> Any:
        if self._store is None:
            from gpuws.core.profiles import ProfileStore

            self._store = ProfileStore()
        return self._store

    @property
    def secrets(self) -> Any:
        if self._secrets is None:
            from gpuws.core.secrets import SecretStore

            self._secrets = SecretStore()
        return self._secrets

    # -- actions --------------------------------------------------------------------------------

    def _make_actions(self) -> None:
        def action(text: str, shortcut: str | QKeySequence.StandardKey | None, slot: Any, tip: str = "") -> QAction:
            act = QAction(text, self)
            if shortcut is not None:
                act.setShortcut(QKeySequence(shortcut))
            act.setStatusTip(tip)
            act.triggered.connect(slot)
            self.addAction(act)
            return act

        self.add_action = action("&Add host…", "Ctrl+N", self.open_add_dialog, "Add a GPU host")
        self.import_action = action("&Import from SSH config…", "Ctrl+I", self.open_import_dialog)
        self.demo_action = action("Open &demo host", None, self.open_demo, "Connect to the simulated GPU host")
        self.settings_action = action("&Settings…", "Ctrl+,", self.open_settings_dialog)
        self.quit_action = action("&Quit", "Ctrl+Q", self.quit_app)
        self.reconnect_action = action("&Reconnect", "Ctrl+R", self.reconnect_current, "Connect and probe again")
        self.edit_action = action("&Edit host…", "Ctrl+E", self.open_edit_dialog)
        self.remove_action = action("Re&move host…", None, self.remove_current)
        # Delete only where it cannot eat a keystroke meant for a text field: the host list.
        self.remove_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        self.remove_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.removeAction(self.remove_action)
        self.sidebar.addAction(self.remove_action)
        self.about_action = action("&About gpuws", None, self.open_about_dialog)
        self.tab_actions: list[QAction] = []
        for i in range(self.detail.tabs.count()):
            act = action(self.detail.tabs.tabText(i), f"Ctrl+{i + 1}", lambda _=False, i=i: self.show_tab(i))
            self.tab_actions.append(act)

        menu = self.menuBar()
        file_menu = menu.addMenu("&File")
        for act in (self.add_action, self.import_action, self.demo_action):
            file_menu.addAction(act)
        file_menu.addSeparator()
        file_menu.addAction(self.settings_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        host_menu = menu.addMenu("&Host")
        for act in (self.reconnect_action, self.edit_action, self.remove_action):
            host_menu.addAction(act)
        view_menu = menu.addMenu("&View")
        for act in self.tab_actions:
            view_menu.addAction(act)
        menu.addMenu("&Help").addAction(self.about_action)
        self._update_actions()

    def _update_actions(self) -> None:
        profile = self.current_profile()
        self.reconnect_action.setEnabled(profile is not None)
        self.edit_action.setEnabled(profile is not None and not profile.simulated)
        self.remove_action.setEnabled(profile is not None)

    def show_tab(self, index: int) -> None:
        if self.stack.currentWidget() is self.detail:
            self.detail.tabs.setCurrentIndex(index)

    # -- profiles -------------------------------------------------------------------------------

    def all_profiles(self) -> list[HostProfile]:
        """Saved profiles plus the in-memory demo host (if running), as the sidebar shows them."""
        extra = [self.demo.profile] if self.demo is not None else []
        return [*extra, *self.profiles]

    def current_profile(self) -> HostProfile | None:
        name = self.sidebar.current_name()
        return next((p for p in self.all_profiles() if p.name == name), None)

    def reload_profiles(self) -> None:
        """Read the profile file off the GUI thread, then refresh the sidebar."""
        store = self.store

        def load() -> tuple[list[HostProfile], Any]:
            from gpuws.core.fleet.profiles import FleetStore

            profiles = store.load()
            fleets = FleetStore()  # its problems show in the same banner (fleet view: `gpuws fleet list`)
            fleets.load()
            return profiles, {store.path: store.state.notices(), fleets.path: fleets.state.notices()}

        self.bridge.run_blocking(load, self._on_profiles_loaded, self._on_store_error, owner=self)

    def _on_profiles_loaded(self, result: tuple[list[HostProfile], Any]) -> None:
        profiles, problems = result
        self.profiles = [p for p in profiles if not (self.demo and p.name == DEMO_NAME)]
        self.file_problems.show_problems(problems)
        # Read before syncing: filling the sidebar selects its first row, which is saved too.
        selected = str(self.settings.value("ui/selected", "")) if self._first_load else ""
        self._sync_sessions()
        if self._first_load:
            self._first_load = False
            if selected:
                self.sidebar.select(selected)
            if self.prefs.connect_on_start:
                for profile in self.profiles:
                    self.sessions[profile.name].connect_host()
        self.profiles_loaded.emit()

    def _sync_sessions(self) -> None:
        """One session per listed host: new hosts get one, removed or edited ones are replaced."""
        wanted = {p.name: p for p in self.all_profiles()}
        for name in list(self.sessions):
            session = self.sessions[name]
            if name not in wanted or (wanted[name] != session.profile and not session.profile.simulated):
                self._drop_session(name)
        for name, profile in wanted.items():
            if name not in self.sessions:
                self._add_session(HostSession(profile, self.bridge, parent=self))
        self.sidebar.set_profiles(self.all_profiles())
        for name, session in self.sessions.items():
            self.sidebar.set_state(name, session.state, session.detail)
            self.sidebar.set_inventory(name, session.inventory)
        self._show_empty_or_detail()

    def _add_session(self, session: HostSession) -> None:
        name = session.name
        self.sessions[name] = session
        # Every host streams telemetry and meters its cost while connected, shown or not.
        self.telemetry.watch_session(session)  # reported to the Workspace, which meters its cost
        session.kbdint_prompt = self._kbdint_prompt_for(name)
        session.state_changed.connect(lambda state, detail, n=name: self._on_session_state(n, state, detail))
        session.inventory_changed.connect(lambda inv, n=name: self.sidebar.set_inventory(n, inv))
        session.host_key_unknown.connect(lambda exc, n=name: self._on_unknown_key(n, exc))

    def _drop_session(self, name: str) -> None:
        session = self.sessions.pop(name)
        if self.detail.context is not None and self.detail.context.session is session:
            self.detail.set_host(None)
        session.close()
        session.deleteLater()

    def _on_session_state(self, name: str, state: str, detail: str) -> None:
        self.sidebar.set_state(name, state, detail)

    # -- selection ------------------------------------------------------------------------------

    def _on_host_selected(self, name: str) -> None:
        session = self.sessions.get(name)
        if session is None:
            self.detail.set_host(None)
        else:
            self.detail.set_host(HostContext(session.profile, session, self.bridge, self.telemetry))
            self.settings.setValue("ui/selected", name)
        self._show_empty_or_detail()
        self._update_actions()

    def _show_empty_or_detail(self) -> None:
        has_hosts = bool(self.all_profiles())
        self.stack.setCurrentWidget(self.detail if has_hosts else self.empty)
        self.detail.setEnabled(self.detail.context is not None)

    # -- host actions ---------------------------------------------------------------------------

    def reconnect_current(self) -> None:
        profile = self.current_profile()
        if profile is not None:
            self.sessions[profile.name].connect_host()

    def _dialog_helpers(self) -> dict[str, Any]:
        """Keyring check and "Test connection" for the host dialog (issue 16)."""
        from gpuws.core.secrets import unusable_reason
        from gpuws.ui.connection_test import connection_tester

        return {"keyring_problem": lambda: unusable_reason(self.secrets.backend),
                "tester": connection_tester(self.bridge, secrets=self.secrets, profiles=self.store)}

    def open_add_dialog(self) -> HostDialog:
        dialog = HostDialog(self, existing_names=[p.name for p in self.all_profiles()], **self._dialog_helpers())
        dialog.accepted.connect(lambda: self._save_from(dialog, None))
        return self._open(dialog)

    def open_edit_dialog(self) -> HostDialog | None:
        profile = self.current_profile()
        if profile is None or profile.simulated:
            return None
        names = [p.name for p in self.all_profiles()]
        dialog = HostDialog(self, profile=profile, existing_names=names, has_secret=True, **self._dialog_helpers())
        old = profile.name
        dialog.accepted.connect(lambda: self._save_from(dialog, old))
        return self._open(dialog)

    def _save_from(self, dialog: HostDialog, old_name: str | None) -> None:
        self.save_profile(dialog.result_profile(), old_name, dialog.secret_kind(), dialog.secret())

    def save_profile(
        self, profile: HostProfile, old_name: str | None, kind: SecretKind | None = None, secret: str | None = None
    ) -> None:
        """Add (old_name None) or update a profile, and put its secret in the keyring, off the GUI thread."""
        store = self.store
        secrets = self.secrets if secret is not None or old_name not in (None, profile.name) else None

        def save() -> str:
            if secrets is not None and secret is not None:
                secrets.ensure_usable()  # before writing: never a saved host whose password was dropped
            if old_name is None:
                stored = store.add(profile)
            else:
                stored = store.update(profile, old_name)
                if secrets is not None and old_name != profile.name:
                    secrets.move(old_name, profile.name)
            if secrets is not None and kind is not None and secret is not None:
                secrets.set(stored.name, kind, secret)
            return str(stored.name)

        def done(name: str) -> None:
            self.reload_profiles()
            self.profiles_loaded.connect(self._select_after_load(name))
            self.profile_saved.emit(name)

        def failed(exc: BaseException) -> None:
            self._on_store_error(exc)
            self.reload_profiles()  # whatever was written shows in the sidebar at once

        self.bridge.run_blocking(save, done, failed, owner=self)

    def _on_price_changed(self, profile: HostProfile) -> None:
        """A resize changed the host's price: the sidebar and the cost meter follow at once."""
        self.sidebar.set_profiles(self.all_profiles())
        self.sidebar.select(profile.name)
        # One new price segment in the ledger, and idle alerts burn money at the new price; the
        # Session tab re-reads the cost when the write lands. Saved already by the resize service
        # (gpuws.app.resize), as the CLI's resize saves it.
        self.workspace.price_changed(profile)

    def _select_after_load(self, name: str) -> Any:
        def select() -> None:
            self.profiles_loaded.disconnect(select)
            self.sidebar.select(name)

        return select

    def remove_current(self) -> None:
        profile = self.current_profile()
        if profile is None:
            return
        if self.prefs.confirm_remove:
            box = QMessageBox(
                QMessageBox.Icon.Question,
                "Remove host",
                f"Remove {profile.name}? Its saved password and passphrase are removed from the keyring too.",
                QMessageBox.StandardButton.Cancel,
                self,
            )
            remove = box.addButton("Remove", QMessageBox.ButtonRole.DestructiveRole)
            box.setDefaultButton(QMessageBox.StandardButton.Cancel)
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            name = profile.name

            def clicked(button: object) -> None:
                if button is remove:
                    self.remove_host(name)

            box.buttonClicked.connect(clicked)
            box.open()
            return
        self.remove_host(profile.name)

    def remove_host(self, name: str) -> None:
        """Remove without asking (the confirmation already happened)."""
        if self.demo is not None and name == self.demo.profile.name:
            self._stop_demo()
            self._sync_sessions()
            return
        store, secrets = self.store, self.secrets

        def remove() -> None:
            store.remove(name)
            try:
                secrets.clear_all(name)
            except GpuwsError as exc:  # the profile is gone; a keyring hiccup is only reported
                log.warning("could not clear the secrets of %s: %s", name, exc)

        self.bridge.run_blocking(remove, lambda _: self.reload_profiles(), self._on_store_error, owner=self)

    def open_import_dialog(self) -> ImportSshConfigDialog:
        dialog = ImportSshConfigDialog(self, existing_names=[p.name for p in self.all_profiles()])
        dialog.accepted.connect(lambda: self._import_profiles(dialog.selected_profiles()))
        return self._open(dialog)

    def _import_profiles(self, profiles: Sequence[HostProfile]) -> None:
        store = self.store

        def done(result: Any) -> None:
            rejected = list(getattr(result, "rejected", []))
            if rejected:
                lines = "; ".join(f"{n}: {why}" for n, why in rejected)
                self.show_notice(f"Not imported: {lines}", BannerKind.WARNING)
            self.reload_profiles()

        self.bridge.run_blocking(lambda: store.add_many(list(profiles)), done, self._on_store_error, owner=self)

    def open_settings_dialog(self) -> SettingsDialog:
        dialog = SettingsDialog(self.prefs, self)
        dialog.accepted.connect(lambda: self.apply_preferences(dialog.preferences()))
        return self._open(dialog)

    def apply_preferences(self, prefs: Preferences) -> None:
        self.prefs = prefs
        prefs.save(self.settings)
        from PySide6.QtWidgets import QApplication

        app = QApplication.instance()
        system = app.property("gpuws_system_palette") if app is not None else None
        if isinstance(app, QApplication) and system is not None:
            theme.apply_theme(app, prefs.theme, system)

    def open_about_dialog(self) -> AboutDialog:
        return self._open(AboutDialog(self))

    def _open(self, dialog: DialogT) -> DialogT:
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    # -- host keys and prompts ------------------------------------------------------------------

    def _on_unknown_key(self, name: str, exc: BaseException) -> None:
        if name == self.sidebar.current_name():
            self.review_host_key(name)

    def _review_current_key(self) -> None:
        self.review_host_key(self.sidebar.current_name())

    def review_host_key(self, name: str) -> HostKeyDialog | None:
        """Ask about the unknown key `name`'s last connect met; reconnect as the user decides."""
        session = self.sessions.get(name)
        if session is None or session.host_key_error is None:
            return None
        error = session.host_key_error
        dialog = HostKeyDialog.for_error(error, self)
        key = getattr(error, "key", None)
        if key is None:  # without the key itself only "remember" (accept-new) can trust it
            dialog.once_button.setEnabled(False)
            dialog.once_button.setToolTip("Not available for this host")

        def decided() -> None:
            if dialog.choice is HostKeyChoice.ACCEPT_ONCE and key is not None:
                session.connect_host(known_host_key=key)
            elif dialog.choice is HostKeyChoice.ACCEPT_AND_REMEMBER:
                session.connect_host(accept_new=key is None, known_host_key=key)
                if key is not None:
                    self._remember_key(session.profile, key)

        dialog.finished.connect(lambda _r: decided())
        return self._open(dialog)

    def _remember_key(self, profile: HostProfile, key: Any) -> None:
        def record() -> None:
            from gpuws.remote.hostkeys import KnownHosts

            KnownHosts().record(profile.host, profile.port, key)

        self.bridge.run_blocking(record, None, self._on_store_error, owner=self)

    def _kbdint_prompt_for(self, name: str) -> Any:
        async def prompt(title: str, instructions: str, prompts: Sequence[tuple[str, bool]]) -> list[str] | None:
            return await ask_on_gui_thread(self.bridge, lambda: self._ask_prompts(name, title, instructions, prompts))

        return prompt

    def _ask_prompts(
        self, name: str, title: str, instructions: str, prompts: Sequence[tuple[str, bool]]
    ) -> list[str] | None:
        from gpuws.ui.prompts import login_prompt_text

        answers = []
        session = self.sessions.get(name)
        # Announce it: show the window on the asking host before the prompt appears (issue 16).
        self.sidebar.select(name)
        self._raise_window()
        for text, echo in prompts:
            mode = QLineEdit.EchoMode.Normal if echo else QLineEdit.EchoMode.Password
            window_title, label = login_prompt_text(session.profile if session else None, name, title,
                                                    instructions, text)
            value, ok = QInputDialog.getText(self, window_title, label, mode)
            if not ok:
                return None
            answers.append(value)
        return answers

    # -- demo -----------------------------------------------------------------------------------

    def open_demo(self) -> None:
        """Start the simulated host in-process, list it (not saved), select and connect it."""
        if self.demo is not None:
            self.sidebar.select(self.demo.profile.name)
            return
        self.demo_action.setEnabled(False)
        self.empty.demo_button.setEnabled(False)
        self._demo_starting = self.bridge.run_async(
            start_demo(), self._on_demo_started, self._on_demo_failed, owner=self
        )

    def _on_demo_started(self, demo: RunningDemo) -> None:
        self._demo_starting = None
        if self._closed:  # shutdown() already stopped this server
            return
        self.demo = demo
        self.profiles = [p for p in self.profiles if p.name != DEMO_NAME]  # the demo shadows a saved "demo"
        session = HostSession(
            demo.profile, self.bridge, password=demo.password, known_host_key=demo.known_host_key, parent=self
        )
        if DEMO_NAME in self.sessions:
            self._drop_session(DEMO_NAME)
        self._add_session(session)
        self._sync_sessions()
        self.sidebar.select(DEMO_NAME)
        session.connect_host()
        self.demo_ready.emit(DEMO_NAME)

    def _on_demo_failed(self, exc: BaseException) -> None:
        self.demo_action.setEnabled(True)
        self.empty.demo_button.setEnabled(True)
        self.show_notice(f"Could not start the demo host: {exc}")

    def _stop_demo(self) -> concurrent.futures.Future[Any] | None:
        demo, self.demo = self.demo, None
        if demo is None:
            return None
        if DEMO_NAME in self.sessions:
            self._drop_session(DEMO_NAME)
        self.demo_action.setEnabled(True)
        self.empty.demo_button.setEnabled(True)
        return self.bridge.run_async(demo.server.stop()) if self.bridge.running else None

    # -- notices --------------------------------------------------------------------------------

    def show_notice(self, text: str, kind: BannerKind = BannerKind.ERROR) -> None:
        self.notice.set_kind(kind)
        self.notice.set_text(text)
        self._notice_row.show()
        self.notice_shown.emit(text)

    def hide_notice(self) -> None:
        self._notice_row.hide()

    def _on_store_error(self, exc: BaseException) -> None:
        text = str(exc) if isinstance(exc, GpuwsError) else f"Unexpected error: {type(exc).__name__}: {exc}"
        self.show_notice(text)

    # -- persistence and shutdown ---------------------------------------------------------------

    def _restore_state(self) -> None:
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
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
        self._idle_clock.stop()
        self._tray_refresh.stop()
        self._unsubscribe_tray()
        self.telemetry.notifier.set_tray(None)
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
        self.workspace.close(_SHUTDOWN_WAIT_S)  # ends the open cost sessions: no billing while closed

    def closeEvent(self, event: QCloseEvent) -> None:
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

