"""A scroll bar that keeps its last rendering and draws it again while nothing about it changed.

Fusion's scroll bar is expensive to draw (gradients along the whole groove: ~2.5 ms for an
820 px bar on the 2-core reference machine, more than the rest of the overview's chrome), and a
full render of the overview (a screenshot, `QWidget.render`, an expose) redraws it every time.
Its look is a pure function of its style option (geometry, range, position, state, palette),
so the rendering is kept as a pixmap keyed by all of that and reused while the key holds.
While the pointer is over the bar or a button is down, hover and pressed sub-controls (which
the style option does not carry from Python) matter: then it is drawn normally.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QPainter, QPaintEvent, QPixmap
from PySide6.QtWidgets import QScrollBar, QStyle, QStyleOptionSlider, QWidget

_Key = tuple[object, ...]


class CachedScrollBar(QScrollBar):
    """`QScrollBar` drawn from a cached pixmap while idle (pointer away, no button down)."""

    def __init__(self, orientation: Qt.Orientation, parent: QWidget | None = None) -> None:
        super().__init__(orientation, parent)
        self._cached: tuple[_Key, QPixmap] | None = None

    def _style_key(self, opt: QStyleOptionSlider) -> _Key:
        return (
            opt.rect.width(), opt.rect.height(), int(opt.state.value), int(opt.orientation.value),
            opt.minimum, opt.maximum, opt.sliderPosition, opt.sliderValue, opt.pageStep, opt.singleStep,
            opt.upsideDown, opt.palette.cacheKey(), self.devicePixelRatioF(), id(self.style()),
        )

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.underMouse() or self.isSliderDown() or QGuiApplication.mouseButtons() != Qt.MouseButton.NoButton:
            self._cached = None
            super().paintEvent(event)
            return
        opt = QStyleOptionSlider()
        self.initStyleOption(opt)
        opt.subControls = QStyle.SubControl.SC_All
        opt.activeSubControls = QStyle.SubControl.SC_None  # idle: nothing hovered or pressed
        key = self._style_key(opt)
        if self._cached is None or self._cached[0] != key:
            ratio = self.devicePixelRatioF()
            pixmap = QPixmap(self.size() * ratio)
            pixmap.setDevicePixelRatio(ratio)
            pixmap.fill(Qt.GlobalColor.transparent)
            painter = QPainter(pixmap)
            self.style().drawComplexControl(QStyle.ComplexControl.CC_ScrollBar, opt, painter, self)
            painter.end()
            self._cached = (key, pixmap)
        painter = QPainter(self)
        painter.drawPixmap(0, 0, self._cached[1])
        painter.end()
