"""Colours and small style helpers, always derived from the active QPalette.

Nothing here hard-codes a light-only colour: text and surfaces come from the palette, and the few
semantic colours (status dots, warnings) are chosen in pairs that read on light and dark bases.
"""

from __future__ import annotations

from enum import StrEnum

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleFactory, QStyleOption, QWidget


class ThemeChoice(StrEnum):
    """The window's theme: the system's, light or dark."""
    SYSTEM = "system"
    LIGHT = "light"
    DARK = "dark"


# Status colours per connection state (the values of `ConnectionState`).
# Each pair is (on a light base, on a dark base).
_STATE_COLOURS: dict[str, tuple[str, str]] = {
    "connected": ("#1e8e3e", "#5bd27a"),
    "connecting": ("#b06d00", "#f2b53c"),
    "reconnecting": ("#b06d00", "#f2b53c"),
    "auth_failed": ("#c5221f", "#ff6b63"),
    "host_key_changed": ("#c5221f", "#ff6b63"),
    "host_key_unknown": ("#b06d00", "#f2b53c"),
    "unreachable": ("#c5221f", "#ff6b63"),
    "no_driver": ("#8e24aa", "#d08bf0"),
    "disconnected": ("#80868b", "#9aa0a6"),
}

STATE_LABELS: dict[str, str] = {
    "connected": "Connected",
    "connecting": "Connecting…",
    "reconnecting": "Reconnecting…",
    "auth_failed": "Authentication failed",
    "host_key_changed": "Host key changed",
    "host_key_unknown": "Host key not yet trusted",
    "unreachable": "Unreachable",
    "no_driver": "No NVIDIA driver",
    "disconnected": "Not connected",
}

_WARNING = ("#b06d00", "#f2b53c")
_ERROR = ("#c5221f", "#ff6b63")
_SIMULATED = ("#6a3fb5", "#b69cf5")


def is_dark(palette: QPalette | None = None) -> bool:
    """True when the window background is darker than its text (a dark theme)."""
    pal = palette or QApplication.palette()
    return pal.color(QPalette.ColorRole.Window).lightness() < pal.color(QPalette.ColorRole.WindowText).lightness()


def _pick(pair: tuple[str, str], palette: QPalette | None) -> QColor:
    return QColor(pair[1] if is_dark(palette) else pair[0])


def state_colour(state: str, palette: QPalette | None = None) -> QColor:
    """The colour of a connection state (grey for one it does not know)."""
    return _pick(_STATE_COLOURS.get(state, _STATE_COLOURS["disconnected"]), palette)


def state_label(state: str) -> str:
    """A connection state in words."""
    return STATE_LABELS.get(state, state.replace("_", " ").capitalize())


def warning_colour(palette: QPalette | None = None) -> QColor:
    """The warning colour for `palette` (light or dark)."""
    return _pick(_WARNING, palette)


def error_colour(palette: QPalette | None = None) -> QColor:
    """The error colour for `palette` (light or dark)."""
    return _pick(_ERROR, palette)


def simulated_colour(palette: QPalette | None = None) -> QColor:
    """The colour that marks simulated data for `palette`."""
    return _pick(_SIMULATED, palette)


def muted_text_colour(palette: QPalette | None = None) -> QColor:
    """Secondary text: the text colour blended halfway toward the base."""
    pal = palette or QApplication.palette()
    return blend(pal.color(QPalette.ColorRole.WindowText), pal.color(QPalette.ColorRole.Window), 0.45)


def card_colour(palette: QPalette | None = None) -> QColor:
    """A surface one step off the window background (cards, panels)."""
    pal = palette or QApplication.palette()
    return blend(pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Window), 0.5)


def border_colour(palette: QPalette | None = None) -> QColor:
    """A hairline border colour between the text and the window colour."""
    pal = palette or QApplication.palette()
    return blend(pal.color(QPalette.ColorRole.WindowText), pal.color(QPalette.ColorRole.Window), 0.82)


def tinted(colour: QColor, palette: QPalette | None = None, amount: float = 0.85) -> QColor:
    """`colour` washed toward the window background: a soft fill for banners and badges."""
    pal = palette or QApplication.palette()
    return blend(colour, pal.color(QPalette.ColorRole.Window), amount)


def blend(a: QColor, b: QColor, t: float) -> QColor:
    """Linear mix: t=0 gives a, t=1 gives b."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )


def dark_palette() -> QPalette:
    """A neutral dark palette for the Fusion style (used when the user picks Dark explicitly)."""
    pal = QPalette()
    window, base, text = QColor("#202124"), QColor("#17181a"), QColor("#e8eaed")
    accent = QColor("#5b9cf6")
    roles = {
        QPalette.ColorRole.Window: window,
        QPalette.ColorRole.WindowText: text,
        QPalette.ColorRole.Base: base,
        QPalette.ColorRole.AlternateBase: QColor("#26272a"),
        QPalette.ColorRole.ToolTipBase: QColor("#2d2e31"),
        QPalette.ColorRole.ToolTipText: text,
        QPalette.ColorRole.PlaceholderText: QColor("#8a8d91"),
        QPalette.ColorRole.Text: text,
        QPalette.ColorRole.Button: QColor("#2b2c2f"),
        QPalette.ColorRole.ButtonText: text,
        QPalette.ColorRole.BrightText: QColor("#ff6b63"),
        QPalette.ColorRole.Highlight: accent,
        QPalette.ColorRole.HighlightedText: QColor("#0b0c0d"),
        QPalette.ColorRole.Link: accent,
        QPalette.ColorRole.Light: QColor("#3a3b3e"),
        QPalette.ColorRole.Midlight: QColor("#313235"),
        QPalette.ColorRole.Mid: QColor("#2a2b2e"),
        QPalette.ColorRole.Dark: QColor("#111213"),
        QPalette.ColorRole.Shadow: QColor("#000000"),
    }
    for role, colour in roles.items():
        pal.setColor(role, colour)
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6f7276"))
    return pal


def light_palette() -> QPalette:
    """Fusion's own light palette."""
    style = QStyleFactory.create("Fusion")
    return style.standardPalette() if style is not None else QPalette()


class VisibleIndicatorStyle(QProxyStyle):
    """Fusion, with check box and radio indicators outlined in a colour that shows on dark cards.

    Fusion outlines an indicator with the window colour made darker: on a dark palette that is
    near-black on near-black, and "Stop when idle for" had no visible box at all.
    """

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption, painter: QPainter,
                      widget: QWidget | None = None) -> None:
        """Qt: Fusion's indicator, outlined so it shows on a dark palette."""
        super().drawPrimitive(element, option, painter, widget)
        boxes = (QStyle.PrimitiveElement.PE_IndicatorCheckBox, QStyle.PrimitiveElement.PE_IndicatorRadioButton)
        if element in boxes and is_dark(option.palette):  # type: ignore[attr-defined]
            pal: QPalette = option.palette  # type: ignore[attr-defined]
            rect = QRectF(option.rect).adjusted(0.5, 0.5, -0.5, -0.5)  # type: ignore[attr-defined]
            painter.save()
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(QPen(blend(pal.color(QPalette.ColorRole.WindowText),
                                      pal.color(QPalette.ColorRole.Window), 0.45), 1.2))
            painter.setBrush(QColor(0, 0, 0, 0))
            if element is QStyle.PrimitiveElement.PE_IndicatorRadioButton:
                painter.drawEllipse(rect)
            else:
                painter.drawRoundedRect(rect, 2, 2)
            painter.restore()


def apply_theme(app: QApplication, choice: ThemeChoice, system_palette: QPalette) -> None:
    """Switch the application palette. SYSTEM restores the palette the platform gave us."""
    if choice is ThemeChoice.DARK and not isinstance(app.style(), VisibleIndicatorStyle):
        app.setStyle(VisibleIndicatorStyle(QStyleFactory.create("Fusion")))
    if choice is ThemeChoice.DARK:
        app.setPalette(dark_palette())
    elif choice is ThemeChoice.LIGHT:
        app.setPalette(light_palette())
    else:
        app.setPalette(system_palette)
