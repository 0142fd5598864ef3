"""The window's actions, menus and the dialogs they open (add, edit, remove, import, settings, about)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QMessageBox

from gpuws.core.models import HostProfile
from gpuws.ui import theme
from gpuws.ui.about_dialog import AboutDialog
from gpuws.ui.host_dialog import HostDialog
from gpuws.ui.import_dialog import ImportSshConfigDialog
from gpuws.ui.settings import Preferences
from gpuws.ui.settings_dialog import SettingsDialog
from gpuws.ui.window.base import WindowBase


class WindowActions(WindowBase):
    """Menus and shortcuts, and the dialogs behind them."""

    # -- actions --------------------------------------------------------------------------------

    def _make_actions(self) -> None:
        def action(text: str, shortcut: str | QKeySequence.StandardKey | None, slot: Callable[..., object],
                   tip: str = "") -> QAction:
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

    # -- host dialogs ---------------------------------------------------------------------------

    def _host_dialog(self, profile: HostProfile | None = None) -> HostDialog:
        """The host dialog with its keyring check and "Test connection" (issue 16)."""
        from gpuws.core.secrets import unusable_reason
        from gpuws.ui.connection_test import connection_tester

        names = [p.name for p in self.all_profiles()]
        return HostDialog(self, profile=profile, existing_names=names, has_secret=profile is not None,
                          keyring_problem=lambda: unusable_reason(self.secrets.backend),
                          tester=connection_tester(self.bridge, secrets=self.secrets, profiles=self.store))

    def open_add_dialog(self) -> HostDialog:
        """Open the dialog that adds a host; saving it stores the profile and its secret."""
        dialog = self._host_dialog()
        dialog.accepted.connect(lambda: self._save_from(dialog, None))
        return self._open(dialog)

    def open_edit_dialog(self) -> HostDialog | None:
        """Open the dialog that edits the selected host (None for the demo host or no selection)."""
        profile = self.current_profile()
        if profile is None or profile.simulated:
            return None
        dialog = self._host_dialog(profile)
        old = profile.name
        dialog.accepted.connect(lambda: self._save_from(dialog, old))
        return self._open(dialog)

    def _save_from(self, dialog: HostDialog, old_name: str | None) -> None:
        self.save_profile(dialog.result_profile(), old_name, dialog.secret_kind(), dialog.secret())

    def remove_current(self) -> None:
        """Remove the selected host, after asking when the preferences say so."""
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

    def open_import_dialog(self) -> ImportSshConfigDialog:
        """Open the ~/.ssh/config import; the chosen hosts are saved as profiles."""
        dialog = ImportSshConfigDialog(self, existing_names=[p.name for p in self.all_profiles()])
        dialog.accepted.connect(lambda: self._import_profiles(dialog.selected_profiles()))
        return self._open(dialog)

    # -- settings and about ---------------------------------------------------------------------

    def open_settings_dialog(self) -> SettingsDialog:
        """Open the preferences; accepting applies and saves them."""
        dialog = SettingsDialog(self.prefs, self)
        dialog.accepted.connect(lambda: self.apply_preferences(dialog.preferences()))
        return self._open(dialog)

    def apply_preferences(self, prefs: Preferences) -> None:
        """Use `prefs` from now on, save them, and apply their theme."""
        self.prefs = prefs
        prefs.save(self.settings)
        app = QApplication.instance()
        system = app.property("gpuws_system_palette") if app is not None else None
        if isinstance(app, QApplication) and system is not None:
            theme.apply_theme(app, prefs.theme, system)

    def open_about_dialog(self) -> AboutDialog:
        """Open the About box."""
        return self._open(AboutDialog(self))
