"""The Instance card: start and stop the instance through its provider, stop when idle."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from gpuws.app.costs import IdleSettings
from gpuws.core.errors import GpuwsError
from gpuws.ui.tabs.session.base import SessionBase
from gpuws.ui.widgets import Card, muted_label


class InstancePart(SessionBase):
    """Instance start/stop and the idle policy of the shown host."""

    def _instance_card(self, parent: QWidget) -> Card:
        card, box = self._card(parent, "Instance")
        row = QHBoxLayout()
        self.start_button = QPushButton("Start instance", card)
        self.start_button.clicked.connect(lambda: self.power("start"))
        self.stop_button = QPushButton("Stop instance", card)
        self.stop_button.clicked.connect(lambda: self.power("stop"))
        row.addWidget(self.start_button)
        row.addWidget(self.stop_button)
        row.addStretch(1)
        box.addLayout(row)
        idle_row = QHBoxLayout()
        self.idle_check = QCheckBox("Stop when idle for", card)
        self.idle_minutes = QSpinBox(card)
        self.idle_minutes.setRange(1, 1440)
        self.idle_minutes.setValue(30)
        self.idle_minutes.setSuffix(" min")
        self.pre_stop_edit = QLineEdit(card)
        self.pre_stop_edit.setPlaceholderText("pre-stop command on the host, e.g. python save_checkpoint.py")
        # Per host: each host has its own "stop when idle" choice and pre-stop command.
        self.idle_check.toggled.connect(self._remember_auto_stop)
        self.idle_minutes.valueChanged.connect(self._remember_auto_stop)
        self.pre_stop_edit.textChanged.connect(self._remember_auto_stop)
        idle_row.addWidget(self.idle_check)
        idle_row.addWidget(self.idle_minutes)
        idle_row.addWidget(self.pre_stop_edit, 1)
        box.addLayout(idle_row)
        self.instance_status = muted_label("GPUs idle with no session or tunnel in use trigger a warning with "
                                           "the money spent idle.", card)
        self.instance_status.setWordWrap(True)
        box.addWidget(self.instance_status)
        return card

    def _update_power_buttons(self) -> None:
        """Start/stop only with a provider to ask; otherwise say how to add one (issue 16)."""
        profile = self.profile
        provider = profile.provider.kind if profile is not None else None
        usable = profile is not None and bool(provider) and not profile.simulated
        for button in (self.start_button, self.stop_button):
            button.setEnabled(usable)
            button.setToolTip("" if usable else (
                "The demo host has no cloud instance to start or stop" if profile is not None and profile.simulated
                else "No cloud provider is set for this host: add one with Host ▸ Edit… to start and stop it"))

    def _remember_auto_stop(self, *_: object) -> None:
        """The shown host's idle choices go to the Workspace's idle policy (per host)."""
        if self.profile is None or self.workspace is None:
            return
        self.workspace.idle.configure(self.profile.name, IdleSettings(
            stop=self.idle_check.isChecked(), minutes=float(self.idle_minutes.value()),
            pre_stop=self.pre_stop_edit.text()))

    def power(self, action: str) -> None:
        """Start or stop the shown host's instance through the Workspace (its status follows)."""
        if self.context is None or self.workspace is None:
            return
        name = self.context.profile.name
        try:
            self.workspace.power(name, action, pre_stop=self.pre_stop_edit.text())
        except GpuwsError as exc:  # no provider command, a pre-stop line that cannot be split
            self.instance_status.setText(str(exc))
