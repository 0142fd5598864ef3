"""The main window's size and place on the screen it opens on (issue 27).

The first size is the preferred one shrunk to the screen's available geometry (without the
taskbar or dock); a size and place restored from another, larger monitor are clamped to the
current screen the same way. `fit_rect` is the pure rule; `fit_to_screen` applies it to a window.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

NO_REAL_SCREEN = ("offscreen", "minimal")  # Qt platforms whose "screen" is not one a user sees


@dataclass(frozen=True)
class Rect:
    """A rectangle in screen pixels: left, top, width, height."""

    x: int
    y: int
    width: int
    height: int


def fit_rect(window: Rect, available: Rect, frame: tuple[int, int, int, int] = (0, 0, 0, 0)) -> Rect:
    """`window` (the client area) moved and shrunk so that it and its frame lie within `available`.

    `frame` is the window manager's decoration around the client area: (left, top, right, bottom).
    The size shrinks only where it must; the place moves only where the window would stick out.
    """
    left, top, right, bottom = frame
    width = max(1, min(window.width, available.width - left - right))
    height = max(1, min(window.height, available.height - top - bottom))
    # Keep the frame's left/top edge within the available area, and its right/bottom edge too.
    x = min(max(window.x, available.x + left), available.x + available.width - right - width)
    y = min(max(window.y, available.y + top), available.y + available.height - bottom - height)
    return Rect(x, y, width, height)


def _frame_margins(widget: QWidget) -> tuple[int, int, int, int]:
    frame, inner = widget.frameGeometry(), widget.geometry()
    if not widget.isVisible() or frame == inner:  # not decorated yet: no margins known
        return (0, 0, 0, 0)
    return (inner.left() - frame.left(), inner.top() - frame.top(),
            frame.right() - inner.right(), frame.bottom() - inner.bottom())  # fmt: skip


def available_rect(widget: QWidget) -> Rect | None:
    """The available geometry of the screen the window is on (or opens on); None without one.

    None on the offscreen and minimal platforms too: their screen is a nominal 800x600 nobody
    sees, so a window rendered there (`--screenshot`, tests) keeps the size it was given.
    """
    if QGuiApplication.platformName() in NO_REAL_SCREEN:
        return None
    screen = widget.screen() or QGuiApplication.screenAt(widget.geometry().center()) or (
        QGuiApplication.primaryScreen())
    if screen is None:
        return None
    area: QRect = screen.availableGeometry()
    return Rect(area.x(), area.y(), area.width(), area.height())


def fit_to_screen(widget: QWidget) -> None:
    """Shrink and move the top-level `widget` so that it lies within its screen's available area."""
    available = available_rect(widget)
    if available is None or available.width <= 0 or available.height <= 0:
        return
    margins = _frame_margins(widget)
    inner = widget.geometry()
    fitted = fit_rect(Rect(inner.x(), inner.y(), inner.width(), inner.height()), available, margins)
    if (fitted.width, fitted.height) != (inner.width(), inner.height()):
        widget.resize(fitted.width, fitted.height)
    # Only a place that was set (restored) is moved: a first window is placed by the window manager.
    if widget.testAttribute(Qt.WidgetAttribute.WA_Moved) and (fitted.x, fitted.y) != (inner.x(), inner.y()):
        widget.move(fitted.x - margins[0], fitted.y - margins[1])  # move() places the frame
