"""The "Advice" strip on the host view: right-size advice per GPU, with the money and one click.

Every `interval_ms` (while shown) the strip reads the GPUs' MIG layouts (at most once a minute,
through the host's runner) and computes `gpuws.core.advice.advise_from_store` over the app's
telemetry history in a worker thread: never on the GUI thread. GPUs told to go smaller, larger
or stop get a row with the sentence, the price change and "Resize to this…" (which asks the
host view to open the Resize wizard on that target); the others share one muted line. A row can
be dismissed; it comes back only when that GPU's advice (kind or target) changes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpuws.core.advice import (
    DEFAULT_WINDOW_S,
    HISTORY_MIN_DATA_S,
    Advice,
    AdvicePolicy,
    GpuAdvice,
    advise_from_store,
    data_wanted_text,
)
from gpuws.core.resize.state import GpuMigState
from gpuws.ui.tabs import HostContext
from gpuws.ui.telemetry.hub import TelemetryHub
from gpuws.ui.widgets import muted_label

if TYPE_CHECKING:
    from gpuws.core.runner import CommandRunner

DEFAULT_INTERVAL_MS = 15_000
LAYOUT_MAX_AGE_S = 60.0  # re-read the MIG layouts at most this often (a resize changes them)
ACTIONABLE = (Advice.SMALLER, Advice.LARGER, Advice.STOP)


class AdviceRow(QFrame):
    """One GPU's advice: the sentence with the money, why (tooltip), Resize to this…, dismiss."""

    def __init__(self, advice: GpuAdvice, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.advice = advice
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # reasons may carry host text
        self.label.setWordWrap(True)
        self.resize_button = QPushButton("Resize to this…", self)
        self.resize_button.setToolTip("Open the Resize wizard with this target filled in")
        self.dismiss_button = QToolButton(self)
        self.dismiss_button.setText("Dismiss")
        self.dismiss_button.setToolTip("Hide this advice until it changes")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.resize_button)
        layout.addWidget(self.dismiss_button)
        self.show_advice(advice)

    def show_advice(self, advice: GpuAdvice) -> None:
        self.advice = advice
        self.label.setText(f"{advice.headline()}  ·  {advice.confidence.value} confidence")
        self.label.setToolTip("\n".join(advice.reasons))
        target = resize_target(advice)
        if target is not None:
            self.resize_button.setText("Resize to this…" if advice.target else f"Resize to {target} instead…")
        self.resize_button.setVisible(target is not None)


def resize_target(advice: GpuAdvice) -> str | None:
    """The layout "Resize to this…" opens: the target, or for "stop" the smallest layout that fits."""
    return advice.target or advice.alternative


MAX_STRIP_HEIGHT = 132  # px: about three advice rows, then it scrolls
MIN_STRIP_HEIGHT = 48  # one advice line stays in view on every tab (more scrolls), even at 900x600


class AdviceStrip(QWidget):
    """Right-size advice for the selected host's GPUs.

    Interface: `AdviceStrip(parent=None, *, hub=None, interval_ms=15000, window_s=86400, policy=None)`,
    `set_host(context | None)`, `refresh()`; signal `resize_requested(gpu, target)`.
    """

    resize_requested = Signal(int, str)
    advice_changed = Signal()  # after new advice was shown (tests)

    def __init__(self, parent: QWidget | None = None, *, hub: TelemetryHub | None = None,
                 interval_ms: int = DEFAULT_INTERVAL_MS, window_s: float = DEFAULT_WINDOW_S,
                 policy: AdvicePolicy | None = None) -> None:
        super().__init__(parent)
        self.context: HostContext | None = None
        self.hub = hub
        self.window_s = window_s
        self.policy = policy or AdvicePolicy(min_data_s=HISTORY_MIN_DATA_S)  # from the store's history (#35)
        self.advices: list[GpuAdvice] = []
        self.rows: dict[int, AdviceRow] = {}
        # host -> GPU -> the advice dismissed; kept across host switches (for this app run)
        self._dismissed: dict[str | None, dict[int, tuple[str, str | None]]] = {}
        self._states: list[GpuMigState] = []
        self._states_at = 0.0
        self._pending: concurrent.futures.Future[tuple[list[GpuMigState], list[GpuAdvice], bool]] | None = None
        self._generation = 0
        self._following = False  # subscribed to the hub's host changes

        self.title = QLabel("Advice", self)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.summary = muted_label("", self)
        self.summary.setWordWrap(True)
        self.rows_box = QVBoxLayout()
        self.rows_box.setSpacing(4)
        body = QVBoxLayout()
        body.setContentsMargins(14, 8, 14, 8)
        body.setSpacing(4)
        body.addWidget(self.title)
        body.addLayout(self.rows_box)
        body.addWidget(self.summary)
        self.frame = QFrame(self)
        self.frame.setFrameShape(QFrame.Shape.StyledPanel)
        self.frame.setLayout(body)
        # Scrolls past a few rows: the strip must never raise the window's minimum height (900x600).
        self.scroller = QScrollArea(self)
        self.scroller.setWidgetResizable(True)
        self.scroller.setFrameShape(QFrame.Shape.NoFrame)
        self.scroller.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroller.setWidget(self.frame)
        self.scroller.setMaximumHeight(MAX_STRIP_HEIGHT)
        self.scroller.setMinimumHeight(MIN_STRIP_HEIGHT)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addWidget(self.scroller)
        self.hide()

        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.refresh)

    # --- host -----------------------------------------------------------------------------------

    def set_host(self, context: HostContext | None) -> None:
        """Show advice for this host (None: none). Dismissals are remembered per host."""
        if context is not None and self.context is not None and context.profile.name == self.context.profile.name:
            self.context = context
            return
        self.context = context
        self._generation += 1
        self._states, self._states_at = [], 0.0
        self.show_advices([])
        if context is None:
            self.timer.stop()
            return
        if self.hub is None:
            self.hub = context.hub  # the window's telemetry over its Workspace
        if self.hub is None:
            return  # a host view without the window's telemetry (nothing to advise from)
        self.hub.watch_session(context.session)  # idempotent: the Telemetry tab does the same
        if not self._following:
            # A new layout or price reaches the strip in the same event, not at the next layout read.
            self.hub.host_changed.connect(self._on_host_changed)
            self._following = True
        self.timer.start()
        self.refresh()

    def _on_host_changed(self, change: str, host: str) -> None:
        if self.context is None or host != self.context.profile.name or change not in ("inventory", "price"):
            return
        self._generation += 1  # a computation under way used the old layout or price: dropped
        self._pending = None
        self._states_at = 0.0  # read the layouts again now
        self.refresh()

    def refresh(self) -> None:
        """Compute the advice now (in the background) unless a computation is running."""
        context, hub = self.context, self.hub
        if context is None or hub is None or (self._pending is not None and not self._pending.done()):
            return
        if not context.bridge.running:  # the app is closing: its timer may still fire once
            return
        connection = context.session.connection
        runner = None if connection is None else connection.runner
        if runner is None and not self._states:
            return  # not connected and no layouts known yet
        generation = self._generation
        read_states = runner is not None and time.monotonic() - self._states_at > LAYOUT_MAX_AGE_S
        self._pending = context.bridge.run_async(
            self._compute(hub, context, runner if read_states else None, list(self._states)),
            lambda result: self._on_result(generation, result),
            lambda exc: None,  # no layouts (lost connection): the strip keeps what it shows
            owner=self,
        )

    async def _compute(
        self, hub: TelemetryHub, context: HostContext, runner: CommandRunner | None, states: list[GpuMigState]
    ) -> tuple[list[GpuMigState], list[GpuAdvice], bool]:
        if runner is not None:
            from gpuws.ui.resize.operations import read_gpus

            states = await read_gpus(runner)
        store, host = hub.store, context.profile.name
        record = hub.workspace.host(host)
        profile = record.profile if record is not None else context.profile  # the Workspace's: the newest price
        # The numpy work runs in a worker thread: neither the GUI nor the asyncio loop waits for it.
        advices = await asyncio.to_thread(
            advise_from_store, store, host, states, profile, window_s=self.window_s, now=time.time(),
            policy=self.policy,
        )
        return states, advices, runner is not None

    def _on_result(self, generation: int, result: tuple[list[GpuMigState], list[GpuAdvice], bool]) -> None:
        if generation != self._generation:
            return  # another host was chosen meanwhile
        states, advices, fresh = result
        if fresh:
            self._states, self._states_at = states, time.monotonic()
        self.show_advices(advices)

    # --- showing --------------------------------------------------------------------------------

    @property
    def dismissed(self) -> dict[int, tuple[str, str | None]]:
        """The shown host's dismissed advice: GPU -> (advice, target) as it was dismissed."""
        return self._dismissed.setdefault(self.context.profile.name if self.context else None, {})

    def show_advices(self, advices: Sequence[GpuAdvice]) -> None:
        """Show rows for the actionable advice not dismissed, and one line for the rest."""
        self.advices = list(advices)
        for gpu, signature in list(self.dismissed.items()):
            now = next((a for a in advices if a.gpu == gpu), None)
            if now is not None and now.signature != signature:
                del self.dismissed[gpu]  # the advice changed: show it again
        shown = {a.gpu: a for a in advices if a.advice in ACTIONABLE and a.gpu not in self.dismissed}
        for gpu in list(self.rows):
            if gpu not in shown:
                gone = self.rows.pop(gpu)
                self.rows_box.removeWidget(gone)
                gone.deleteLater()
        for gpu, advice in sorted(shown.items()):
            row = self.rows.get(gpu)
            if row is None:
                row = self.rows[gpu] = AdviceRow(advice, self.frame)
                row.resize_button.clicked.connect(lambda _=False, g=gpu: self._on_resize(g))
                row.dismiss_button.clicked.connect(lambda _=False, g=gpu: self.dismiss(g))
                self.rows_box.insertWidget(sorted(shown).index(gpu), row)
                row.show()  # now: a layout shows a child added to a visible widget only on the next event
            else:
                row.show_advice(advice)
        rest = [a for a in advices if a.advice not in ACTIONABLE]
        self.summary.setText(summary_text(rest, self.policy))
        self.summary.setVisible(bool(rest))
        self.setVisible(bool(shown) or bool(rest))
        self.advice_changed.emit()

    def dismiss(self, gpu: int) -> None:
        """Hide GPU `gpu`'s advice until it changes."""
        advice = next((a for a in self.advices if a.gpu == gpu), None)
        if advice is not None:
            self.dismissed[gpu] = advice.signature
            self.show_advices(self.advices)

    def _on_resize(self, gpu: int) -> None:
        row = self.rows.get(gpu)
        target = None if row is None else resize_target(row.advice)
        if target is not None:
            self.resize_requested.emit(gpu, target)


def summary_text(advices: Sequence[GpuAdvice], policy: AdvicePolicy) -> str:
    """One muted line for the GPUs with nothing to do: kept ones, and those still measuring."""
    keep = [f"GPU {a.gpu} ({a.current})" for a in advices if a.advice is Advice.KEEP]
    waiting = [a for a in advices if a.advice is Advice.NOT_ENOUGH_DATA]
    parts = []
    if keep:
        parts.append("Keep: " + ", ".join(keep))
    if waiting:
        have = max((a.stats.span_s for a in waiting if a.stats is not None), default=0.0)
        parts.append(f"GPU {', '.join(str(a.gpu) for a in waiting)}: {data_wanted_text(have, policy.min_data_s)}")
    return "  ·  ".join(parts)
