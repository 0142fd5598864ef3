"""The host list on the left: one row per host with status dot, GPU summary, price, SIMULATED badge."""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpuws.core.inventory import Inventory
from gpuws.core.models import HostProfile
from gpuws.core.simulation import SIM_LABEL
from gpuws.ui import theme
from gpuws.ui.formatting import gpu_summary, host_address, price_text
from gpuws.ui.widgets import muted_label, plain_tooltip


@dataclass
class SidebarEntry:
    """What one row shows (also what tests read)."""

    name: str
    address: str
    state: str = "disconnected"
    status: str = ""  # the state in words when it says more than the state ("Stale (no data for 9 s)")
    look: str = ""  # the state whose colour the dot and `status` take with it ("": `state`'s)
    summary: str = ""
    price: str = ""
    simulated: bool = False


_ENTRY_ROLE = Qt.ItemDataRole.UserRole + 1
_PAD = 10
_DOT = 10


class _HostDelegate(QStyledItemDelegate):
    """Paints a two-line row: dot + name (+ badge) + price, then GPU summary or state."""

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        """Qt: two text lines and the padding."""
        fm = QFontMetrics(option.font)
        return QSize(220, fm.height() * 2 + _PAD * 2 + 2)

    def paint(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        """Qt: draw a host's row (name, state dot and words, GPUs)."""
        entry = index.data(_ENTRY_ROLE)
        if not isinstance(entry, SidebarEntry):
            return super().paint(painter, option, index)
        painter.save()
        style = option.widget.style() if option.widget is not None else None
        if style is not None:  # background and selection as the platform draws them
            style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, option, painter, option.widget)
        pal: QPalette = option.palette
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        text_role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        text = pal.color(text_role)
        muted = text if selected else theme.muted_text_colour(pal)
        rect: QRect = option.rect.adjusted(_PAD, _PAD, -_PAD, -_PAD)
        fm = QFontMetrics(option.font)
        line_h = fm.height()

        # Status dot, vertically centred on the first line.
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(theme.state_colour(entry.look or entry.state, pal))  # one colour with the words
        painter.drawEllipse(rect.left(), rect.top() + (line_h - _DOT) // 2, _DOT, _DOT)
        x = rect.left() + _DOT + 8

        # Price, right-aligned on the first line.
        right = rect.right()
        if entry.price:
            painter.setPen(muted)
            pw = fm.horizontalAdvance(entry.price)
            painter.drawText(QRect(right - pw, rect.top(), pw, line_h), Qt.AlignmentFlag.AlignVCenter, entry.price)
            right -= pw + 8

        # SIMULATED badge before the price.
        if entry.simulated:
            badge_font = QFont(option.font)
            badge_font.setPointSizeF(max(6.0, option.font.pointSizeF() * 0.72))
            badge_font.setBold(True)
            bfm = QFontMetrics(badge_font)
            bw = bfm.horizontalAdvance(SIM_LABEL) + 10
            bh = bfm.height() + 2
            brect = QRect(right - bw, rect.top() + (line_h - bh) // 2, bw, bh)
            colour = theme.simulated_colour(pal)
            painter.setBrush(theme.tinted(colour, pal, 0.8))
            painter.setPen(colour)
            painter.drawRoundedRect(brect, 4, 4)
            painter.setFont(badge_font)
            painter.drawText(brect, Qt.AlignmentFlag.AlignCenter, SIM_LABEL)
            painter.setFont(option.font)
            right -= bw + 8

        # Name (bold, elided to what is left).
        name_font = QFont(option.font)
        name_font.setBold(True)
        painter.setFont(name_font)
        painter.setPen(text)
        name = QFontMetrics(name_font).elidedText(entry.name, Qt.TextElideMode.ElideRight, max(0, right - x))
        painter.drawText(QRect(x, rect.top(), right - x, line_h), Qt.AlignmentFlag.AlignVCenter, name)

        # Second line: GPU summary when connected, else the state in words.
        painter.setFont(option.font)
        second = entry.summary if entry.state == "connected" and entry.summary else theme.state_label(entry.state)
        if entry.status:  # stale: the last summary is not now
            second = entry.status
            painter.setPen(text if selected else theme.state_colour(entry.look or entry.state, pal))
        elif entry.state not in ("connected", "connecting", "reconnecting", "disconnected"):
            painter.setPen(text if selected else theme.state_colour(entry.state, pal))
        else:
            painter.setPen(muted)
        second = fm.elidedText(second, Qt.TextElideMode.ElideRight, rect.right() - x)
        second_rect = QRect(x, rect.top() + line_h + 2, rect.right() - x, line_h)
        painter.drawText(second_rect, Qt.AlignmentFlag.AlignVCenter, second)
        painter.restore()


class HostSidebar(QWidget):
    """The host list. Emits `host_selected(name)` ("" when nothing is selected)."""

    host_selected = Signal(str)
    host_activated = Signal(str)  # double-click / Enter: reconnect

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._list = QListWidget(self)
        self._list.setObjectName("hostList")
        self._list.setItemDelegate(_HostDelegate(self._list))
        self._list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self._list.setUniformItemSizes(True)
        self._list.setFrameShape(QListWidget.Shape.NoFrame)
        # Rows elide their text to the width they get: never a sideways scroll bar under the hosts.
        self._list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._list.setAccessibleName("Hosts")
        self.add_button = QToolButton(self)
        self.add_button.setText("+")
        self.add_button.setToolTip("Add host (Ctrl+N)")
        self.add_button.setAutoRaise(True)
        header = QHBoxLayout()
        header.setContentsMargins(12, 10, 8, 4)
        header.addWidget(muted_label("HOSTS", self))
        header.addStretch(1)
        header.addWidget(self.add_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(header)
        layout.addWidget(self._list)
        self._list.currentItemChanged.connect(self._on_current_changed)
        self._list.itemActivated.connect(lambda item: self.host_activated.emit(self._entry(item).name))

    # -- public API -----------------------------------------------------------------------------

    def set_profiles(self, profiles: list[HostProfile]) -> None:
        """Show exactly these hosts (keeps states and summaries of hosts already listed)."""
        current = self.current_name()
        old = {e.name: e for e in self.entries()}
        self._list.blockSignals(True)
        self._list.clear()
        for profile in profiles:
            prev = old.get(profile.name)
            entry = SidebarEntry(
                name=profile.name,
                address=host_address(profile),
                state=prev.state if prev else "disconnected",
                status=prev.status if prev else "",
                look=prev.look if prev else "",
                summary=prev.summary if prev else "",
                price=price_text(profile.price_per_hour, profile.currency),
                simulated=profile.simulated,
            )
            item = QListWidgetItem()
            self._store(item, entry)
            self._list.addItem(item)
        self._list.blockSignals(False)
        if current and self.select(current):
            return
        if self._list.count():
            self._list.setCurrentRow(0)
        else:
            self.host_selected.emit("")

    def set_state(self, name: str, state: str, detail: str = "") -> None:
        """Show host `name` in connection `state`, with `detail` as its tooltip."""
        item = self._item(name)
        if item is not None:
            entry = self._entry(item)
            entry.state = state
            self._store(item, entry, detail)

    def set_status(self, name: str, status: str, look: str = "") -> None:
        """Show `status` (e.g. "Stale (no data for 9 s)") instead of the state's label, dot and words
        in the colour of state `look` (the Workspace's `HostRecord.shown_state`); "" clears it."""
        item = self._item(name)
        if item is not None:
            entry = self._entry(item)
            if (entry.status, entry.look) != (status, look):
                entry.status, entry.look = status, look
                self._store(item, entry)

    def set_inventory(self, name: str, inventory: Inventory | None) -> None:
        """Show what GPUs host `name` has (None: not probed yet)."""
        item = self._item(name)
        if item is not None:
            entry = self._entry(item)
            entry.summary = gpu_summary(inventory)
            if inventory is not None and inventory.simulated:
                entry.simulated = True
            self._store(item, entry)

    def entry(self, name: str) -> SidebarEntry | None:
        """What the row of host `name` shows, if it is listed."""
        item = self._item(name)
        return None if item is None else self._entry(item)

    def entries(self) -> list[SidebarEntry]:
        """What every row shows, in order."""
        return [self._entry(self._list.item(i)) for i in range(self._list.count())]

    def current_name(self) -> str:
        """The selected host's name ("" when none is)."""
        item = self._list.currentItem()
        return "" if item is None else self._entry(item).name

    def select(self, name: str) -> bool:
        """Select host `name`; False when it is not listed."""
        item = self._item(name)
        if item is None:
            return False
        self._list.setCurrentItem(item)
        return True

    def list_widget(self) -> QListWidget:
        """The list of hosts itself."""
        return self._list

    # -- internals ------------------------------------------------------------------------------

    def _item(self, name: str) -> QListWidgetItem | None:
        for i in range(self._list.count()):
            item = self._list.item(i)
            if self._entry(item).name == name:
                return item
        return None

    @staticmethod
    def _entry(item: QListWidgetItem) -> SidebarEntry:
        """A copy of the row's entry (change it, then `_store` it back)."""
        entry = item.data(_ENTRY_ROLE)
        assert isinstance(entry, SidebarEntry)
        return replace(entry)

    @staticmethod
    def _store(item: QListWidgetItem, entry: SidebarEntry, detail: str = "") -> None:
        # A fresh copy each time, so the model sees a changed value and repaints the row.
        item.setData(_ENTRY_ROLE, replace(entry))
        # Text for accessibility and keyboard search; the delegate paints the rest.
        item.setText(entry.name)
        tip = f"{entry.name} — {entry.address}\n{theme.state_label(entry.state)}"
        if detail:
            tip += f"\n{detail}"
        if entry.summary:
            tip += f"\n{entry.summary}"
        item.setToolTip(plain_tooltip(tip))  # names, details and GPU names come from hosts and profiles

    def _on_current_changed(self, current: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        self.host_selected.emit("" if current is None else self._entry(current).name)

