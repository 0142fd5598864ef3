"""The cards of one host's devices, in a reflowing grid inside a scroll area."""

from __future__ import annotations

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

    def clear(self) -> None:
        for card in self.cards.values():
            self._grid.removeWidget(card)
            card.deleteLater()
        self.cards = {}
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

        Cards scrolled out of view are skipped (`stale`); scrolling asks for a new frame.
        """
        keys = store.device_keys(host)
        if list(self.cards) != keys:
            self._rebuild(keys, names or {})
        latest = store.latest(host)
        by_key: dict[str | None, list[Alert]] = {}
        for alert in alerts:
            by_key.setdefault(alert.gpu, []).append(alert)
        for key, card in self.cards.items():
            if card.visibleRegion().isEmpty() and not force_all:
                card.stale = True  # scrolled away: updated when it comes back into view
                continue
            card.stale = False
            try:
                window = store.window(host, key, t_from, t_to)
            except KeyError:  # forgotten meanwhile (host removed): the next frame rebuilds
                window = None
            card.update_view(latest.get(key), window, t_from, t_to, by_key.get(key, ()))

    def set_names(self, names: Mapping[str, str]) -> None:
        for key, card in self.cards.items():
            card.set_name(names.get(key))

    def _rebuild(self, keys: Sequence[str], names: Mapping[str, str]) -> None:
        self.clear()
        for key in keys:
            card = GpuCard(key, names.get(key), self._body)
            card.metric_clicked.connect(self.metric_clicked)
            self.cards[key] = card
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
