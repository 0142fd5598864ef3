"""All hosts at a glance: one small plot per GPU (utilisation and memory), painted in one widget.

Light by construction for 50+ hosts: a single widget paints every tile (only those in the
exposed area), and a host's history is read again only when it has new samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from PySide6.QtCore import QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QFrame, QScrollArea, QSizePolicy, QWidget

from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui import theme
from gpuws.ui.telemetry.metrics import series_colour
from gpuws.ui.telemetry.sparkline import line_path
from gpuws.ui.telemetry.sparkline import line_pen as _line_pen

F64 = npt.NDArray[np.float64]

TILE_W = 230
TILE_H = 92
GAP = 8


@dataclass
class Tile:
    """What one tile shows: a device of a host, its util and memory-% series, current values."""

    host: str
    key: str
    online: bool = True
    simulated: bool = False
    t: F64 = field(default_factory=lambda: np.empty(0))
    util: F64 = field(default_factory=lambda: np.empty(0))
    mem_pct: F64 = field(default_factory=lambda: np.empty(0))
    util_now: float | None = None
    mem_now: float | None = None
    alert: bool = False

    @property
    def caption(self) -> str:
        return f"{self.host} · GPU {self.key.replace('/mig', ' MIG ')}"

    @property
    def values(self) -> str:
        util = "util n/s" if self.util_now is None else f"{self.util_now:.0f} %"
        mem = "mem n/s" if self.mem_now is None else f"mem {self.mem_now:.0f} %"
        return f"{util} · {mem}" if self.online else "offline"


class OverviewCanvas(QWidget):
    """Paints the tiles in rows that fit the width; emits the tile clicked."""

    tile_clicked = Signal(str, str)  # (host, device key)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tiles: list[Tile] = []
        self._t_from = 0.0
        self._t_to = 1.0
        self._seen: dict[str, float | None] = {}  # host -> last_t at the last read
        self._range: tuple[float, float] = (0.0, 0.0)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    # --- data -------------------------------------------------------------------------------

    def refresh(self, store: TelemetryStore, t_from: float, t_to: float, *, alerted: set[tuple[str, str]]) -> int:
        """Re-read hosts with new samples (all of them when the range moved); returns hosts read."""
        moved = abs(t_from - self._range[0]) > (t_to - t_from) / 300 or (t_to - t_from) != (
            self._range[1] - self._range[0]
        )
        if moved:
            self._range = (t_from, t_to)
        self._t_from, self._t_to = self._range
        old = {(tile.host, tile.key): tile for tile in self.tiles}
        tiles: list[Tile] = []
        read = 0
        for host in store.hosts():
            status = store.status(host)
            fresh = moved or self._seen.get(host, -1.0) != status.last_t
            if fresh:
                read += 1
                self._seen[host] = status.last_t
            latest = store.latest(host) if fresh else {}
            for key in store.device_keys(host):
                if "/mig" in key:
                    continue  # small multiples are per physical GPU
                tile = old.get((host, key)) or Tile(host, key)
                tile.online, tile.simulated = status.online, status.simulated
                tile.alert = (host, key) in alerted
                if fresh:
                    self._read(store, tile, latest.get(key))
                tiles.append(tile)
        for host in set(self._seen) - {t.host for t in tiles}:
            del self._seen[host]
        self.tiles = tiles
        self._resize_for(self.width())
        self.update()
        return read

    def _read(self, store: TelemetryStore, tile: Tile, sample: object) -> None:
        try:
            window = store.window(tile.host, tile.key, *self._range)
        except KeyError:
            return
        total = getattr(sample, "mem_total_mib", None)
        tile.t = window.t
        tile.util = window.column("util_gpu_pct")[1]
        used = window.column("mem_used_mib")[1]
        tile.mem_pct = used * (100.0 / total) if total else np.full_like(used, np.nan)
        tile.util_now = getattr(sample, "util_gpu_pct", None)
        pct = getattr(sample, "mem_used_pct", None)
        tile.mem_now = float(pct) if pct is not None else None

    # --- layout -----------------------------------------------------------------------------

    def columns(self, width: int | None = None) -> int:
        return max(1, ((width if width is not None else self.width()) + GAP) // (TILE_W + GAP))

    def _resize_for(self, width: int) -> None:
        rows = -(-len(self.tiles) // self.columns(width)) if self.tiles else 0
        self.setFixedHeight(max(TILE_H, rows * (TILE_H + GAP)))

    def tile_rect(self, index: int) -> QRect:
        cols = self.columns()
        width = (self.width() - (cols - 1) * GAP) // cols
        row, col = divmod(index, cols)
        return QRect(col * (width + GAP), row * (TILE_H + GAP), width, TILE_H)

    def sizeHint(self) -> QSize:
        return QSize(3 * (TILE_W + GAP), self.height())

    def resizeEvent(self, event: object) -> None:
        self._resize_for(self.width())

    def mousePressEvent(self, event: QMouseEvent) -> None:
        pos = event.position().toPoint()
        for i, tile in enumerate(self.tiles):
            if self.tile_rect(i).contains(pos):
                self.tile_clicked.emit(tile.host, tile.key)
                return

    # --- painting ---------------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        pal = self.palette()
        text, muted = pal.color(pal.ColorRole.WindowText), theme.muted_text_colour(pal)
        border, surface = theme.border_colour(pal), theme.card_colour(pal)
        small = QFont(self.font())
        small.setPointSizeF(small.pointSizeF() * 0.9)
        fm = QFontMetrics(small)
        painter.setFont(small)
        util_pen = _line_pen(series_colour("util", pal))
        mem_pen = _line_pen(series_colour("memory", pal))
        alert_pen = QPen(theme.error_colour(pal), 1.5)
        exposed = event.rect()
        for i, tile in enumerate(self.tiles):
            rect = self.tile_rect(i)
            if not rect.intersects(exposed):
                continue
            painter.setPen(alert_pen if tile.alert else QPen(border, 1))
            painter.setBrush(surface)
            painter.drawRoundedRect(QRectF(rect).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
            inner = rect.adjusted(8, 4, -8, -6)
            line_h = fm.height()
            painter.setPen(text if tile.online else muted)
            caption = fm.elidedText(tile.caption, Qt.TextElideMode.ElideMiddle, inner.width())
            painter.drawText(QRectF(inner.left(), inner.top(), inner.width(), line_h), Qt.AlignmentFlag.AlignLeft,
                             caption)
            painter.setPen(muted)
            painter.drawText(QRectF(inner.left(), inner.top() + line_h, inner.width(), line_h),
                             Qt.AlignmentFlag.AlignLeft, tile.values)
            plot = QRectF(inner.left(), inner.top() + 2 * line_h + 4, inner.width(),
                          inner.bottom() - inner.top() - 2 * line_h - 4)
            painter.setPen(QPen(border, 1))
            painter.drawLine(plot.bottomLeft(), plot.bottomRight())
            if tile.t.size:
                painter.setPen(mem_pen)
                painter.drawPath(line_path(tile.t, tile.mem_pct, self._t_from, self._t_to, 100.0, plot))
                painter.setPen(util_pen)
                painter.drawPath(line_path(tile.t, tile.util, self._t_from, self._t_to, 100.0, plot))


class OverviewGrid(QScrollArea):
    """The scrollable overview of every host's GPUs."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.canvas = OverviewCanvas(self)
        self.setWidget(self.canvas)
