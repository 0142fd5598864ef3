"""The host view's frame reads only the cards on screen, however many GPUs the host has."""

from __future__ import annotations

from typing import Any

import pytest

from gpuws.core.telemetry.sample import GpuSample
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui.telemetry.host_cards import HostCards

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


def test_a_frame_reads_only_the_cards_on_screen(qtbot: Any) -> None:
    store = CountingStore()
    gpus = 96
    for k in range(3):
        store.ingest_samples("h", [GpuSample(t=T0 + k, gpu=g, util_gpu_pct=float(g)) for g in range(gpus)])
    cards = HostCards()
    qtbot.addWidget(cards)
    cards.resize(1100, 820)
    cards.show()
    cards.refresh(store, "h", T0 - 60, T0 + 3)
    qtbot.wait(50)  # the layout runs: which cards are on screen is known from here on
    store.window_reads.clear()
    store.key_listings = 0
    cards.refresh(store, "h", T0 - 60, T0 + 3)
    visible = {k for k, c in cards.cards.items() if not c.visibleRegion().isEmpty()}
    assert 0 < len(visible) < 12
    assert set(store.window_reads) == visible and len(store.window_reads) == len(visible)
    assert store.key_listings == 0  # the device set did not change: no sorting every key again
    assert all(not cards.cards[k].stale for k in visible)
    assert all(c.stale for k, c in cards.cards.items() if k not in visible)

    # Scrolled to the last card: the cards now on screen are read, the ones left behind become stale.
    cards.verticalScrollBar().setValue(cards.cards[str(gpus - 1)].geometry().top())
    qtbot.wait(20)
    store.window_reads.clear()
    cards.refresh(store, "h", T0 - 60, T0 + 3)
    now_visible = {k for k, c in cards.cards.items() if not c.visibleRegion().isEmpty()}
    assert set(store.window_reads) == now_visible and str(gpus - 1) in now_visible
    assert all(cards.cards[k].stale for k in visible - now_visible)

    # A new device appears: the cards are rebuilt from the store's keys.
    store.ingest_samples("h", [GpuSample(t=T0 + 3, gpu=gpus, util_gpu_pct=1.0)])
    cards.refresh(store, "h", T0 - 60, T0 + 4)
    assert len(cards.cards) == gpus + 1
