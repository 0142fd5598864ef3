"""A bounded-rate repaint clock that runs only while its widget is on screen.

Telemetry widgets never react to samples: they redraw on this clock by reading the store. The
clock ticks at most `fps` times a second and stops when the widget is hidden (another tab, the
window minimised or closed), so a dashboard nobody looks at costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

DEFAULT_FPS = 10.0


class FrameClock(QObject):
    """Calls `on_frame()` at most `fps` times a second while `widget` is visible."""

    def __init__(self, widget: QWidget, on_frame: Callable[[], None], fps: float = DEFAULT_FPS) -> None:
        super().__init__(widget)
        self._widget = widget
        self._on_frame = on_frame
        self._timer = QTimer(self)
        self._timer.setInterval(max(1, round(1000.0 / fps)))
        self._timer.timeout.connect(self._tick)
        self.frames = 0  # ticks delivered, for tests and the frame-rate readout
        widget.installEventFilter(self)
        self._sync()

    @property
    def fps(self) -> float:
        """Frames per second."""
        return 1000.0 / self._timer.interval()

    @property
    def running(self) -> bool:
        """Whether frames tick (the widget is shown)."""
        return self._timer.isActive()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Qt: the widget shown or hidden starts or stops the clock."""
        if watched is self._widget and event.type() in (QEvent.Type.Show, QEvent.Type.Hide):
            self._sync()
        return False

    def _sync(self) -> None:
        # isVisible() is False for a minimised window's children on most platforms and for a tab
        # that is not the current one, which is exactly when painting would be wasted.
        if self._widget.isVisible():
            if not self._timer.isActive():
                self._timer.start()
                self._tick()  # show the current data at once, not one interval later
        else:
            self._timer.stop()

    def _tick(self) -> None:
        if not self._widget.isVisible():
            self._timer.stop()
            return
        if self._widget.window().isMinimized():
            return  # Qt counts a minimised window as visible; nothing would be seen
        self.frames += 1
        self._on_frame()

    def stop(self) -> None:
        """Stop for good (the widget is going away)."""
        self._timer.stop()
        self._widget.removeEventFilter(self)
