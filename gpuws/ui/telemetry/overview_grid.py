"""All hosts at a glance: one small plot per GPU (utilisation and memory), painted in one widget.

Light by construction for 50+ hosts: a single widget paints every tile (only those in the
exposed area), a host's history is read again only when it has new samples, and then only for
the tiles that get painted (a tile scrolled out of view is read when it comes back).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QMouseEvent, QPainter, QPaintEvent, QPen, QPixmap, QStaticText
from PySide6.QtWidgets import QFrame, QScrollArea, QSizePolicy, QWidget

from gpuws.core.telemetry.store import METRIC_INDEX, TelemetryStore
from gpuws.ui import theme
from gpuws.ui.telemetry.metrics import series_colour
from gpuws.ui.telemetry.sparkline import (
    Drawable,
    draw_lines,
    laid_out,
    line_drawables,
    line_pen,
    peak_decimate,
    static_text,
)

F64 = npt.NDArray[np.float64]

# Store columns of a tile's series: memory used (as % once read) and utilisation.
_TILE_COLUMNS = [METRIC_INDEX["mem_used_mib"], METRIC_INDEX["util_gpu_pct"]]

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
    series: F64 = field(default_factory=lambda: np.empty((0, 2)), repr=False)  # (mem_pct, util) columns
    util_now: float | None = None
    mem_now: float | None = None
    mem_total: float | None = None
    alert: bool = False
    # Paint caches: the lines in pixels for `lines_rect` (dropped when the data changes) and the
    # laid-out caption with the (caption, width) it shows.
    unread: bool = field(default=True, repr=False, compare=False)  # new history not read yet
    lines: tuple[list[Drawable], list[Drawable]] | None = field(default=None, repr=False, compare=False)
    lines_rect: QRectF | None = field(default=None, repr=False, compare=False)
    caption_text: tuple[tuple[str, int], QStaticText] | None = field(default=None, repr=False, compare=False)

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
        self._store: TelemetryStore | None = None  # where unread tiles are read from when painted
        self._chromes: dict[tuple[int, int, bool, int, float], QPixmap] = {}
        self._range: tuple[float, float] = (0.0, 0.0)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    # --- data -------------------------------------------------------------------------------

    def refresh(self, store: TelemetryStore, t_from: float, t_to: float, *, alerted: set[tuple[str, str]]) -> int:
        """Take in hosts with new samples (all of them when the range moved); returns how many.

        Current values are taken now; the history of a tile is read when the tile is painted.
        """
        self._store = store
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
                    sample = latest.get(key)
                    tile.util_now = getattr(sample, "util_gpu_pct", None)
                    pct = getattr(sample, "mem_used_pct", None)
                    tile.mem_now = float(pct) if pct is not None else None
                    tile.mem_total = getattr(sample, "mem_total_mib", None)
                    tile.unread = True
                tiles.append(tile)
        for host in set(self._seen) - {t.host for t in tiles}:
            del self._seen[host]
        self.tiles = tiles
        self._resize_for(self.width())
        self.update()
        return read

    def _read(self, tile: Tile) -> None:
        """The tile's history over the shown range (utilisation and memory as % of the total)."""
        tile.unread = False
        tile.lines = None
        if self._store is None:
            return
        try:
            window = self._store.window(tile.host, tile.key, *self._range)
        except KeyError:  # forgotten meanwhile: the next refresh drops the tile
            return
        total = tile.mem_total
        # Both series in one float64 copy: memory used as % of the total, then utilisation.
        series = window.mean[:, _TILE_COLUMNS].astype(np.float64)
        series *= (100.0 / total if total else np.nan, 1.0)
        tile.t, tile.mem_pct, tile.util = window.t, series[:, 0], series[:, 1]
        tile.series = series

    def _tile_lines(self, tile: Tile, plot: QRectF) -> tuple[list[Drawable], list[Drawable]]:
        """Memory and utilisation lines of a tile in pixels, rebuilt when its data or rect changed."""
        if tile.lines is None or tile.lines_rect != plot:
            span = max(self._t_to - self._t_from, 1e-9)
            x = plot.left() + (tile.t - self._t_from) * (plot.width() / span)
            x, ys = peak_decimate(x, tile.series, plot.width())
            y_px = plot.bottom() - np.clip(ys, 0.0, 100.0) * (plot.height() / 100.0)
            finite: list[bool] = np.logical_and.reduce(np.isfinite(y_px), axis=0).tolist()
            mem, util = (line_drawables(x, y_px[:, i], all_finite=finite[i]) for i in (0, 1))
            tile.lines = (mem, util)
            tile.lines_rect = QRectF(plot)
            return mem, util
        return tile.lines

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

    def _chrome(self, size: QSize, alert: bool) -> QPixmap:
        """A tile's rounded surface and border, drawn once per size, state and palette."""
        pal = self.palette()
        ratio = self.devicePixelRatioF()
        key = (size.width(), size.height(), alert, pal.cacheKey(), ratio)
        pixmap = self._chromes.get(key)
        if pixmap is None:
            if len(self._chromes) > 8:  # resized or re-themed: the old ones are not coming back
                self._chromes.clear()
            pixmap = QPixmap(size * ratio)
            pixmap.setDevicePixelRatio(ratio)
            pixmap.fill(Qt.GlobalColor.transparent)
            painter = QPainter(pixmap)
            painter.setPen(QPen(theme.error_colour(pal), 1.5) if alert else QPen(theme.border_colour(pal), 1))
            painter.setBrush(theme.card_colour(pal))
            painter.drawRoundedRect(QRectF(0, 0, size.width(), size.height()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
            painter.end()
            self._chromes[key] = pixmap
        return pixmap

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        pal = self.palette()
        text, muted = pal.color(pal.ColorRole.WindowText), theme.muted_text_colour(pal)
        border = QPen(theme.border_colour(pal), 1)
        small = QFont(self.font())
        small.setPointSizeF(small.pointSizeF() * 0.9)
        fm = QFontMetrics(small)
        line_h = fm.height()
        painter.setFont(small)
        util_pen = line_pen(series_colour("util", pal))
        mem_pen = line_pen(series_colour("memory", pal))
        exposed = event.rect()
        for i, tile in enumerate(self.tiles):
            rect = self.tile_rect(i)
            if not rect.intersects(exposed):
                continue
            painter.drawPixmap(rect.topLeft(), self._chrome(rect.size(), tile.alert))
            inner = rect.adjusted(8, 4, -8, -6)
            painter.setPen(text if tile.online else muted)
            caption = (tile.caption, inner.width())  # elided to this width
            if tile.caption_text is None or tile.caption_text[0] != caption:
                elided = fm.elidedText(tile.caption, Qt.TextElideMode.ElideMiddle, inner.width())
                tile.caption_text = (caption, _prepared(elided, small))
            painter.drawStaticText(QPointF(inner.left(), inner.top()), tile.caption_text[1])
            painter.setPen(muted)
            painter.drawStaticText(QPointF(inner.left(), inner.top() + line_h), laid_out(tile.values, small))
            plot = QRectF(inner.left(), inner.top() + 2 * line_h + 4, inner.width(),
                          inner.bottom() - inner.top() - 2 * line_h - 4)
            painter.setPen(border)
            painter.drawLine(plot.bottomLeft(), plot.bottomRight())
            if tile.unread:
                self._read(tile)
            if tile.t.size:
                mem_lines, util_lines = self._tile_lines(tile, plot)
                painter.setPen(mem_pen)
                draw_lines(painter, mem_lines)
                painter.setPen(util_pen)
                draw_lines(painter, util_lines)
        painter.end()


def _prepared(text: str, font: QFont) -> QStaticText:
    st = static_text(text)
    st.prepare(font=font)
    return st


class OverviewGrid(QScrollArea):
    """The scrollable overview of every host's GPUs."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.canvas = OverviewCanvas(self)
        self.setWidget(self.canvas)
