"""A layout that wraps its widgets onto more lines when the width runs out (toolbars at 900 px).

Qt has no wrapping layout; this is the classic "flow layout" with height-for-width, so a toolbar
in a narrow window takes two lines instead of crushing its buttons to "T…t".
"""

from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QSizePolicy, QSpacerItem, QWidget


class FlowLayout(QLayout):
    """Items left to right, wrapping to a new line; `add_stretch` pushes what follows right."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 4) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._breaks: set[int] = set()  # item indexes after which the rest of the line is right-aligned
        self.setSpacing(spacing)
        self.setContentsMargins(QMargins(0, 0, 0, 0))

    def addItem(self, item: QLayoutItem) -> None:
        """Qt: append an item."""
        self._items.append(item)

    def add_stretch(self) -> None:
        """Widgets added after this go to the right end of their line (when they fit on it)."""
        self._breaks.add(len(self._items))

    def add_spacing(self, width: int) -> None:
        """Append a fixed gap of `width` pixels."""
        self.addItem(QSpacerItem(width, 1, QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Minimum))

    def count(self) -> int:
        """Qt: the number of items."""
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # type: ignore[override]
        """Qt: the item at `index`, or None."""
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # type: ignore[override]
        """Qt: remove and return the item at `index`, or None."""
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        """Qt: the layout never asks for more room than its items need."""
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        """Qt: the height depends on the width (items wrap)."""
        return True

    def heightForWidth(self, width: int) -> int:
        """Qt: the height the items take when wrapped at `width`."""
        return self._do_layout(QRect(0, 0, width, 0), apply=False)

    def setGeometry(self, rect: QRect) -> None:
        """Qt: place the items in `rect`, wrapping rows."""
        super().setGeometry(rect)
        self._do_layout(rect, apply=True)

    def sizeHint(self) -> QSize:
        """Qt: every item on one row."""
        width = sum(i.sizeHint().width() for i in self._items) + self.spacing() * max(0, len(self._items) - 1)
        height = max((i.sizeHint().height() for i in self._items), default=0)
        return QSize(width, height)

    def minimumSize(self) -> QSize:
        """Qt: room for the largest item plus the margins."""
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        return size

    def _visible(self) -> list[tuple[int, QLayoutItem]]:
        shown = []
        for i, item in enumerate(self._items):
            widget = item.widget()
            if widget is None or not widget.isHidden():
                shown.append((i, item))
        return shown

    def _do_layout(self, rect: QRect, *, apply: bool) -> int:
        spacing = self.spacing()
        lines: list[list[tuple[int, QLayoutItem]]] = [[]]
        x = 0
        for index, item in self._visible():
            w = item.sizeHint().width()
            if lines[-1] and x + w > rect.width():
                lines.append([])
                x = 0
            lines[-1].append((index, item))
            x += w + spacing
        y = rect.y()
        for line in lines:
            if not line:
                continue
            height = max(item.sizeHint().height() for _, item in line)
            if apply:
                widths = [item.sizeHint().width() for _, item in line]
                used = sum(widths) + spacing * (len(line) - 1)
                # The stretch falls between two items of this line: push the rest to the right.
                split = next((k for k in range(1, len(line))
                              if any(line[k - 1][0] < b <= line[k][0] for b in self._breaks)), None)
                extra = max(0, rect.width() - used) if split is not None else 0
                x = rect.x()
                for k, ((_, item), w) in enumerate(zip(line, widths, strict=True)):
                    if k == split:
                        x += extra
                    h = item.sizeHint().height()
                    item.setGeometry(QRect(QPoint(x, y + (height - h) // 2), QSize(w, h)))
                    x += w + spacing
            y += height + spacing
        return y - rect.y() - spacing if y > rect.y() else 0
