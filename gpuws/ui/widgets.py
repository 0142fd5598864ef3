"""Small reusable widgets: cards, banners, badges, key/value grids. Colours come from the palette."""

from __future__ import annotations

import html
from collections.abc import Callable
from enum import StrEnum

from PySide6.QtCore import QEvent, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from gpuws.ui import theme


class Card(QFrame):
    """A rounded surface one step off the window background, with a hairline border."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, False)

    def paintEvent(self, event: QPaintEvent) -> None:
        """Qt: draw the card's rounded surface and its border."""
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        painter.setPen(QPen(theme.border_colour(pal), 1))
        painter.setBrush(theme.card_colour(pal))
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 8, 8)


class BannerKind(StrEnum):
    """What a banner says, which sets its accent colour."""
    INFO = "info"
    SIMULATED = "simulated"
    WARNING = "warning"
    ERROR = "error"


class Banner(QFrame):
    """A full-width message strip: tinted fill, coloured edge, palette text."""

    def __init__(self, kind: BannerKind, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind = kind
        self._label = QLabel(text, self)
        self._label.setWordWrap(True)
        self._label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._label.setTextFormat(Qt.TextFormat.PlainText)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.addWidget(self._label)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)

    def text(self) -> str:
        """The banner's text."""
        return self._label.text()

    def set_text(self, text: str) -> None:
        """Replace the banner's text."""
        self._label.setText(text)

    def set_kind(self, kind: BannerKind) -> None:
        """Change what the banner says (its colour follows)."""
        self.kind = kind
        self.update()

    def accent(self) -> QColor:
        """The colour of the banner's kind in the current palette."""
        pal = self.palette()
        if self.kind is BannerKind.SIMULATED:
            return theme.simulated_colour(pal)
        if self.kind is BannerKind.WARNING:
            return theme.warning_colour(pal)
        if self.kind is BannerKind.ERROR:
            return theme.error_colour(pal)
        return pal.color(pal.ColorRole.Highlight)

    def paintEvent(self, event: QPaintEvent) -> None:
        """Qt: draw the tinted panel with the accent bar."""
        paint_accent_panel(self, self.accent(), border=1.0, tint=0.86, bar=4.0)


def paint_accent_panel(widget: QWidget, accent: QColor, *, border: float, tint: float, bar: float) -> None:
    """A rounded panel tinted with `accent`, with a solid accent bar down its left edge."""
    painter = QPainter(widget)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    rect = QRectF(widget.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
    painter.setPen(QPen(accent, border))
    painter.setBrush(theme.tinted(accent, widget.palette(), tint))
    painter.drawRoundedRect(rect, 6, 6)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(accent)
    painter.drawRoundedRect(QRectF(rect.left(), rect.top(), bar, rect.height()), bar / 2, bar / 2)


def plain_tooltip(text: str) -> str:
    """A tooltip that shows `text` literally. Qt renders a tooltip as rich text whenever it looks
    like HTML, so a host-controlled string (a GPU UUID, an error) is escaped and wrapped."""
    if not text:
        return ""
    return "<p style='white-space:pre-wrap'>" + html.escape(text, quote=False) + "</p>"


def heading(text: str, scale: float = 1.25, parent: QWidget | None = None) -> QLabel:
    """A bold label a little larger than body text."""
    label = QLabel(text, parent)
    font = QFont(label.font())
    font.setBold(True)
    font.setPointSizeF(font.pointSizeF() * scale)
    label.setFont(font)
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


class TintedLabel(QLabel):
    """A plain-text label whose colour is derived from the palette, and re-derived when it changes
    (so switching light/dark never leaves grey-on-grey text behind)."""

    def __init__(
        self, text: str, colour_fn: Callable[[QPalette], QColor], parent: QWidget | None = None
    ) -> None:
        super().__init__(text, parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._colour_fn = colour_fn
        self._applying = False
        self._apply()

    def _apply(self) -> None:
        self._applying = True  # setPalette sends a PaletteChange of its own
        try:
            # The application palette, not the parent's: a hidden parent may not have caught up yet.
            pal = self.palette()
            pal.setColor(QPalette.ColorRole.WindowText, self._colour_fn(QApplication.palette()))
            self.setPalette(pal)
        finally:
            self._applying = False

    def changeEvent(self, event: QEvent) -> None:
        """Qt: re-tint after a palette or parent change."""
        super().changeEvent(event)
        changes = (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange, QEvent.Type.ParentChange)
        if event.type() in changes and not self._applying:
            self._apply()


def muted_label(text: str, parent: QWidget | None = None) -> QLabel:
    """Secondary text in the palette's muted colour."""
    return TintedLabel(text, theme.muted_text_colour, parent)


class KeyValueGrid(QWidget):
    """Rows of 'key   value' with muted keys; values are selectable plain text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._grid.setHorizontalSpacing(18)
        self._grid.setVerticalSpacing(5)
        self._grid.setColumnStretch(1, 1)
        self._values: dict[str, QLabel] = {}

    def add_row(self, key: str, value: str, *, colour: Callable[[QPalette], QColor] | None = None) -> QLabel:
        """Add a row; `colour` (e.g. `theme.warning_colour`) tints the value."""
        row = self._grid.rowCount()
        key_label = muted_label(key, self)
        key_label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        value_label = QLabel(value, self) if colour is None else TintedLabel(value, colour, self)
        value_label.setTextFormat(Qt.TextFormat.PlainText)
        value_label.setWordWrap(True)
        value_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._grid.addWidget(key_label, row, 0)
        self._grid.addWidget(value_label, row, 1)
        self._values[key] = value_label
        return value_label

    def value(self, key: str) -> str | None:
        """The text shown for `key`, or None when there is no such row."""
        label = self._values.get(key)
        return None if label is None else label.text()

    def keys(self) -> list[str]:
        """The row keys, in order."""
        return list(self._values)


def vbox(parent: QWidget, margins: int = 0, spacing: int = 8) -> QVBoxLayout:
    """A vertical layout on `parent` with even margins and spacing."""
    layout = QVBoxLayout(parent)
    layout.setContentsMargins(margins, margins, margins, margins)
    layout.setSpacing(spacing)
    return layout


class Badge(QLabel):
    """A small capitalised tag (e.g. SIMULATED) on a tinted rounded background."""

    def __init__(self, text: str, colour_fn: str = "simulated", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self._colour_fn = colour_fn
        font = QFont(self.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 0.8)
        self.setFont(font)
        self.setContentsMargins(8, 2, 8, 2)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)

    def colour(self) -> QColor:
        """The badge's colour (simulated, warning or error) in the current palette."""
        pal = self.palette()
        return {
            "warning": theme.warning_colour,
            "error": theme.error_colour,
        }.get(self._colour_fn, theme.simulated_colour)(pal)

    def paintEvent(self, event: QPaintEvent) -> None:
        """Qt: draw the tinted rounded tag and its text."""
        colour = self.colour()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(colour, 1))
        painter.setBrush(theme.tinted(colour, self.palette(), 0.8))
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
        painter.setPen(colour)
        painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.text())


class StatusPill(QWidget):
    """A coloured dot and the state in words ('● Connected')."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = "disconnected"
        self.label = QLabel(theme.state_label(self.state), self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(18, 0, 0, 0)  # room for the dot
        layout.addWidget(self.label)

    def set_state(self, state: str, text: str | None = None) -> None:
        """Show `state` (its colour) with its label, or with `text` when given."""
        self.state = state
        self.label.setText(text if text is not None else theme.state_label(state))
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        """Qt: draw the state's coloured dot."""
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(theme.state_colour(self.state, self.palette()))
        size = 10
        painter.drawEllipse(2, (self.height() - size) // 2, size, size)
