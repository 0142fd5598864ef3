"""About gpuws: version, licence, and what the simulated host is."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from gpuws import __version__
from gpuws.core.simulation import SIM_LABEL
from gpuws.ui.resources import app_icon
from gpuws.ui.widgets import heading, muted_label

ABOUT_TEXT = (
    "A workstation manager for cloud GPU sessions: connect over SSH, see what the GPUs are, "
    "watch them live, benchmark them and resize their slices."
)
SIMULATION_TEXT = (
    f"The demo host is a simulation. Hosts marked {SIM_LABEL} run the gpuws GPU simulator: their "
    "GPUs, telemetry and processes are generated and describe no real hardware."
)


class AboutDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About gpuws")
        self.setMinimumWidth(420)
        icon = QLabel()
        icon.setPixmap(app_icon().pixmap(64, 64))
        icon.setAlignment(Qt.AlignmentFlag.AlignTop)
        text = QVBoxLayout()
        text.addWidget(heading("gpuws", 1.5, self))
        self.version_label = muted_label(f"Version {__version__} · MIT licence", self)
        text.addWidget(self.version_label)
        for body in (ABOUT_TEXT, SIMULATION_TEXT):
            label = QLabel(body)
            label.setWordWrap(True)
            text.addWidget(label)
        self.simulation_text = SIMULATION_TEXT
        top = QHBoxLayout()
        top.setSpacing(16)
        top.addWidget(icon)
        top.addLayout(text, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(buttons)
