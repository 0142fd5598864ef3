"""The host view's frame reads only the cards on screen, however many GPUs the host has.

The grid is virtual: card widgets exist only for the rows on screen (and a margin row), and
scrolling re-binds them to the devices that come into view.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt

from gpuws.core.telemetry.alerts import Alert, AlertKind, Severity
from gpuws.core.telemetry.sample import GpuSample, MigRef
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui.telemetry.gpu_card import GpuCard
from gpuws.ui.telemetry.host_cards import HostCards
from gpuws.ui.telemetry.metrics import percent_text

pytestmark = pytest.mark.gui
T0 = 1_700_000_000.0


class CountingStore(TelemetryStore):
    """A real store that counts history reads."""

    def __init__(self) -> None:
        super().__init__()
        self.window_reads: list[str] = []
        self.key_listings = 0

    def window(self, host: str, key: str, t_from: float, t_to: float, *, tier: str | None = None) -> Any:
        self.window_reads.append(key)
        return super().window(host, key, t_from, t_to, tier=tier)

    def device_keys(self, host: str) -> list[str]:
        self.key_listings += 1
        return super().device_keys(host)


def util_of(gpu: int) -> float:
    return float(gpu % 100)


def filled(gpus: int) -> CountingStore:
    store = CountingStore()
    for k in range(3):
        store.ingest_samples("h", [GpuSample(t=T0 + k, gpu=g, util_gpu_pct=util_of(g)) for g in range(gpus)])
    return store


def shown_cards(cards: HostCards) -> dict[str, GpuCard]:
    return {k: c for k, c in cards.cards.items() if c.isVisible() and not c.visibleRegion().isEmpty()}


def host_cards(qtbot: Any, store: TelemetryStore) -> HostCards:
    cards = HostCards()
    qtbot.addWidget(cards)
    cards.resize(1100, 820)
    cards.show()
    cards.refresh(store, "h", T0 - 60, T0 + 3)
    qtbot.wait(20)
    return cards


def test_a_frame_reads_only_the_cards_on_screen(qtbot: Any) -> None:
    gpus = 96
    store = filled(gpus)
    cards = host_cards(qtbot, store)
    store.window_reads.clear()
    store.key_listings = 0
    cards.refresh(store, "h", T0 - 60, T0 + 3)
    visible = set(shown_cards(cards))
    assert 0 < len(visible) < 12
    assert set(store.window_reads) == visible and len(store.window_reads) == len(visible)
    assert store.key_listings == 0  # the device set did not change: no sorting every key again
    assert all(not cards.cards[k].stale for k in visible)
    assert all(c.stale for k, c in cards.cards.items() if k not in visible)

    # Scrolled to the last card: the cards now on screen are read, the ones left behind have no card.
    cards.verticalScrollBar().setValue(cards.verticalScrollBar().maximum())
    qtbot.wait(20)
    store.window_reads.clear()
    cards.refresh(store, "h", T0 - 60, T0 + 3)
    now_visible = set(shown_cards(cards))
    assert set(store.window_reads) == now_visible and str(gpus - 1) in now_visible
    assert not visible & set(cards.cards)

    # A new device appears: the grid is rebuilt from the store's keys.
    store.ingest_samples("h", [GpuSample(t=T0 + 3, gpu=gpus, util_gpu_pct=1.0)])
    cards.refresh(store, "h", T0 - 60, T0 + 4)
    assert len(cards.keys) == gpus + 1 and cards.keys[-1] == str(gpus)


def test_1024_gpus_have_a_screenful_of_card_widgets_and_scrolling_shows_the_right_gpus(qtbot: Any) -> None:
    gpus = 1024
    store = filled(gpus)
    cards = host_cards(qtbot, store)
    widgets = cards.viewport().findChildren(GpuCard)
    visible = shown_cards(cards)
    assert 0 < len(visible) <= 8
    # A screenful and a margin row each side, never one widget per GPU.
    assert len(widgets) <= len(visible) + 2 * 2 * cards.columns
    assert cards.keys == [str(g) for g in range(gpus)]

    # The scroll range covers every row: the last row ends at the bottom of the viewport.
    bar = cards.verticalScrollBar()
    rows = (gpus + cards.columns - 1) // cards.columns
    pitch = cards.card_rect_top(cards.columns)
    assert bar.maximum() + cards.viewport().height() == rows * pitch - 10

    for target in (500, 1023, 7):
        cards.scroll_to_key(str(target))
        qtbot.wait(10)
        visible = shown_cards(cards)
        assert str(target) in visible
        # Values are shown at once (not after the next frame), each card its own GPU's.
        for key, card in visible.items():
            assert not card.stale
            assert card.rows["util_gpu_pct"].value_text == percent_text(util_of(int(key))), key
            assert card.title.text().startswith(f"GPU {key}")
        cards.refresh(store, "h", T0 - 60, T0 + 3)
        assert all(card.rows["util_gpu_pct"].value_text == percent_text(util_of(int(k)))
                   for k, card in shown_cards(cards).items())
        # Still no more widgets than a screenful: the pool is reused.
        assert len(cards.viewport().findChildren(GpuCard)) <= len(widgets) + 2 * cards.columns


# The sparkline rows do not accept the click (it goes on to the card): Qt warns, harmlessly.
@pytest.mark.qt_log_ignore("Mouse event .* not accepted by receiving widget")
def test_a_pooled_card_forgets_its_previous_device(qtbot: Any) -> None:
    store = filled(200)
    cards = host_cards(qtbot, store)
    oom = Alert(1, "h", "0", AlertKind.OOM_RISK, Severity.CRITICAL, "memory nearly full", T0)
    cards.refresh(store, "h", T0 - 60, T0 + 3, alerts=[oom])
    first = cards.cards["0"]
    assert first.badge_texts() == ["OOM risk"]
    cards.scroll_to_key("150")
    qtbot.wait(10)
    assert "0" not in cards.cards
    assert first.key != "0" and first.badge_texts() == []

    # A click on a re-bound card's plot opens the detail of the device it shows now.
    card = shown_cards(cards)["150"]
    with qtbot.waitSignal(cards.metric_clicked) as clicked:
        qtbot.mouseClick(card.plots, Qt.MouseButton.LeftButton, pos=QPoint(card.plots.width() // 2, 5))
    assert clicked.args == ["150", "util_gpu_pct"]


def test_mig_devices_follow_their_gpu_in_the_grid(qtbot: Any) -> None:
    store = TelemetryStore()
    samples = []
    for g in range(40):
        samples.append(GpuSample(t=T0, gpu=g, util_gpu_pct=util_of(g)))
        if g == 30:
            samples += [GpuSample(t=T0, gpu=g, mem_used_mib=100.0 * d, mem_total_mib=9856.0, mig=MigRef(g, d, 1, 0))
                        for d in (1, 2)]
    store.ingest_samples("h", samples)
    cards = host_cards(qtbot, store)
    assert cards.keys.index("30/mig1") == cards.keys.index("30") + 1
    assert cards.keys.index("30/mig2") == cards.keys.index("30") + 2
    cards.scroll_to_key("30/mig1")
    qtbot.wait(10)
    mig = shown_cards(cards)["30/mig2"]
    assert mig.title.text() == "GPU 30 · MIG 2"
    assert mig.rows["mem_used_mib"].value_text.startswith("0.2 / 9.6 GiB")
    assert mig.rows["util_gpu_pct"].label == "Activity"
    # Found in a screenshot: a pooled card that had shown a slice kept "Activity" for a whole GPU.
    cards.scroll_to_key("0")
    qtbot.wait(10)
    cards.scroll_to_key("30/mig1")
    qtbot.wait(10)
    cards.scroll_to_key("0")
    qtbot.wait(10)
    labels = {key: card.rows["util_gpu_pct"].label for key, card in shown_cards(cards).items()}
    assert labels and all(label == ("Activity" if "/mig" in key else "GPU util") for key, label in labels.items())
    for key in ("30/mig1", "30/mig2"):  # and back: every slice card says Activity again
        cards.scroll_to_key(key)
        qtbot.wait(10)
        assert shown_cards(cards)[key].rows["util_gpu_pct"].label == "Activity"


def test_a_narrower_view_reflows_to_one_column_and_keeps_the_top_device(qtbot: Any) -> None:
    store = filled(300)
    cards = host_cards(qtbot, store)
    assert cards.columns == 2
    cards.scroll_to_key("120")
    qtbot.wait(10)
    cards.resize(500, 820)
    qtbot.wait(10)
    assert cards.columns == 1
    visible = shown_cards(cards)
    assert "120" in visible
    assert sorted(int(k) for k in visible) == list(range(120, 120 + len(visible)))  # one column, in order
    height = next(iter(visible.values())).height()
    tops = sorted(c.geometry().top() for c in visible.values())
    assert all(b - a >= height for a, b in itertools.pairwise(tops))  # no card over another
    assert all(c.rows["util_gpu_pct"].value_text == percent_text(util_of(int(k))) for k, c in visible.items())
    # The range still reaches the last device.
    cards.verticalScrollBar().setValue(cards.verticalScrollBar().maximum())
    qtbot.wait(10)
    assert "299" in shown_cards(cards)


def test_a_card_is_as_tall_as_its_content_not_its_narrowest_wrap(qtbot: Any) -> None:
    """Found in a screenshot: every card a third taller than its content, in empty bands above and
    below the header, so a 1100 x 820 view showed one row of cards where two fit."""
    import time

    from tests.ui.telemetry_samples import fill_store

    store = TelemetryStore()
    now = time.time()
    fill_store(store, "demo", now - 60, 60, gpus=3, mig=True)
    view = HostCards()
    qtbot.addWidget(view)
    view.resize(1100, 700)
    view.show()
    qtbot.waitExposed(view)
    view.refresh(store, "demo", now - 60, now)
    qtbot.waitUntil(lambda: len(view.cards) == 4)
    needed = max(card.heightForWidth(card.width()) for card in view.cards.values())
    assert needed > 0
    assert all(card.height() <= needed + 1 for card in view.cards.values())
    assert len(view._on_screen()) == 4  # both rows in view
