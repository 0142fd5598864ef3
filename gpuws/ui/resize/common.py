"""Styling shared by the Resize tab's parts: section cards, monospace text, the danger button."""

from __future__ import annotations

from PySide6.QtCore import QEvent
from PySide6.QtGui import QColor, QFont, QFontDatabase, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from gpuws.ui import theme
from gpuws.ui.widgets import Card, heading


def success_colour(palette: QPalette | None = None) -> QColor:
    """Green that reads on light and dark bases (the same pair as 'connected')."""
    return theme.state_colour("connected", palette)


def monospace_font(scale: float = 1.0) -> QFont:
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    if scale != 1.0:
        font.setPointSizeF(font.pointSizeF() * scale)
    return font


def set_text_colour(label: QLabel, colour: QColor) -> None:
    pal = label.palette()
    pal.setColor(QPalette.ColorRole.WindowText, colour)
    label.setPalette(pal)


class Section(Card):
    """A card with a bold title row (extra widgets may sit at its right) and a body layout."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 12, 16, 14)
        outer.setSpacing(10)
        self.title_row = QHBoxLayout()
        self.title_row.setSpacing(8)
        self.title_label = heading(title, 1.1, self)
        self.title_row.addWidget(self.title_label)
        self.title_row.addStretch(1)
        outer.addLayout(self.title_row)
        self.body = QVBoxLayout()
        self.body.setSpacing(8)
        outer.addLayout(self.body)


class DangerButton(QPushButton):
    """A push button filled with the error colour: the one action that destroys something."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        font = QFont(self.font())
        font.setBold(True)
        self.setFont(font)
        self.setMinimumHeight(34)
        self._styling = False
        self._restyle()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and not self._styling:
            self._restyle()

    def _restyle(self) -> None:
        pal = self.palette()
        fill = theme.error_colour(pal)
        text = QColor("#ffffff") if not theme.is_dark(pal) else QColor("#1b0605")
        off = theme.blend(fill, pal.color(QPalette.ColorRole.Window), 0.7)
        # A stylesheet only on this button: Fusion gives no palette role for a "danger" fill.
        self._styling = True  # setting a style sheet may itself announce a palette change
        self.setStyleSheet(
            f"QPushButton {{ background: {fill.name()}; color: {text.name()};"
            f" border: 1px solid {fill.darker(115).name()};"
            " border-radius: 5px; padding: 6px 18px; }"
            f"QPushButton:hover {{ background: {fill.lighter(108).name()}; }}"
            f"QPushButton:disabled {{ background: {off.name()}; color: {theme.muted_text_colour(pal).name()};"
            f" border-color: {off.name()}; }}"
        )
        self._styling = False
