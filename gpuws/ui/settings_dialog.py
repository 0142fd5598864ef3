"""Preferences: theme, connecting at start-up, confirmations, telemetry refresh."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gpuws.ui.settings import Preferences
from gpuws.ui.theme import ThemeChoice


class SettingsDialog(QDialog):
    """Edits a copy of `Preferences`; read `preferences()` after it was accepted."""

    def __init__(self, prefs: Preferences, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.theme_combo = QComboBox()
        choices = {ThemeChoice.SYSTEM: "Follow the system", ThemeChoice.LIGHT: "Light", ThemeChoice.DARK: "Dark"}
        for choice, label in choices.items():
            self.theme_combo.addItem(label, choice)
        self.theme_combo.setCurrentIndex(self.theme_combo.findData(prefs.theme))
        self.connect_check = QCheckBox("Connect to all hosts when gpuws opens")
        self.connect_check.setChecked(prefs.connect_on_start)
        self.confirm_check = QCheckBox("Ask before removing a host")
        self.confirm_check.setChecked(prefs.confirm_remove)
        self.refresh_spin = QSpinBox()
        self.refresh_spin.setRange(100, 60_000)
        self.refresh_spin.setSingleStep(250)
        self.refresh_spin.setSuffix(" ms")
        self.refresh_spin.setValue(prefs.refresh_ms)

        form = QFormLayout()
        form.addRow("Theme", self.theme_combo)
        form.addRow("", self.connect_check)
        form.addRow("", self.confirm_check)
        form.addRow("Graph refresh", self.refresh_spin)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)

    def preferences(self) -> Preferences:
        theme = self.theme_combo.currentData()
        return Preferences(
            theme=theme if isinstance(theme, ThemeChoice) else ThemeChoice(str(theme)),
            connect_on_start=self.connect_check.isChecked(),
            confirm_remove=self.confirm_check.isChecked(),
            refresh_ms=self.refresh_spin.value(),
        )
