"""The remote screen as a Qt widget: paints the session's framebuffer, sends keys, pointer, wheel and
clipboard, and asks the remote desktop to follow its size.

The session decodes on its own thread; this widget is told "a frame is ready" at most once per
paint (`ViewerSession.frame_taken`), takes the changed region under the framebuffer's lock and
repaints just that. JPEG rectangles are decoded by Qt's image reader on the session's thread.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QCursor,
    QFocusEvent,
    QGuiApplication,
    QImage,
    QInputMethodEvent,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPixmap,
    QRegion,
    QResizeEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import QWidget

from gpuws.app.viewer import CursorShape, ViewerEvents, ViewerSession, ViewerState
from gpuws.ui.vnc.keys import keysym_for, text_keysym

RESIZE_DELAY_MS = 300  # the remote desktop follows the window once the user stops dragging its edge
WHEEL_STEP = 120  # Qt's angle delta of one wheel notch


def decode_jpeg(data: bytes, width: int, height: int) -> bytes:
    """Tight's JPEG rectangle with Qt's image reader: B, G, R, X bytes (any thread)."""
    image = QImage()
    if not image.loadFromData(data, "JPEG") or image.isNull():
        raise ValueError("a JPEG rectangle Qt could not read")
    if (image.width(), image.height()) != (width, height):
        raise ValueError(f"a {image.width()}x{image.height()} JPEG in a {width}x{height} rectangle")
    image = image.convertToFormat(QImage.Format.Format_RGB32)
    row = width * 4
    bits = bytes(image.constBits())
    if image.bytesPerLine() == row:
        return bits[: row * height]
    stride = image.bytesPerLine()
    return b"".join(bits[y * stride:y * stride + row] for y in range(height))


class VncView(QWidget):
    """The remote desktop's screen."""

    # Emitted from the session's thread; Qt queues them to this widget's (the GUI) thread.
    _state = Signal(object, str)
    _frame = Signal()
    _cursor = Signal(object)
    _clip = Signal(str)
    _size = Signal(int, int)

    state_changed = Signal(object, str)  # (ViewerState, detail) on the GUI thread
    remote_resized = Signal(int, int)

    def __init__(self, port: int, password: str, parent: QWidget | None = None, *, quality: int | None = 8) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self.setAttribute(Qt.WidgetAttribute.WA_InputMethodEnabled)
        self.setMouseTracking(True)
        self.setMinimumSize(160, 120)
        self.scale_to_window = True
        self.follow_window = True  # ask the remote desktop to take this widget's size
        self.frames_shown = 0
        self._buttons = 0
        self._wheel = [0, 0]
        self._pressed: dict[int, int] = {}  # Qt key (or scan code) -> keysym sent on press
        self._last_clip: str | None = None
        self._image_size = QSize(0, 0)
        self._resize_timer = QTimer(self, singleShot=True, interval=RESIZE_DELAY_MS)
        self._resize_timer.timeout.connect(self._ask_size)
        self._state.connect(self._on_state)
        self._frame.connect(self._on_frame)
        self._cursor.connect(self._on_cursor)
        self._clip.connect(self._on_clip)
        self._size.connect(self._on_size)
        events = ViewerEvents(on_state=self._state.emit, on_frame=self._frame.emit, on_cursor=self._cursor.emit,
                              on_clipboard=self._clip.emit, on_size=self._size.emit)
        self.session = ViewerSession(port, password, events, jpeg=decode_jpeg, quality=quality)
        clipboard = QGuiApplication.clipboard()
        clipboard.dataChanged.connect(self._local_clipboard)

    def start(self) -> None:
        """Connect (on the session's thread)."""
        self.session.start()

    def close_session(self) -> None:
        """Disconnect; the desktop keeps running on the host."""
        QGuiApplication.clipboard().dataChanged.disconnect(self._local_clipboard)
        self.session.close()

    # -- from the session --------------------------------------------------------------------------------

    def _on_state(self, state: ViewerState, detail: str) -> None:
        if state is ViewerState.CONNECTED:
            self._local_clipboard()  # what was copied here before connecting
            if self.follow_window and self.scale_to_window:
                self._resize_timer.start()
        self.state_changed.emit(state, detail)
        self.update()

    def _on_size(self, width: int, height: int) -> None:
        self._image_size = QSize(width, height)
        if not self.scale_to_window:
            self.setFixedSize(self._image_size)
        self.remote_resized.emit(width, height)
        self.update()

    def _on_frame(self) -> None:
        fb = self.session.framebuffer
        if fb is None:
            return
        with fb.lock:
            dirty = fb.take_dirty()
        self.session.frame_taken()
        if dirty is not None:
            self.update(self._to_widget(QRectF(dirty.x, dirty.y, dirty.width, dirty.height)).toAlignedRect()
                        .adjusted(-1, -1, 1, 1))

    def _on_cursor(self, shape: CursorShape) -> None:
        if shape.width == 0 or shape.height == 0:
            self.setCursor(Qt.CursorShape.BlankCursor)
            return
        image = QImage(shape.bgra, shape.width, shape.height, shape.width * 4, QImage.Format.Format_ARGB32).copy()
        self.setCursor(QCursor(QPixmap.fromImage(image), shape.hot_x, shape.hot_y))

    def _on_clip(self, text: str) -> None:
        self._last_clip = text
        clipboard = QGuiApplication.clipboard()
        clipboard.setText(text)
        if clipboard.supportsSelection():
            clipboard.setText(text, clipboard.Mode.Selection)

    def _local_clipboard(self) -> None:
        text = QGuiApplication.clipboard().text()
        if text and text != self._last_clip:
            self._last_clip = text
            self.session.clipboard(text)

    # -- geometry ----------------------------------------------------------------------------------------

    def _target(self) -> QRectF:
        """Where the framebuffer is drawn in this widget."""
        fb_w, fb_h = self._image_size.width(), self._image_size.height()
        if fb_w <= 0 or fb_h <= 0:
            return QRectF()
        if not self.scale_to_window or (fb_w, fb_h) == (self.width(), self.height()):
            return QRectF(0, 0, fb_w, fb_h)
        scale = min(self.width() / fb_w, self.height() / fb_h)
        w, h = fb_w * scale, fb_h * scale
        return QRectF((self.width() - w) / 2, (self.height() - h) / 2, w, h)

    def _to_widget(self, rect: QRectF) -> QRectF:
        target = self._target()
        if target.isEmpty():
            return QRectF(self.rect())
        sx, sy = target.width() / self._image_size.width(), target.height() / self._image_size.height()
        return QRectF(target.x() + rect.x() * sx, target.y() + rect.y() * sy, rect.width() * sx, rect.height() * sy)

    def to_remote(self, point: QPointF) -> tuple[int, int]:
        """A point of this widget in remote framebuffer pixels (clamped to the screen)."""
        target = self._target()
        if target.isEmpty():
            return 0, 0
        x = (point.x() - target.x()) * self._image_size.width() / target.width()
        y = (point.y() - target.y()) * self._image_size.height() / target.height()
        return (max(0, min(int(x), self._image_size.width() - 1)), max(0, min(int(y), self._image_size.height() - 1)))

    def set_scale_to_window(self, scale: bool) -> None:
        """Scale the remote screen to the window (True) or show it 1:1."""
        self.scale_to_window = scale
        if scale:
            self.setMinimumSize(160, 120)
            self.setMaximumSize(16777215, 16777215)
        elif not self._image_size.isEmpty():
            self.setFixedSize(self._image_size)
        self.update()

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Qt: the remote desktop follows the widget's size (after the drag settles)."""
        super().resizeEvent(event)
        if self.follow_window and self.scale_to_window:
            self._resize_timer.start()

    def _ask_size(self) -> None:
        if self.follow_window and self.scale_to_window and self.width() > 0 and self.height() > 0:
            self.session.request_size(self.width(), self.height())

    # -- painting ----------------------------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        """Qt: draw the exposed part of the framebuffer."""
        painter = QPainter(self)
        fb = self.session.framebuffer
        if fb is None or self._image_size.isEmpty():
            painter.fillRect(self.rect(), Qt.GlobalColor.black)
            painter.end()
            return
        target = self._target()
        with fb.lock:
            if (fb.width, fb.height) != (self._image_size.width(), self._image_size.height()):
                painter.fillRect(self.rect(), Qt.GlobalColor.black)  # a new size on its way in
                painter.end()
                return
            image = QImage(fb.pixels.data, fb.width, fb.height, fb.width * 4, QImage.Format.Format_RGB32)
            exposed = QRectF(event.rect()).intersected(target)
            if not exposed.isEmpty():
                sx, sy = fb.width / target.width(), fb.height / target.height()
                source = QRectF((exposed.x() - target.x()) * sx, (exposed.y() - target.y()) * sy,
                                exposed.width() * sx, exposed.height() * sy)
                painter.drawImage(exposed, image, source)
            del image
        inner = target.toAlignedRect()
        if not inner.contains(event.rect()):  # the bands beside a scaled screen
            painter.setClipRegion(QRegion(self.rect()).subtracted(QRegion(inner)))
            painter.fillRect(self.rect(), Qt.GlobalColor.black)
        painter.end()
        self.frames_shown += 1

    # -- input -------------------------------------------------------------------------------------------

    def _pointer(self, point: QPointF) -> None:
        x, y = self.to_remote(point)
        self.session.pointer(self._buttons, x, y)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        """Qt: the pointer moved."""
        self._pointer(event.position())

    def mousePressEvent(self, event: QMouseEvent) -> None:
        """Qt: a button went down (buttons 1-3)."""
        self.setFocus()
        self._buttons |= _button_mask(event.button())
        self._pointer(event.position())

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        """Qt: a button went up."""
        self._buttons &= ~_button_mask(event.button())
        self._pointer(event.position())

    def wheelEvent(self, event: QWheelEvent) -> None:
        """Qt: the wheel, as buttons 4/5 (vertical) and 6/7 (horizontal), one click per notch."""
        x, y = self.to_remote(event.position())
        delta = event.angleDelta()
        for axis, amount, (up, down) in ((0, delta.y(), (8, 16)), (1, delta.x(), (32, 64))):
            self._wheel[axis] += amount
            while abs(self._wheel[axis]) >= WHEEL_STEP:
                bit = up if self._wheel[axis] > 0 else down
                self._wheel[axis] -= WHEEL_STEP if self._wheel[axis] > 0 else -WHEEL_STEP
                self.session.pointer(self._buttons | bit, x, y)
                self.session.pointer(self._buttons, x, y)
        event.accept()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Qt: a key went down (auto-repeat sends it down again, as X does)."""
        keysym = keysym_for(event.key(), event.text(), event.modifiers())
        if keysym is None:
            return
        self._pressed[event.key()] = keysym
        self.session.key(keysym, True)

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        """Qt: a key went up (the same keysym as when it went down)."""
        if event.isAutoRepeat():
            return
        keysym = self._pressed.pop(event.key(), None)
        if keysym is not None:
            self.session.key(keysym, False)

    def inputMethodEvent(self, event: QInputMethodEvent) -> None:
        """Qt: text composed by the local input method (dead keys, compose): typed as its keysyms."""
        for char in event.commitString():
            keysym = text_keysym(char)
            self.session.key(keysym, True)
            self.session.key(keysym, False)
        event.accept()

    def focusNextPrevChild(self, next: bool) -> bool:
        """Qt: Tab belongs to the remote desktop, not to focus changes."""
        return False

    def focusOutEvent(self, event: QFocusEvent) -> None:
        """Qt: release what is held, so no key or button stays down on the remote side."""
        for keysym in self._pressed.values():
            self.session.key(keysym, False)
        self._pressed.clear()
        if self._buttons:
            self._buttons = 0
            self.session.pointer(0, *self.to_remote(QPointF(self.mapFromGlobal(QCursor.pos()))))
        super().focusOutEvent(event)

    def send_keys(self, keysyms: tuple[int, ...]) -> None:
        """Press the keys in order, release them in reverse (Ctrl+Alt+Del and the like)."""
        for keysym in keysyms:
            self.session.key(keysym, True)
        for keysym in reversed(keysyms):
            self.session.key(keysym, False)


def _button_mask(button: Qt.MouseButton) -> int:
    return {Qt.MouseButton.LeftButton: 1, Qt.MouseButton.MiddleButton: 2, Qt.MouseButton.RightButton: 4}.get(button, 0)
