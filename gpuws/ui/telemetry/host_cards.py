"""The cards of one host's devices, in a reflowing, virtual grid: only the rows on screen have widgets.

A host with 1,024 GPUs must cost the same per frame as one with 64. A grid layout of 1,024 card
widgets does not: Qt lays out, walks and clips every one of them on each paint, even the ones
scrolled away. Here the grid is arithmetic (uniform rows of `columns` cards, `pitch` pixels
apart), the scroll range covers every row, and card widgets exist only for the rows in the
viewport plus a row of margin each side; scrolling re-binds them (a pool) to other devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QAbstractScrollArea, QFrame, QWidget

from gpuws.core.telemetry.alerts import Alert
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui.telemetry.gpu_card import GpuCard

CARD_MIN_WIDTH = 430
SPACING = 10  # between cards, both ways
RIGHT_MARGIN = 4  # room between the last column and the scroll bar
MARGIN_ROWS = 1  # rows of cards kept bound above and below the viewport, ready to scroll in


@dataclass
class _Frame:
    """What the last `refresh` drew from: cards scrolled into view are filled from it at once."""

    store: TelemetryStore
    host: str
    t_from: float
    t_to: float
    alerts: dict[str | None, list[Alert]]


class HostCards(QAbstractScrollArea):
    """One `GpuCard` per device key of a host on screen; `refresh` reads the store and updates them.

    `keys` lists every device of the host in grid order; `cards` maps the devices that have a
    card widget now (the rows on screen and their margin) to it.
    """

    metric_clicked = Signal(str, str)  # (device key, metric)
    scrolled = Signal()  # other cards came into view: the next frame must update them

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.verticalScrollBar().setSingleStep(40)
        self.keys: list[str] = []
        self.cards: dict[str, GpuCard] = {}
        self._free: list[GpuCard] = []  # card widgets bound to no device, hidden
        self._names: dict[str, str] = {}
        self._columns = 1
        self._card_height = 0  # every card's height (the tallest card seen at this width)
        self._shown: set[str] = set()  # cards updated by the last frame
        self._keys_version: tuple[str, int] | None = None  # (host, store.devices_version) of `keys`
        self._last: _Frame | None = None

    # --- the grid's arithmetic -------------------------------------------------------------------

    @property
    def columns(self) -> int:
        """How many cards a row holds at the current width."""
        return self._columns

    def _pitch(self) -> int:
        return self._card_height + SPACING

    def _rows(self) -> int:
        return (len(self.keys) + self._columns - 1) // self._columns

    def _column_width(self) -> int:
        free = self.viewport().width() - RIGHT_MARGIN - SPACING * (self._columns - 1)
        return max(1, free // self._columns)

    def card_rect_top(self, index: int) -> int:
        """Where device `index` (in `keys`) starts, in content coordinates (scroll value 0)."""
        return (index // self._columns) * self._pitch()

    def scroll_to_key(self, key: str) -> None:
        """Scroll so that `key`'s row is at the top (as far as the range allows)."""
        self.verticalScrollBar().setValue(self.card_rect_top(self.keys.index(key)))

    # --- public API --------------------------------------------------------------------------

    def clear(self) -> None:
        """Remove every card (they are kept for reuse)."""
        for card in self.cards.values():
            self._release(card)
        self.cards = {}
        self.keys = []
        self._shown = set()
        self._keys_version = None
        self._last = None
        self._update_range()

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

        Cards in the margin rows are skipped (`stale`); scrolling fills the cards it brings into
        view and asks for a new frame. Only the rows on screen have cards at all, so a frame
        costs the same for 64 GPUs or 1,024. `force_all` also updates the margin rows' cards.
        """
        if names is not None:
            self._names = dict(names)
        version = (host, store.devices_version)
        if version != self._keys_version:
            keys = store.device_keys(host)
            if keys != self.keys:
                self._set_keys(keys)
            self._keys_version = version
        by_key: dict[str | None, list[Alert]] = {}
        for alert in alerts:
            by_key.setdefault(alert.gpu, []).append(alert)
        self._last = _Frame(store, host, t_from, t_to, by_key)
        shown = list(self.cards.values()) if force_all else self._on_screen()
        keys_shown = {card.key for card in shown}
        for key in self._shown - keys_shown:
            if key in self.cards:
                self.cards[key].stale = True  # scrolled away: updated when it comes back into view
        self._shown = keys_shown
        self._update_cards(shown)

    def set_names(self, names: Mapping[str, str]) -> None:
        """Name the cards by key (GPU or MIG device)."""
        self._names = dict(names)
        for key, card in self.cards.items():
            card.set_name(names.get(key))

    # --- binding cards to devices ------------------------------------------------------------

    def _set_keys(self, keys: Sequence[str]) -> None:
        for card in self.cards.values():
            self._release(card)
        self.cards = {}
        self.keys = list(keys)
        self._shown = set()
        self._reflow()

    def _release(self, card: GpuCard) -> None:
        card.hide()
        card.stale = True
        self._free.append(card)

    def _acquire(self, key: str) -> GpuCard:
        if self._free:
            card = self._free.pop()
            card.bind(key, self._names.get(key))
        else:
            card = GpuCard(key, self._names.get(key), self.viewport())
            card.metric_clicked.connect(self.metric_clicked)
        return card

    def _measure(self) -> None:
        """The card height at the current column width, from a card (every card shares it)."""
        width = self._column_width()
        probe = next(iter(self.cards.values()), None)
        if probe is None:
            if not self.keys:
                return
            probe = self._acquire(self.keys[0])
            self._release(probe)
        # Not minimumSizeHint: with word-wrapped facts it is the height at the narrowest width (a
        # word per line), which made every card a third taller than its content, spread as bands.
        fits = probe.heightForWidth(width)
        self._card_height = max(self._card_height, fits if fits > 0 else probe.sizeHint().height())

    def _place(self) -> None:
        """Bind cards to the devices of the rows on screen (+ margin) and put them in place."""
        if not self.keys:
            return
        pitch = self._pitch()
        columns = self._columns
        top = self.verticalScrollBar().value()
        height = self.viewport().height()
        first = max(0, top // pitch - MARGIN_ROWS)
        last = min(self._rows() - 1, (top + height) // pitch + MARGIN_ROWS)
        wanted = self.keys[first * columns : (last + 1) * columns]
        wanted_set = set(wanted)
        for key in [k for k in self.cards if k not in wanted_set]:
            self._release(self.cards.pop(key))
        self._shown &= wanted_set
        width = self._column_width()
        for i, key in enumerate(wanted, start=first * columns):
            card = self.cards.get(key)
            if card is None:
                card = self.cards[key] = self._acquire(key)
            row, column = divmod(i, columns)
            card.setGeometry(column * (width + SPACING), row * pitch - top, width, self._card_height)
            if card.isHidden():
                card.show()
        # `cards` in grid order, as `keys`.
        self.cards = {key: self.cards[key] for key in wanted}

    def _on_screen(self) -> list[GpuCard]:
        """The cards (partly) inside the viewport, from the grid's arithmetic."""
        if not self.keys:
            return []
        pitch = self._pitch()
        top = self.verticalScrollBar().value()
        first = top // pitch
        last = min(self._rows() - 1, (top + self.viewport().height() - 1) // pitch)
        keys = self.keys[first * self._columns : (last + 1) * self._columns]
        return [self.cards[k] for k in keys if k in self.cards]

    def _update_cards(self, cards: Sequence[GpuCard]) -> None:
        frame = self._last
        if frame is None:
            return
        latest = frame.store.latest(frame.host)
        for card in cards:
            key = card.key
            card.stale = False
            try:
                window = frame.store.window(frame.host, key, frame.t_from, frame.t_to)
            except KeyError:  # forgotten meanwhile (host removed): the next frame rebuilds
                window = None
            card.update_view(latest.get(key), window, frame.t_from, frame.t_to, frame.alerts.get(key, ()))
        # A fact that wraps to more lines makes its card taller: every row follows (rows are uniform).
        width = self._column_width()
        tallest = max((card.heightForWidth(width) for card in cards), default=0)
        if tallest > self._card_height:
            self._card_height = tallest
            self._update_range()
            self._place()

    def _update_range(self) -> None:
        bar = self.verticalScrollBar()
        content = max(0, self._rows() * self._pitch() - SPACING)
        bar.setPageStep(max(1, self.viewport().height()))
        bar.setRange(0, max(0, content - self.viewport().height()))

    def _top_key(self) -> str | None:
        """The device at the start of the top row on screen (None before the first layout)."""
        if not self.keys or not self._card_height:
            return None
        index = self.verticalScrollBar().value() // self._pitch() * self._columns
        return self.keys[min(len(self.keys) - 1, index)]

    def _reflow(self, keep: str | None = None) -> None:
        """Columns and card height for the current width; `keep`'s row stays at the top."""
        self._columns = max(1, self.viewport().width() // CARD_MIN_WIDTH)
        self._card_height = 0  # wrapping depends on the width
        self._measure()
        self._update_range()
        if keep is not None and keep in self.keys:
            self.scroll_to_key(keep)
        self._place()
        self._fill_fresh()

    def _fill_fresh(self) -> None:
        """Fill the cards that came on screen (scrolled or resized into view) now, not next frame."""
        fresh = [card for card in self._on_screen() if card.stale or card.key not in self._shown]
        self._shown |= {card.key for card in fresh}
        self._update_cards(fresh)

    # --- Qt events ---------------------------------------------------------------------------

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        """Qt: place the cards for the new scroll position and fill the ones now shown."""
        self._place()
        self._fill_fresh()
        self.scrolled.emit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Qt: re-flow the cards, keeping the top card in view."""
        keep = self._top_key()  # from the geometry before the resize
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._reflow(keep)
        else:
            self._update_range()
            self._place()
            self._fill_fresh()
        self.scrolled.emit()
