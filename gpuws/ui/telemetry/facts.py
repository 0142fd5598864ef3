"""The 'key   value' facts under a GPU card's sparklines, painted as one widget.

Twelve labels per card cost more to repaint at 10 fps than the sparklines above them; one widget
drawing cached `QStaticText` layouts does the same job. Long values wrap to the width, and the
widget's height follows (height-for-width), as word-wrapped labels did.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QPointF, QSize, Qt
from PySide6.QtGui import QFontMetrics, QPainter, QPaintEvent, QPalette, QResizeEvent, QStaticText
from PySide6.QtWidgets import QSizePolicy, QWidget

from gpuws.ui import theme
from gpuws.ui.telemetry.metrics import NOT_SUPPORTED

COLUMN_GAP = 12
ROW_GAP = 2


class FactsBlock(QWidget):
    """Rows of a muted key and a wrapping plain-text value; `set_text` changes one value."""

    def __init__(self, keys: Sequence[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._keys = list(keys)
        self._texts = dict.fromkeys(self._keys, NOT_SUPPORTED)
        self._key_texts: list[QStaticText] | None = None
        self._values: dict[str, QStaticText] = {}  # laid out for `_value_width`; dropped on change
        self._value_width = -1
        self._key_column: int | None = None  # width of the key column, for the current font
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def text(self, key: str) -> str:
        """The value shown for `key`."""
        return self._texts[key]

    def set_text(self, key: str, text: str) -> None:
        """Show `text` for `key` (repaints only when it changed)."""
        if self._texts[key] == text:
            return  # unchanged: no relayout, no repaint
        old_height = self._row_height(key)
        self._texts[key] = text
        self._values.pop(key, None)
        if self._row_height(key) != old_height:
            self.updateGeometry()  # wraps to another number of lines
        self.update()

    # --- layout -----------------------------------------------------------------------------

    def _key_width(self) -> int:
        if self._key_column is None:
            fm = QFontMetrics(self.font())
            self._key_column = max(fm.horizontalAdvance(k) for k in self._keys) + COLUMN_GAP
        return self._key_column

    def _value_text(self, key: str, width: int) -> QStaticText:
        if width != self._value_width:
            self._values.clear()
            self._value_width = width
        st = self._values.get(key)
        if st is None:
            st = QStaticText(self._texts[key])
            st.setTextFormat(Qt.TextFormat.PlainText)
            st.setPerformanceHint(QStaticText.PerformanceHint.AggressiveCaching)
            st.setTextWidth(width)
            st.prepare(font=self.font())
            self._values[key] = st
        return st

    def _row_height(self, key: str, width: int | None = None) -> int:
        value_width = max(20, (self.width() if width is None else width) - self._key_width())
        line = QFontMetrics(self.font()).height()
        return max(line, round(self._value_text(key, value_width).size().height()))

    def heightForWidth(self, width: int) -> int:
        """Qt: the height of every row wrapped at `width`."""
        rows = [self._row_height(k, width) for k in self._keys]
        return sum(rows) + ROW_GAP * (len(rows) - 1)

    def hasHeightForWidth(self) -> bool:
        """Qt: values wrap, so the height depends on the width."""
        return True

    def sizeHint(self) -> QSize:
        """Qt: the wrapped height at the current width (300 px at least)."""
        width = max(self.width(), 300)
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        """Qt: the key column and a narrow value column."""
        return QSize(self._key_width() + 60, self.heightForWidth(self._key_width() + 60))

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Qt: a new width re-wraps the values, so the height is asked again."""
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.updateGeometry()  # wrapping, hence height, depends on the width

    def event(self, event: QEvent) -> bool:
        """Qt: a font or palette change drops the cached texts and widths."""
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.PaletteChange):
            self._key_texts, self._key_column = None, None
            self._values.clear()
            self._value_width = -1
        return super().event(event)

    # --- painting ---------------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        """Qt: draw the keys and their values."""
        font = self.font()
        if self._key_texts is None:
            self._key_texts = []
            for key in self._keys:
                st = QStaticText(key)
                st.setTextFormat(Qt.TextFormat.PlainText)
                st.prepare(font=font)
                self._key_texts.append(st)
        pal = self.palette()
        key_width = self._key_width()
        value_width = max(20, self.width() - key_width)
        painter = QPainter(self)
        muted, text = theme.muted_text_colour(pal), pal.color(QPalette.ColorRole.WindowText)
        y = 0
        for key, key_text in zip(self._keys, self._key_texts, strict=True):
            value = self._value_text(key, value_width)
            painter.setPen(muted)
            painter.drawStaticText(QPointF(0, y), key_text)
            painter.setPen(text)
            painter.drawStaticText(QPointF(key_width, y), value)
            y += self._row_height(key) + ROW_GAP
        painter.end()
