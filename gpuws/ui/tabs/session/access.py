"""The Terminal and files card: the ssh command, a terminal in the host's tmux session, the file browser."""

from __future__ import annotations

import subprocess
import sys

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QWidget,
)

from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.core.terminal import ssh_command_line, terminal_argv
from gpuws.ui.tabs.session.base import SessionBase
from gpuws.ui.widgets import Card, muted_label


class AccessPart(SessionBase):
    """The ssh command, a terminal and the file browser for the shown host."""

    def _access_card(self, parent: QWidget) -> Card:
        card, box = self._card(parent, "Terminal and files")
        self.ssh_label = QLabel("", card)
        self.ssh_label.setWordWrap(True)
        self.ssh_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        font = self.ssh_label.font()
        font.setFamily("monospace")
        self.ssh_label.setFont(font)
        box.addWidget(self.ssh_label)
        row = QHBoxLayout()
        self.terminal_button = QPushButton("Open terminal", card)
        self.terminal_button.setToolTip("Your terminal with `gpuws shell`: inside tmux on the host, so work survives "
                                        "a dropped connection")
        self.terminal_button.clicked.connect(self.open_terminal)
        self.copy_button = QPushButton("Copy ssh command", card)
        self.copy_button.clicked.connect(self.copy_ssh_command)
        self.files_button = QPushButton("Browse files…", card)
        self.files_button.clicked.connect(self.open_files)
        row.addWidget(self.terminal_button)
        row.addWidget(self.copy_button)
        row.addWidget(self.files_button)
        row.addStretch(1)
        box.addLayout(row)
        self.access_status = muted_label("", card)
        self.access_status.setWordWrap(True)
        box.addWidget(self.access_status)
        box.addStretch(1)
        return card

    def _lookup(self, name: str) -> HostProfile:
        from gpuws.core.profiles import ProfileStore

        return ProfileStore().get(name)

    def _show_ssh_command(self) -> None:
        profile = self.profile
        if profile is None:
            self.ssh_label.setText("")
            return
        try:
            self.ssh_label.setText(ssh_command_line(profile, self._lookup))
        except GpuwsError as exc:
            self.ssh_label.setText(str(exc))

    def copy_ssh_command(self) -> None:
        if self.profile is not None:
            QGuiApplication.clipboard().setText(self.ssh_label.text())
            password = getattr(self.context.session, "simulated_password", None) if self.context else None
            # The demo's password is a throwaway for a simulated host on this computer: without it
            # the copied command cannot log in (a real host's password is never shown).
            self.access_status.setText("ssh command copied." + (
                f" The simulated demo host's password is {password}" if password else ""))

    def open_terminal(self) -> None:
        """The user's terminal emulator running `gpuws shell NAME`: tmux on the host, attached again
        after a drop (a plain shell with a warning where the host has no tmux)."""
        if self.profile is None:
            return
        from gpuws.core.desktop import shell_argv

        try:
            argv = terminal_argv(shell_argv(self.profile.name, sys.executable, bool(getattr(sys, "frozen", False))))
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
        except (GpuwsError, OSError) as exc:
            self.access_status.setText(str(exc))

    def open_files(self) -> None:
        connection = self._connection()
        if connection is None or self.context is None:
            return
        from gpuws.ui.file_browser import FileBrowser

        browser = FileBrowser(connection, self.context.bridge)
        browser.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        browser.resize(720, 480)
        browser.show()
        browser.navigate("~")
