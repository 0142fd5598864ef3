"""The cards of one host's devices, in a reflowing grid inside a scroll area."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QGridLayout, QScrollArea, QWidget

from gpuws.core.telemetry.alerts import Alert
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui.telemetry.gpu_card import GpuCard

CARD_MIN_WIDTH = 430


class HostCards(QScrollArea):
    """One `GpuCard` per device key of a host; `refresh` reads the store and updates them."""

    metric_clicked = Signal(str, str)  # (device key, metric)
    scrolled = Signal()  # other cards came into view: the next frame must update them

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._body = QWidget(self)
        self._grid = QGridLayout(self._body)
        self._grid.setContentsMargins(0, 0, 4, 0)
        self._grid.setSpacing(10)
        self._grid.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.setWidget(self._body)
        self.verticalScrollBar().valueChanged.connect(self.scrolled)
        self.cards: dict[str, GpuCard] = {}
        self._columns = 0
        self._order: list[GpuCard] = []  # cards in grid order
        self._shown: set[str] = set()  # cards updated by the last frame
        self._keys_version: tuple[str, int] | None = None  # (host, store.devices_version) of `cards`

    def clear(self) -> None:
        for card in self.cards.values():
            self._grid.removeWidget(card)
            card.deleteLater()
        self.cards = {}
        self._order = []
        self._shown = set()
        self._keys_version = None
        self._columns = 0

    def refresh(
        self,
        store: TelemetryStore,
        host: str,
        t_from: float,
        t_to: float,
        *,
        names: Mapping[str, str] | None = None,
        alerts: Sequence[Alert] = (),
        force_all: bool = False,
    ) -> None:
        """Read `host`'s newest samples and history over [t_from, t_to] into the cards on screen.

        Cards scrolled out of view are skipped (`stale`); scrolling asks for a new frame. Only the
        cards on screen are looked at, so a frame costs the same for 64 GPUs or 1,024.
        """
        version = (host, store.devices_version)
        if version != self._keys_version:
            keys = store.device_keys(host)
            if list(self.cards) != keys:
                self._rebuild(keys, names or {})
            self._keys_version = version
        latest = store.latest(host)
        by_key: dict[str | None, list[Alert]] = {}
        for alert in alerts:
            by_key.setdefault(alert.gpu, []).append(alert)
        shown = list(self.cards.values()) if force_all else self._on_screen()
        keys_shown = {card.key for card in shown}
        for key in self._shown - keys_shown:
            if key in self.cards:
                self.cards[key].stale = True  # scrolled away: updated when it comes back into view
        self._shown = keys_shown
        for card in shown:
            key = card.key
            card.stale = False
            try:
                window = store.window(host, key, t_from, t_to)
            except KeyError:  # forgotten meanwhile (host removed): the next frame rebuilds
                window = None
            card.update_view(latest.get(key), window, t_from, t_to, by_key.get(key, ()))

    def _on_screen(self) -> list[GpuCard]:
        """The cards (partly) inside the viewport, found from the grid rows' positions."""
        columns = max(1, self._columns)
        order = self._order
        if not order:
            return []
        rows = (len(order) + columns - 1) // columns
        top = self.verticalScrollBar().value()
        bottom = top + self.viewport().height()
        if order[-1].geometry().bottom() <= 0:  # not laid out yet: ask each card
            return [card for card in order if not card.visibleRegion().isEmpty()]

        def row_bottom(r: int) -> int:
            return max(order[i].geometry().bottom() for i in range(r * columns, min(len(order), (r + 1) * columns)))

        def row_top(r: int) -> int:
            return min(order[i].geometry().top() for i in range(r * columns, min(len(order), (r + 1) * columns)))

        first = bisect_left(range(rows), top, key=row_bottom)
        last = bisect_right(range(rows), bottom, key=row_top)
        return order[first * columns : last * columns]

    def set_names(self, names: Mapping[str, str]) -> None:
        for key, card in self.cards.items():
            card.set_name(names.get(key))

    def _rebuild(self, keys: Sequence[str], names: Mapping[str, str]) -> None:
        self.clear()
        for key in keys:
            card = GpuCard(key, names.get(key), self._body)
            card.metric_clicked.connect(self.metric_clicked)
            self.cards[key] = card
        self._order = list(self.cards.values())
        self._reflow(force=True)

    def _reflow(self, *, force: bool = False) -> None:
        columns = max(1, self.viewport().width() // CARD_MIN_WIDTH)
        if columns == self._columns and not force:
            return
        self._columns = columns
        for card in self.cards.values():
            self._grid.removeWidget(card)
        for i, card in enumerate(self.cards.values()):
            self._grid.addWidget(card, i // columns, i % columns)
        for c in range(self._grid.columnCount()):
            self._grid.setColumnStretch(c, 1 if c < columns else 0)
        # Which cards are on screen is known once the layout has run: ask for a frame then.
        QTimer.singleShot(0, self, self.scrolled.emit)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._reflow()
