"""One card per GPU (or MIG device): sparklines of the key series, current values, facts, alerts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import QPainter, QPaintEvent, QPen, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QVBoxLayout, QWidget

from gpuws.core.telemetry.alerts import Alert, AlertKind
from gpuws.core.telemetry.metrics import METRIC_INDEX
from gpuws.core.telemetry.sample import GpuSample
from gpuws.core.telemetry.store import Window
from gpuws.ui import theme
from gpuws.ui.telemetry.facts import FactsBlock
from gpuws.ui.telemetry.metrics import (
    CARD_METRICS,
    codec_text,
    ecc_text,
    fan_text,
    link_text,
    processes_text,
    pstate_text,
    throttle_kinds,
    throttle_text,
)
from gpuws.ui.telemetry.sparkline import MetricRow, SparklineRows
from gpuws.ui.widgets import Badge, Card, heading, muted_label

# Alert kinds shown as badges on a card: (text, badge colour).
ALERT_BADGES: dict[AlertKind, tuple[str, str]] = {
    AlertKind.OOM_RISK: ("OOM risk", "error"),
    AlertKind.ECC_ERRORS: ("ECC errors", "error"),
    AlertKind.THERMAL_THROTTLE: ("Thermal throttle", "warning"),
    AlertKind.POWER_THROTTLE: ("Power throttle", "warning"),
    AlertKind.IDLE_GPU: ("Idle", "warning"),
}

_THROTTLE_KINDS = frozenset({AlertKind.THERMAL_THROTTLE, AlertKind.POWER_THROTTLE})

# The store columns of every card row's series, in row order.
_SERIES_COLUMNS = [METRIC_INDEX[name] for metric in CARD_METRICS for name in metric.series]

FACTS = (
    ("Throttle", throttle_text),
    ("ECC", ecc_text),
    ("Enc / dec", codec_text),
    ("Fan", fan_text),
    ("PCIe link", link_text),
    ("Processes", processes_text),
)


CORNER_RADIUS = 8  # as `Card`'s

# Card corners rendered once per (palette, device pixel ratio): see `GpuCard.paintEvent`.
_CORNERS: dict[tuple[int, float], QPixmap] = {}


def _corners(widget: QWidget) -> QPixmap:
    """A small antialiased card (2 x radius + 1 px square) whose corners are a card's corners."""
    pal, dpr = widget.palette(), widget.devicePixelRatioF()
    key = (pal.cacheKey(), dpr)
    pixmap = _CORNERS.get(key)
    if pixmap is None:
        side = 2 * CORNER_RADIUS + 1
        pixmap = QPixmap(round(side * dpr), round(side * dpr))
        pixmap.setDevicePixelRatio(dpr)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(theme.border_colour(pal), 1))
        painter.setBrush(theme.card_colour(pal))
        painter.drawRoundedRect(QRectF(0.5, 0.5, side - 1, side - 1), CORNER_RADIUS, CORNER_RADIUS)
        painter.end()
        if len(_CORNERS) > 8:  # palettes come and go (theme switches): keep a few
            _CORNERS.clear()
        _CORNERS[key] = pixmap
    return pixmap


def device_title(key: str, name: str | None) -> str:
    """'GPU 0 · H100 80GB HBM3', 'GPU 0 · MIG 1g.10gb · GI 3' (a MIG device whose profile is
    known, see `mig_device_name`) or 'GPU 0 · MIG 1'."""
    gpu, _, mig = key.partition("/mig")
    if mig:
        return f"GPU {gpu} · {name}" if name else f"GPU {gpu} · MIG {mig}"
    return f"GPU {gpu} · {name}" if name else f"GPU {gpu}"


def mig_device_name(profile: str | None, gpu_instance: int | None) -> str | None:
    """The name a MIG card shows: 'MIG 1g.10gb · GI 3' (None when the profile is unknown)."""
    if not profile:
        return None
    return f"MIG {profile}" + (f" · GI {gpu_instance}" if gpu_instance is not None else "")


SLICE_ACTIVITY_LABEL = "Activity"
_UTIL_LABEL = next(metric.label for metric in CARD_METRICS if metric.key == "util_gpu_pct")

# Power and temperature belong to the whole card: shown once, on the parent GPU's card.
_CARD_WIDE_METRICS = frozenset({"temp_c", "power_w"})


class GpuCard(Card):
    """The live view of one device; `update_view` is called by the dashboard's frame clock."""

    metric_clicked = Signal(str, str)  # (device key, metric)

    def __init__(self, key: str, name: str | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.key = key
        self.stale = True  # not updated since it was last off screen
        self.title = heading(device_title(key, name), 1.05, self)
        self.pstate = muted_label("", self)
        self.pstate.setToolTip("Performance state (P0 is the fastest)")
        self._badges: dict[AlertKind, Badge] = {}
        self._badge_row = QHBoxLayout()
        self._badge_row.setSpacing(4)

        header = QHBoxLayout()
        header.setSpacing(8)
        header.addWidget(self.title)
        header.addStretch(1)
        header.addLayout(self._badge_row)
        header.addWidget(self.pstate)

        self.rows: dict[str, MetricRow] = {
            metric.key: MetricRow(metric.key, metric.label, metric.colours) for metric in CARD_METRICS
        }
        self._label_rows()
        self.plots = SparklineRows(list(self.rows.values()), self)
        self.plots.clicked.connect(lambda m: self.metric_clicked.emit(self.key, m))

        self.facts = FactsBlock([name_ for name_, _ in FACTS], self)
        self._pstate_text = ""

        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 12)
        layout.setSpacing(6)
        layout.addLayout(header)
        layout.addWidget(self.plots)
        layout.addWidget(self.facts)

    def paintEvent(self, event: QPaintEvent) -> None:
        """The same surface as `Card`'s, drawn for a fraction of its cost.

        An antialiased rounded rect rasterises the whole card with coverage (~0.1 ms per card,
        per frame); here only the four corners are antialiased (copied from a cached pixmap),
        the inside is a plain fill and the straight edges plain 1 px lines.
        """
        pal = self.palette()
        # A corner is radius + 1 px: the pixel where the arc meets the straight edge is blended too.
        w, h, q = self.width(), self.height(), CORNER_RADIUS + 1
        if w < 2 * q + 1 or h < 2 * q + 1:
            super().paintEvent(event)
            return
        painter = QPainter(self)
        card = theme.card_colour(pal)
        painter.fillRect(QRect(q, 1, w - 2 * q, h - 2), card)
        painter.fillRect(QRect(1, q, q - 1, h - 2 * q), card)
        painter.fillRect(QRect(w - q, q, q - 1, h - 2 * q), card)
        painter.setPen(QPen(theme.border_colour(pal), 1))
        painter.drawLine(q, 0, w - q - 1, 0)
        painter.drawLine(q, h - 1, w - q - 1, h - 1)
        painter.drawLine(0, q, 0, h - q - 1)
        painter.drawLine(w - 1, q, w - 1, h - q - 1)
        corners = _corners(self)
        dpr = corners.devicePixelRatio()
        quadrant = q * dpr
        for x, y in ((0, 0), (w - q, 0), (0, h - q), (w - q, h - q)):
            sx = 0 if x == 0 else corners.width() - quadrant
            sy = 0 if y == 0 else corners.height() - quadrant
            painter.drawPixmap(QPointF(x, y), corners, QRectF(sx, sy, quadrant, quadrant))
        painter.end()

    def set_name(self, name: str | None) -> None:
        self.title.setText(device_title(self.key, name))

    def _label_rows(self) -> bool:
        """Name the utilisation row for this card's kind of device; True when the label changed.

        A slice's own engine activity (GPM, where NVML gives it) is the same field as a GPU's
        utilisation, named for what it is there.
        """
        row = self.rows["util_gpu_pct"]
        label = SLICE_ACTIVITY_LABEL if "/mig" in self.key else _UTIL_LABEL
        changed = row.label != label
        row.label = label
        return changed

    def bind(self, key: str, name: str | None) -> None:
        """Show another device (a pooled card scrolled back into view): stale until updated.

        What the card showed for its previous device is cleared, so it never appears under the
        new device's title.
        """
        self.key = key
        self.stale = True
        if self._label_rows():
            self.plots.relabel()
        self.set_name(name)
        self.update_view(None, None, 0.0, 0.0)
        self._pstate_text = ""
        self.pstate.setText("")
        for name_, _ in FACTS:
            self.facts.set_text(name_, "")

    def update_view(
        self,
        sample: GpuSample | None,
        window: Window | None,
        t_from: float,
        t_to: float,
        alerts: Sequence[Alert] = (),
    ) -> None:
        """Show the newest sample, the history in `window` over [t_from, t_to] and active alerts."""
        for metric in CARD_METRICS:
            row = self.rows[metric.key]
            if sample is None:
                row.value_text, row.supported, row.ceiling = "no data", False, None
            elif sample.mig is not None and metric.key in _CARD_WIDE_METRICS:
                row.value_text, row.supported, row.ceiling = f"on GPU {sample.mig.parent_gpu}", False, None
            else:
                row.value_text = metric.value_text(sample)
                row.supported = any(getattr(sample, name) is not None for name in metric.series)
                row.ceiling = metric.ceiling(sample)
        if window is not None and window.t.size:
            # Every row's series in one float64 copy, in row order (the plots slice it per row).
            self.plots.set_data(window.t, window.means(_SERIES_COLUMNS).astype(np.float64), t_from, t_to)
        else:
            self.plots.set_data(np.empty(0), None, t_from, t_to)
        if sample is not None:
            pstate = pstate_text(sample)
            if pstate != self._pstate_text:  # setText relayouts the header even when unchanged
                self._pstate_text = pstate
                self.pstate.setText(pstate)
            for name_, text_of in FACTS:
                self.facts.set_text(name_, text_of(sample))
        self._show_alerts(alerts, sample)

    def _show_alerts(self, alerts: Sequence[Alert], sample: GpuSample | None = None) -> None:
        # Throttle badges follow the same decoded reasons as the Throttle row, so a badge never
        # says "Power throttle" beside "Throttle: none" while the alert waits out its clear delay.
        throttling = throttle_kinds(sample)
        wanted: dict[AlertKind, Alert | None] = {
            a.kind: a for a in alerts if a.active and a.kind in ALERT_BADGES and a.kind not in _THROTTLE_KINDS}
        for kind in throttling:
            wanted[kind] = next((a for a in alerts if a.kind is kind and a.active), None)
        for kind in list(self._badges):
            if kind not in wanted:
                badge = self._badges.pop(kind)
                self._badge_row.removeWidget(badge)
                badge.deleteLater()
        for kind, alert in wanted.items():
            if kind not in self._badges:
                text, colour = ALERT_BADGES[kind]
                self._badges[kind] = Badge(text, colour, self)
                self._badge_row.addWidget(self._badges[kind])
            badge = self._badges[kind]
            tip = alert.message if alert is not None else (throttle_text(sample) if sample is not None else "")
            if badge.toolTip() != tip:
                badge.setToolTip(tip)

    def badge_texts(self) -> list[str]:
        """The alert badges shown (for tests and accessibility)."""
        return [b.text() for b in self._badges.values()]

    def fact(self, name: str) -> str:
        return self.facts.text(name)



