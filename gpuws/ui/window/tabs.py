"""The detail area: the empty state, the selected host's tabs, and what the tabs tell the window."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from gpuws.core.models import HostProfile
from gpuws.ui.tabs import HostContext
from gpuws.ui.widgets import heading, muted_label
from gpuws.ui.window.base import WindowBase


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



class WindowTabs(WindowBase):
    """Shows the selected host in the tabs (or the empty state) and follows what the tabs report."""

    def _wire_tabs(self) -> None:
        from gpuws.ui.tabs.resize import ResizeTab

        for tab in self.detail.tab_widgets:
            if isinstance(tab, ResizeTab):
                tab.price_changed.connect(self._on_price_changed)
        self.detail.tabs.currentChanged.connect(lambda i: self.settings.setValue("ui/tab", i))

    def show_tab(self, index: int) -> None:
        """Show tab `index` of the host detail (when a host is shown)."""
        if self.stack.currentWidget() is self.detail:
            self.detail.tabs.setCurrentIndex(index)

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

    def _on_price_changed(self, profile: HostProfile) -> None:
        """A resize changed the host's price: the sidebar and the cost meter follow at once."""
        self.sidebar.set_profiles(self.all_profiles())
        self.sidebar.select(profile.name)
        # One new price segment in the ledger, and idle alerts burn money at the new price; the
        # Session tab re-reads the cost when the write lands. Saved already by the resize service
        # (gpuws.app.resize), as the CLI's resize saves it.
        self.workspace.price_changed(profile)

