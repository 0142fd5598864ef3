"""Small multiples for a fleet: one tile per GPU, painted by one widget, only where exposed.

A frame's work depends on the tiles on screen, not on the fleet's size: the ranked list is built
once per snapshot, and `paintEvent` computes which rows the exposed rectangle covers and paints
those tiles only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen, QPolygonF, QResizeEvent, QStaticText
from PySide6.QtWidgets import QSizePolicy, QWidget

from gpuws.core.fleet.model import Attention, FleetGpu
from gpuws.ui import theme

TILE_W = 176  # the narrowest a tile gets; tiles widen to share the row's width
TILE_H = 74
GAP = 6


@dataclass
class FleetTile:
    """One tile: a device, its attention, and its utilisation history (may be empty).

    What a frame needs (elided texts, the sparkline in tile coordinates) is computed the first
    time the tile is painted and kept: a tile is rebuilt only when a new snapshot arrives.
    """

    gpu: FleetGpu
    attention: Attention
    history: np.ndarray | None = None  # float32 utilisation %, NaN gaps
    note: str | None = None  # replaces the status text ("not reporting since 12:03:04")
    _texts: tuple[QStaticText, QStaticText] | None = field(default=None, repr=False)
    _lines: list[QPolygonF] | None = field(default=None, repr=False)


class FleetTileGrid(QWidget):
    """Tiles in rows; put it in a QScrollArea. Emits `gpu_clicked(FleetGpu)`."""

    gpu_clicked = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._tiles: list[FleetTile] = []
        self._columns = 1
        self._tile_w = TILE_W  # the row's width shared by the columns: no empty band on the right
        self.painted_last_frame = 0  # tiles painted by the last paintEvent (for tests and the benchmark)
        self.frames = 0
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
        self.setMouseTracking(False)
        self.setAccessibleName("Fleet GPUs")

    # -- data -----------------------------------------------------------------------------------

    def set_tiles(self, tiles: Sequence[FleetTile]) -> None:
        self._tiles = list(tiles)
        self._relayout()
        self.update()

    def tiles(self) -> list[FleetTile]:
        return list(self._tiles)

    def tile_rect(self, index: int) -> QRect:
        row, col = divmod(index, self._columns)
        return QRect(GAP + col * (self._tile_w + GAP), GAP + row * (TILE_H + GAP), self._tile_w, TILE_H)

    def index_at(self, x: float, y: float) -> int | None:
        col = int((x - GAP) // (self._tile_w + GAP))
        row = int((y - GAP) // (TILE_H + GAP))
        if not 0 <= col < self._columns or row < 0:
            return None
        index = row * self._columns + col
        return index if index < len(self._tiles) and self.tile_rect(index).contains(int(x), int(y)) else None

    # -- Qt -------------------------------------------------------------------------------------

    def sizeHint(self) -> QSize:
        return QSize(4 * (TILE_W + GAP) + GAP, self._height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._relayout()

    def _relayout(self) -> None:
        columns = max(1, (self.width() - GAP) // (TILE_W + GAP))
        self._tile_w = max(TILE_W, (self.width() - GAP) // columns - GAP)
        if columns != self._columns or self.minimumHeight() != self._height(columns):
            self._columns = columns
            self.setMinimumHeight(self._height())

    def _height(self, columns: int | None = None) -> int:
        rows = math.ceil(len(self._tiles) / (columns or self._columns)) if self._tiles else 0
        return GAP + rows * (TILE_H + GAP)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        index = self.index_at(event.position().x(), event.position().y())
        if index is not None and event.button() == Qt.MouseButton.LeftButton:
            self.gpu_clicked.emit(self._tiles[index].gpu)

    def paintEvent(self, event: QPaintEvent) -> None:
        exposed = event.rect()
        first_row = max(0, (exposed.top() - GAP) // (TILE_H + GAP))
        last_row = (exposed.bottom() - GAP) // (TILE_H + GAP)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        palette = self.palette()
        card, border = theme.card_colour(palette), theme.border_colour(palette)
        muted, text = theme.muted_text_colour(palette), palette.text().color()
        colours = {
            Attention.OOM_RISK: theme.error_colour(palette), Attention.XID: theme.error_colour(palette),
            Attention.THROTTLING: theme.warning_colour(palette), Attention.IDLE: muted,
            Attention.XID_INFO: border, Attention.NONE: border,
            Attention.NOT_REPORTING: theme.error_colour(palette),
        }
        util_colour = palette.highlight().color()
        painted = 0
        for row in range(first_row, last_row + 1):
            for col in range(self._columns):
                index = row * self._columns + col
                if index >= len(self._tiles):
                    break
                self._paint_tile(painter, self.tile_rect(index), self._tiles[index], card,
                                 colours[self._tiles[index].attention], text, muted, util_colour)
                painted += 1
        painter.end()
        self.painted_last_frame = painted
        self.frames += 1

    @staticmethod
    def _paint_tile(p: QPainter, r: QRect, tile: FleetTile, card: QColor, accent: QColor, text: QColor,
                    muted: QColor, util_colour: QColor) -> None:
        g = tile.gpu
        fm = p.fontMetrics()
        line_h = fm.height()
        if tile._texts is None:
            util = g.values.get("util_gpu_pct")
            mem = g.mem_used_pct
            status = (tile.attention.label if tile.attention is not Attention.NONE
                      else "throttle not exported" if g.gi is None and g.throttle_source is None else (g.model or ""))
            if g.exporter_up is False:
                status = f"exporter down  {status}"
            elif g.stale and g.age_s is not None:
                status = f"{g.age_s:.0f} s old  {status}"
            status = tile.note or status
            line2 = (f"{'-' if util is None else f'{util:.0f}%'} util  "
                     f"{'-' if mem is None else f'{mem:.0f}%'} mem  {status}")
            # QStaticText keeps the laid-out glyphs: drawing it again costs a fraction of drawText.
            tile._texts = (
                _static(fm.elidedText(f"{g.host}  {g.device_key}", Qt.TextElideMode.ElideMiddle, r.width() - 12)),
                _static(fm.elidedText(line2, Qt.TextElideMode.ElideRight, r.width() - 12)))
        spark = QRectF(8, 2 * line_h + 6, r.width() - 16, r.height() - 10 - (2 * line_h + 6))
        if tile._lines is None:
            tile._lines = (_sparkline(spark, tile.history)
                           if tile.history is not None and len(tile.history) > 1 and spark.height() > 4 else [])
        p.fillRect(r, card)
        p.fillRect(QRect(r.left(), r.top(), 4, r.height()), accent)
        p.setPen(QPen(accent if tile.attention is not Attention.NONE else card.darker(115)))
        p.drawRect(r.adjusted(0, 0, -1, -1))
        p.setPen(text)
        p.drawStaticText(r.left() + 8, r.top() + 3, tile._texts[0])
        p.setPen(muted)
        p.drawStaticText(r.left() + 8, r.top() + line_h + 2, tile._texts[1])
        # Memory bar along the bottom, utilisation sparkline (or, without history, a bar) above it.
        bar = QRect(r.left() + 8, r.bottom() - 7, r.width() - 16, 4)
        p.fillRect(bar, card.darker(125))
        mem = g.mem_used_pct
        if mem is not None:
            p.fillRect(QRect(bar.left(), bar.top(), int(bar.width() * min(mem, 100.0) / 100.0), bar.height()),
                       accent if tile.attention is Attention.OOM_RISK else muted)
        if tile._lines:
            p.translate(r.left(), r.top())
            p.setPen(QPen(util_colour, 1.0))
            for line in tile._lines:
                p.drawPolyline(line)
            p.translate(-r.left(), -r.top())
        else:
            util = g.values.get("util_gpu_pct")
            if util is not None and spark.height() > 4:
                p.fillRect(QRectF(r.left() + spark.left(), r.top() + spark.bottom() - 3,
                                  spark.width() * min(util, 100.0) / 100.0, 3), util_colour)


def _static(text: str) -> QStaticText:
    static = QStaticText(text)
    static.setTextFormat(Qt.TextFormat.PlainText)  # host names are remote strings: never markup
    return static


def _sparkline(rect: QRectF, values: np.ndarray) -> list[QPolygonF]:
    """A 0-100 % line across `rect` as polylines broken at gaps (NaN); at most a point per pixel."""
    n = len(values)
    stride = max(1, math.ceil(n / max(1.0, rect.width())))
    sampled = values[::stride].astype(np.float64)
    xs = rect.left() + np.arange(len(sampled), dtype=np.float64) * (rect.width() / max(1, len(sampled) - 1))
    ys = rect.bottom() - np.clip(sampled, 0, 100) / 100.0 * rect.height()
    lines: list[QPolygonF] = []
    run: list[QPointF] = []
    for x, y, v in zip(xs.tolist(), ys.tolist(), sampled.tolist(), strict=True):
        if math.isnan(v):
            if len(run) > 1:
                lines.append(QPolygonF(run))
            run = []
        else:
            run.append(QPointF(x, y))
    if len(run) > 1:
        lines.append(QPolygonF(run))
    return lines
