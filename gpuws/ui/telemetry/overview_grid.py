"""All hosts at a glance: one small plot per GPU (utilisation and memory), painted in one widget.

Light by construction for 50+ hosts: a single widget paints every tile (only those in the
exposed area), a host's history is read again only when it has new samples, and then only for
the tiles that get painted (a tile scrolled out of view is read when it comes back).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QRect, QRectF, QSize, QSizeF, Qt, Signal
from PySide6.QtGui import (
    QFont,
    QFontMetrics,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
    QPixmap,
    QPolygonF,
    QStaticText,
)
from PySide6.QtWidgets import QFrame, QScrollArea, QSizePolicy, QWidget

from gpuws.core.telemetry.metrics import METRIC_INDEX
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.ui import theme
from gpuws.ui.telemetry.cached_scrollbar import CachedScrollBar
from gpuws.ui.telemetry.metrics import percent_text, series_colour
from gpuws.ui.telemetry.sparkline import (
    Drawable,
    draw_lines,
    line_drawables,
    line_pen,
    peak_decimate,
    static_text,
)

F64 = npt.NDArray[np.float64]

F32 = npt.NDArray[np.float32]

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
    util_now: float | None = None
    mem_now: float | None = None
    mem_total: float | None = None
    alert: bool = False
    # Paint state: whether new history waits to be read, the lines in pixels (per series, one
    # drawable per run of finite values), the polylines reused frame after frame for a series
    # without gaps (refilled in place, not rebuilt), the laid-out caption with the (caption,
    # width) it shows and the laid-out current values with their text.
    unread: bool = field(default=True, repr=False, compare=False)
    lines_size: QSizeF | None = field(default=None, repr=False, compare=False)  # None: rebuild the lines
    lines: tuple[list[Drawable], list[Drawable]] = field(default=([], []), repr=False, compare=False)
    polylines: tuple[QPolygonF, QPolygonF] | None = field(default=None, repr=False, compare=False)
    caption_text: tuple[tuple[str, int], QStaticText] | None = field(default=None, repr=False, compare=False)
    values_text: tuple[str, QStaticText] | None = field(default=None, repr=False, compare=False)

    @property
    def caption(self) -> str:
        """"host · GPU 0" (or "GPU 0 MIG 1")."""
        return f"{self.host} · GPU {self.key.replace('/mig', ' MIG ')}"

    @property
    def values(self) -> str:
        """Utilisation and memory now, or "offline"."""
        util = "util n/s" if self.util_now is None else percent_text(self.util_now)
        mem = "mem n/s" if self.mem_now is None else f"mem {percent_text(self.mem_now)}"
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
        self._chromes: dict[tuple[int, int, bool, float], QPixmap] = {}
        self._style: _PaintStyle | None = None
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

    def _read(self, tile: Tile) -> F32 | None:
        """The tile's history over the shown range: its times, and (rows, 2) memory MiB and util %."""
        tile.unread = False
        tile.lines_size = None
        tile.t = tile.mem_pct = tile.util = np.empty(0)
        tile.lines = ([], [])
        if self._store is None:
            return None
        try:
            window = self._store.window(tile.host, tile.key, *self._range)
        except KeyError:  # forgotten meanwhile: the next refresh drops the tile
            return None
        tile.t = window.t
        return window.means(_TILE_COLUMNS)

    def _prepare(self, tiles: list[Tile], plot: QRectF) -> None:
        """Read the tiles with new history and build their lines, in `plot` (tile coordinates).

        Tiles whose histories have the same length (the usual case: one tier, one range) are
        computed together in one numpy pass, so the cost per tile is a few assignments rather
        than a few dozen small numpy calls.
        """
        groups: dict[int, list[tuple[Tile, F32]]] = {}
        for tile in tiles:
            if tile.unread or (tile.lines_size != plot.size() and tile.t.size):  # new data, or resized
                values = self._read(tile)
                if values is not None and values.shape[0]:
                    groups.setdefault(values.shape[0], []).append((tile, values))
        span = max(self._t_to - self._t_from, 1e-9)
        bottom, height = plot.bottom(), plot.height()
        for group in groups.values():
            t = np.stack([tile.t for tile, _ in group])
            series = np.stack([values for _, values in group]).astype(np.float64)  # (tiles, rows, 2)
            totals = np.array([tile.mem_total or np.nan for tile, _ in group])
            series[:, :, 0] *= (100.0 / totals)[:, None]  # memory as % of the total (NaN: unknown)
            for k, (tile, _) in enumerate(group):
                tile.mem_pct, tile.util = series[k, :, 0], series[k, :, 1]
            drawn = series
            if len(group) > 1 and (t == t[0]).all():
                # One time axis (one tier, one range: the usual case): every tile's series reduced
                # to ~2 points per pixel in one pass; a 1 px line costs about its number of points.
                rows = series.shape[1]
                x0, reduced = peak_decimate(t[0], series.transpose(1, 0, 2).reshape(rows, -1), plot.width())
                t = np.broadcast_to(x0, (len(group), x0.shape[0]))
                drawn = reduced.reshape(x0.shape[0], len(group), 2).transpose(1, 0, 2)
            x = t - self._t_from
            x *= plot.width() / span
            x += plot.left()
            y_px = np.clip(drawn, 0.0, 100.0)  # NaN (a gap) stays NaN
            y_px *= -height / 100.0
            y_px += bottom
            finite = np.logical_and.reduce(np.isfinite(y_px), axis=1).tolist()  # (tiles, 2)
            for k, (tile, _) in enumerate(group):
                tile.lines = (self._line(tile, 0, x[k], y_px[k, :, 0], finite[k][0]),
                              self._line(tile, 1, x[k], y_px[k, :, 1], finite[k][1]))
                tile.lines_size = plot.size()

    @staticmethod
    def _line(tile: Tile, series: int, x: F64, y: F64, finite: bool) -> list[Drawable]:
        """One series in pixels. Without gaps it goes into the tile's own polyline, refilled in
        place through its memory (no new Qt object per frame); with gaps, one drawable per run."""
        if not finite:
            return line_drawables(x, y, all_finite=False)
        if x.shape[0] < 2:
            return []
        if tile.polylines is None:
            tile.polylines = (QPolygonF(), QPolygonF())
        poly = tile.polylines[series]
        if poly.size() != x.shape[0]:
            poly.resize(x.shape[0])
        points = pg.functions.ndarray_from_qpolygonf(poly)
        points[:, 0] = x
        points[:, 1] = y
        return [poly]

    # --- layout -----------------------------------------------------------------------------

    def columns(self, width: int | None = None) -> int:
        """How many tiles fit side by side in `width` (the widget's by default)."""
        return max(1, ((width if width is not None else self.width()) + GAP) // (TILE_W + GAP))

    def _resize_for(self, width: int) -> None:
        rows = -(-len(self.tiles) // self.columns(width)) if self.tiles else 0
        self.setFixedHeight(max(TILE_H, rows * (TILE_H + GAP)))

    def tile_rect(self, index: int) -> QRect:
        """Where tile `index` is drawn."""
        cols = self.columns()
        width = (self.width() - (cols - 1) * GAP) // cols
        row, col = divmod(index, cols)
        return QRect(col * (width + GAP), row * (TILE_H + GAP), width, TILE_H)

    def sizeHint(self) -> QSize:
        """Qt: three tiles wide."""
        return QSize(3 * (TILE_W + GAP), self.height())

    def resizeEvent(self, event: object) -> None:
        """Qt: a new width re-flows the tiles (and the height follows)."""
        self._resize_for(self.width())

    def mousePressEvent(self, event: QMouseEvent) -> None:
        """Qt: a click on a tile opens that GPU."""
        pos = event.position().toPoint()
        for i, tile in enumerate(self.tiles):
            if self.tile_rect(i).contains(pos):
                self.tile_clicked.emit(tile.host, tile.key)
                return

    # --- painting ---------------------------------------------------------------------------

    def _paint_style(self) -> _PaintStyle:
        pal, font = self.palette(), self.font()
        key = (pal.cacheKey(), font.key())
        if self._style is None or self._style.key != key:
            self._style = _PaintStyle(key, pal, font)
            self._chromes.clear()
        return self._style

    def _chrome(self, size: QSize, alert: bool, style: _PaintStyle) -> QPixmap:
        """A tile's background: rounded surface, border and plot axis, drawn once per size and state.

        Opaque (the corners in the canvas colour), so drawing it is a copy, not a blend.
        """
        ratio = self.devicePixelRatioF()
        key = (size.width(), size.height(), alert, ratio)
        pixmap = self._chromes.get(key)
        if pixmap is None:
            if len(self._chromes) > 8:  # resized: the old sizes are not coming back
                self._chromes.clear()
            pal = self.palette()
            pixmap = QPixmap(size * ratio)
            pixmap.setDevicePixelRatio(ratio)
            pixmap.fill(pal.color(self.backgroundRole()))
            painter = QPainter(pixmap)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(QPen(theme.error_colour(pal), 1.5) if alert else QPen(theme.border_colour(pal), 1))
            painter.setBrush(theme.card_colour(pal))
            painter.drawRoundedRect(QRectF(0, 0, size.width(), size.height()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
            plot = style.plot_rect(QRect(QPoint(0, 0), size))
            painter.setPen(style.axis)
            painter.drawLine(plot.bottomLeft(), plot.bottomRight())
            painter.end()
            self._chromes[key] = pixmap
        return pixmap

    def paintEvent(self, event: QPaintEvent) -> None:
        """Qt: draw every tile."""
        style = self._paint_style()
        painter = QPainter(self)
        painter.setFont(style.font)
        exposed = event.rect()
        cols = self.columns()
        width = (self.width() - (cols - 1) * GAP) // cols
        size = QSize(width, TILE_H)
        chromes = (self._chrome(size, False, style), self._chrome(size, True, style))
        caption_width = width - 16
        first_row = max(0, exposed.top() // (TILE_H + GAP))
        last_row = exposed.bottom() // (TILE_H + GAP)
        shown = self.tiles[first_row * cols : (last_row + 1) * cols]
        # Lines in tile coordinates: valid wherever the tile is (scrolling does not rebuild them).
        self._prepare(shown, style.plot_rect(QRect(0, 0, width, TILE_H)))
        for i, tile in enumerate(shown, start=first_row * cols):
            row, col = divmod(i, cols)
            left, top = col * (width + GAP), row * (TILE_H + GAP)
            painter.drawPixmap(left, top, chromes[tile.alert])
            caption = (tile.caption, caption_width)  # elided to this width
            if tile.caption_text is None or tile.caption_text[0] != caption:
                elided = style.metrics.elidedText(tile.caption, Qt.TextElideMode.ElideMiddle, caption_width)
                tile.caption_text = (caption, _prepared(elided, style.font))
            painter.setPen(style.text if tile.online else style.muted)
            painter.drawStaticText(left + 8, top + 4, tile.caption_text[1])
            values = tile.values
            if tile.values_text is None or tile.values_text[0] != values:
                tile.values_text = (values, _prepared(values, style.font))
            painter.setPen(style.muted)
            painter.drawStaticText(left + 8, top + 4 + style.line_h, tile.values_text[1])
            mem_lines, util_lines = tile.lines
            if mem_lines or util_lines:
                painter.translate(left, top)
                painter.setPen(style.mem_pen)
                draw_lines(painter, mem_lines)
                painter.setPen(style.util_pen)
                draw_lines(painter, util_lines)
                painter.translate(-left, -top)
        painter.end()


class _PaintStyle:
    """Font, metrics, pens and colours of one palette and font, built once rather than per paint."""

    def __init__(self, key: tuple[int, str], pal: QPalette, font: QFont) -> None:
        self.key = key
        self.font = QFont(font)
        self.font.setPointSizeF(font.pointSizeF() * 0.9)
        self.metrics = QFontMetrics(self.font)
        self.line_h = self.metrics.height()
        self.text = pal.color(QPalette.ColorRole.WindowText)
        self.muted = theme.muted_text_colour(pal)
        self.axis = QPen(theme.border_colour(pal), 1)
        self.util_pen = line_pen(series_colour("util", pal))
        self.mem_pen = line_pen(series_colour("memory", pal))

    def plot_rect(self, tile: QRect) -> QRectF:
        """Where a tile at `tile` draws its lines: below the caption and values, inside the margins."""
        inner = tile.adjusted(8, 4, -8, -6)
        top = inner.top() + 2 * self.line_h + 4
        return QRectF(inner.left(), top, inner.width(), inner.bottom() - top)


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
        # The bar is drawn from a cached pixmap while idle: a full render (a screenshot, an expose)
        # otherwise spends ~2.5 ms of its frame redrawing Fusion's gradients (see cached_scrollbar).
        self.setVerticalScrollBar(CachedScrollBar(Qt.Orientation.Vertical, self))
        self.canvas = OverviewCanvas(self)
        self.setWidget(self.canvas)
