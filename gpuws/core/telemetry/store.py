"""Bounded, tiered telemetry history in numpy ring buffers.

Per (host, device key) the store keeps:

- a *raw* ring at full sample rate for the recent window (15 min by default, up to 20 Hz). It
  starts small and grows only while it holds less than the window, so memory follows the real
  rate; once full it overwrites its oldest rows;
- *tiers* of fixed-size rings of min/mean/max buckets (5 s buckets for 1 h, 120 s for 24 h: each
  window the UI offers gets at least 600 points from the finest history that covers it). Buckets
  are computed from the raw rows in bulk, when a tier is read or before a raw row not yet in
  every tier is overwritten, so ingest stays a row copy.

Memory is therefore flat over a session of any length (see `memory_bytes`), and small: values are
stored as float16 (scaled per metric so every range fits; relative error <= 2**-11) and, in the
tiers, percentages and temperatures as uint8 (0.5 % and 1 degree steps). 24 h at 1 Hz take under
128 KiB per GPU. `STORAGE_LOSS` states each metric's bound; reads return float32.

Gaps: a NaN row is written when a host goes offline (`mark_offline`) or when samples jump by more
than `gap_factor` sample periods, so plots break the line instead of drawing across the gap;
buckets with no samples are NaN rows too.

Thread use: the asyncio loop thread ingests, the GUI thread reads; one lock guards both, and
every read returns copies.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from gpuws.core.telemetry.metrics import F16_MAX, METRIC_INDEX, METRICS, RAW_SCALE
from gpuws.core.telemetry.sample import GpuSample, HostSample, SampleBatch

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]

_row_of = attrgetter(*METRICS)

# -- storage codecs ----------------------------------------------------------------------------
# Raw rows: float16 of value * RAW_SCALE (see `gpuws.core.telemetry.metrics`).
_F16_MAX: Final = F16_MAX
_RAW_SCALE: Final = np.array(RAW_SCALE, np.float32)
# Tier buckets: percentages (0.5 steps) and temperature (1 degree steps) as uint8, 255 = missing;
# the rest as scaled float16 like raw rows.
_U8_STEPS: Final = {"util_gpu_pct": 2.0, "util_mem_pct": 2.0, "temp_c": 1.0, "fan_pct": 2.0,
                    "enc_util_pct": 2.0, "dec_util_pct": 2.0}
_U8_COLS: Final = np.array([METRIC_INDEX[m] for m in _U8_STEPS])
_F16_COLS: Final = np.array([i for i, m in enumerate(METRICS) if m not in _U8_STEPS])
_U8_SCALE: Final = np.array(list(_U8_STEPS.values()), np.float32)
_U8_MISSING: Final = 255
_F16_SCALE: Final = _RAW_SCALE[_F16_COLS]
# What a stored value may differ from the reading, per metric: (absolute, relative) -- the larger
# applies. uint8: half a step; float16: half an ulp (2**-11 relative) of the scaled value.
STORAGE_LOSS: Final[dict[str, tuple[float, float]]] = {
    m: ((0.5 / _U8_STEPS[m]) if m in _U8_STEPS else 0.0, 2.0**-11) for m in METRICS
}
_NO_WARN: Final = {"over": "ignore", "invalid": "ignore"}


def encode_rows(rows: F32) -> npt.NDArray[np.float16]:
    """Raw rows (n, metrics) as stored: scaled float16, out-of-range values clipped."""
    scaled = rows * _RAW_SCALE
    # Two ufuncs rather than np.clip: same result (NaN stays NaN), less overhead per call.
    np.minimum(scaled, _F16_MAX, out=scaled)
    np.maximum(scaled, -_F16_MAX, out=scaled)
    return scaled.astype(np.float16)


def decode_rows(stored: npt.NDArray[np.float16]) -> F32:
    """Stored raw rows back to float32 readings."""
    out: F32 = stored.astype(np.float32)
    out /= _RAW_SCALE
    return out


def _encode_stats(stats: F32) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float16]]:
    """(..., metrics) float32 -> the uint8 and float16 columns of tier buckets."""
    with np.errstate(**_NO_WARN):  # type: ignore[arg-type]
        q = np.rint(stats[..., _U8_COLS] * _U8_SCALE)
        np.clip(q, 0, 254, out=q)
        q[np.isnan(q)] = _U8_MISSING
        f = stats[..., _F16_COLS] * _F16_SCALE
        np.clip(f, -_F16_MAX, _F16_MAX, out=f)
        return q.astype(np.uint8), f.astype(np.float16)


def _decode_stats(u8: npt.NDArray[np.uint8], f16: npt.NDArray[np.float16],
                  columns: npt.NDArray[np.intp] | None = None) -> F32:
    """Tier bucket columns, (..., uint8 columns) and (..., float16 columns), back to (..., metrics)
    float32 readings; with `columns` (METRICS indices), only those metrics, in that order."""
    small_at: slice | npt.NDArray[np.intp]
    wide_at: slice | npt.NDArray[np.intp]
    if columns is None:  # every column: views, no index copies
        small_at, small_to, wide_at, wide_to = slice(None), _U8_COLS, slice(None), _F16_COLS
    else:
        small = _U8_AT[columns] >= 0
        small_at, small_to = _U8_AT[columns[small]], np.flatnonzero(small)
        wide_at, wide_to = _F16_AT[columns[~small]], np.flatnonzero(~small)
    # Arithmetic rather than a lookup table: a few vector operations.
    q = u8[..., small_at]
    values = q.astype(np.float32)
    values[q == _U8_MISSING] = np.nan
    values /= _U8_SCALE[small_at]
    out = np.empty((*u8.shape[:-1], len(METRICS) if columns is None else len(columns)), np.float32)
    out[..., small_to] = values
    out[..., wide_to] = f16[..., wide_at].astype(np.float32) / _F16_SCALE[wide_at]
    return out


# Each metric's index among the uint8 and among the float16 bucket columns (-1: not there).
_U8_AT: Final = np.full(len(METRICS), -1, np.intp)
_U8_AT[_U8_COLS] = np.arange(len(_U8_COLS))
_F16_AT: Final = np.full(len(METRICS), -1, np.intp)
_F16_AT[_F16_COLS] = np.arange(len(_F16_COLS))
_COLUMN: Final = [np.array([i], dtype=np.intp) for i in range(len(METRICS))]  # one metric, for `Window.column`


RAW_TIER: Final = "raw"


@dataclass(frozen=True)
class TierSpec:
    """One downsampled tier: `bucket_s` wide buckets kept for `span_s` seconds."""

    bucket_s: float
    span_s: float

    @cached_property  # read on every window() call: formatted once
    def name(self) -> str:
        return f"{self.bucket_s:g}s"

    @property
    def capacity(self) -> int:
        return math.ceil(self.span_s / self.bucket_s) + 1


DEFAULT_TIERS: Final = (TierSpec(5.0, 3600.0), TierSpec(120.0, 24 * 3600.0))


class Window:
    """History of one device over a time range: `t` (unix s) and (rows, len(metrics)) arrays of
    each bucket's `mean`, `min` and `max`. For the raw tier the three are the same array. NaN rows
    are gaps.

    Decoded when read, and only what is read: a view that plots a few metrics' means (a card, an
    overview tile) asks `means(columns)` and never pays for decoding the rest.
    """

    __slots__ = ("_decoded", "_f16", "_open", "_raw", "_u8", "bucket_s", "t", "tier")
    metrics: Final[tuple[str, ...]] = METRICS

    def __init__(
        self,
        tier: str,
        bucket_s: float | None,
        t: F64,
        *,
        raw: npt.NDArray[np.float16] | None = None,
        u8: npt.NDArray[np.uint8] | None = None,
        f16: npt.NDArray[np.float16] | None = None,
        open_bucket: F32 | None = None,
    ) -> None:
        """`raw`: stored raw rows (rows, metrics); or a tier's `u8` and `f16` columns (3, buckets,
        columns: min, mean, max), then `open_bucket` (3, 1, metrics), decoded, the bucket still filling."""
        self.tier = tier
        self.bucket_s = bucket_s
        self.t = t
        self._raw = raw
        self._u8 = u8
        self._f16 = f16
        self._open = open_bucket
        self._decoded: F32 | None = None  # (3, rows, metrics), once something asked for all of it

    def _all(self) -> npt.NDArray[np.float32]:
        if self._decoded is None:
            if self._raw is not None:
                rows = decode_rows(self._raw)
                self._decoded = np.broadcast_to(rows, (3, *rows.shape))
            else:
                parts = [] if self._u8 is None or self._f16 is None else [_decode_stats(self._u8, self._f16)]
                if self._open is not None:
                    parts.append(self._open)
                self._decoded = (np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0] if parts
                                 else np.empty((3, 0, len(METRICS)), np.float32))
        return self._decoded

    @property
    def mean(self) -> F32:
        mean: F32 = self._all()[1]
        return mean

    @property
    def min(self) -> F32:
        low: F32 = self._all()[0]
        return low

    @property
    def max(self) -> F32:
        high: F32 = self._all()[2]
        return high

    def means(self, columns: Sequence[int] | npt.NDArray[np.intp]) -> F32:
        """(rows, len(columns)) means of the metrics at `columns` (METRICS indices), decoding only those."""
        columns = np.asarray(columns, dtype=np.intp)
        if self._decoded is not None:
            decoded: F32 = self._decoded[1][:, columns]
            return decoded
        if self._raw is not None:
            out: F32 = self._raw[:, columns].astype(np.float32)  # a copy: the caller may keep it
            out /= _RAW_SCALE[columns]
            return out
        parts = []
        if self._u8 is not None and self._f16 is not None:
            parts.append(_decode_stats(self._u8[1], self._f16[1], columns))
        if self._open is not None:
            parts.append(self._open[1][:, columns])
        if not parts:
            return np.empty((0, len(columns)), np.float32)
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def column(self, metric: str) -> tuple[F64, F64]:
        """(t, values) of one metric as float64, NaN where there is a gap."""
        return self.t, self.means(_COLUMN[METRIC_INDEX[metric]])[:, 0].astype(np.float64)


class _RawRing:
    """Full-rate rows: t (float64) and metrics (scaled float16, see `encode_rows`); grows up to `max_rows`."""

    def __init__(self, window_s: float, max_rows: int, initial_rows: int = 256) -> None:
        self.window_s = window_s
        self.max_rows = max_rows
        cap = min(initial_rows, max_rows)
        self.t = np.empty(cap, dtype=np.float64)
        self.v = np.empty((cap, len(METRICS)), dtype=np.float16)
        self.head = 0  # next row written
        self.size = 0

    def append(self, t: float, row: npt.NDArray[Any]) -> None:
        """Add one stored (encoded) row."""
        cap = self.t.shape[0]
        if self.size == cap and cap < self.max_rows and self.t[self.head] > t - self.window_s:
            self._grow()
            cap = self.t.shape[0]
        head = self.head
        self.t[head] = t
        self.v[head] = row
        self.head = head + 1 if head + 1 < cap else 0
        if self.size < cap:
            self.size += 1

    def _grow(self) -> None:
        t, v = self._ordered_stored()
        # Double, but never past what the window holds at the rate seen so far: at 1 Hz a 15 min
        # window needs 900 rows, not 1024.
        span = float(t[-1] - t[0]) if t.shape[0] > 1 else 0.0
        needed = math.ceil(self.window_s * (t.shape[0] - 1) / span) + 2 if span > 0 else self.max_rows
        cap = max(t.shape[0] + 1, min(self.max_rows, self.t.shape[0] * 2, needed))
        self.t = np.empty(cap, dtype=np.float64)
        self.v = np.empty((cap, len(METRICS)), dtype=np.float16)
        self.t[: t.shape[0]] = t
        self.v[: t.shape[0]] = v
        self.head = t.shape[0] % cap
        self.size = t.shape[0]

    def _ordered_stored(self) -> tuple[F64, npt.NDArray[np.float16]]:
        cap = self.t.shape[0]
        start = (self.head - self.size) % cap
        if start + self.size <= cap:
            return self.t[start : start + self.size].copy(), self.v[start : start + self.size].copy()
        idx = (np.arange(self.size) + start) % cap
        return self.t[idx], self.v[idx]

    def ordered(self) -> tuple[F64, F32]:
        """All rows, oldest first (copies, decoded)."""
        t, v = self._ordered_stored()
        return t, decode_rows(v)

    def tail_stored(self, rows: int, skip: int = 0) -> npt.NDArray[np.float16]:
        """The `rows` stored rows before the newest `skip` ones (oldest first)."""
        rows = min(rows, self.size - skip)
        cap = self.t.shape[0]
        end = (self.head - skip) % cap
        start = (end - rows) % cap
        if rows <= 0:
            return self.v[:0]
        if start < end or end == 0:
            return self.v[start : start + rows]
        return np.concatenate((self.v[start:], self.v[:end]))

    def tail(self, rows: int) -> F32:
        """The last `rows` metric rows (oldest first), decoded."""
        return decode_rows(self.tail_stored(rows))

    def nbytes(self) -> int:
        return int(self.t.nbytes + self.v.nbytes)


class _TierRing:
    """Fixed-size ring of (t, min, mean, max) buckets, stored as uint8 and float16 columns."""

    def __init__(self, spec: TierSpec) -> None:
        self.spec = spec
        cap = spec.capacity
        self.t = np.empty(cap, dtype=np.float64)
        self.u8 = np.empty((3, cap, len(_U8_COLS)), dtype=np.uint8)  # min, mean, max
        self.f16 = np.empty((3, cap, len(_F16_COLS)), dtype=np.float16)
        self.head = 0
        self.size = 0
        self.done: int | None = None  # the first bucket index (t // bucket_s) not computed yet

    def extend(self, t: F64, u8: npt.NDArray[np.uint8], f16: npt.NDArray[np.float16]) -> None:
        """Add buckets: t (n,), u8 and f16 (3, n, columns), oldest first."""
        cap = self.t.shape[0]
        n = t.shape[0]
        if n > cap:
            t, u8, f16, n = t[-cap:], u8[:, -cap:], f16[:, -cap:], cap
        first = min(n, cap - self.head)
        for lo, hi, dst in ((0, first, self.head), (first, n, 0)):
            if hi > lo:
                self.t[dst : dst + hi - lo] = t[lo:hi]
                self.u8[:, dst : dst + hi - lo] = u8[:, lo:hi]
                self.f16[:, dst : dst + hi - lo] = f16[:, lo:hi]
        self.head = (self.head + n) % cap
        self.size = min(cap, self.size + n)

    def stored(self, slices: Sequence[slice]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float16]]:
        """The u8 and f16 columns (3, rows, columns) of slices of the ring, joined, still encoded (copies)."""
        if len(slices) == 1:
            return self.u8[:, slices[0]].copy(), self.f16[:, slices[0]].copy()
        return (np.concatenate([self.u8[:, sl] for sl in slices], axis=1),
                np.concatenate([self.f16[:, sl] for sl in slices], axis=1))

    def nbytes(self) -> int:
        return int(self.t.nbytes + self.u8.nbytes + self.f16.nbytes)


def _ring_slices(t: F64, head: int, size: int, t_from: float, t_to: float, *, right: bool = True) -> list[slice]:
    """Index slices (oldest first) of a ring's rows with t_from <= t <= t_to (< t_to unless `right`)."""
    cap = t.shape[0]
    start = (head - size) % cap
    segments = [(start, start + size)] if start + size <= cap else [(start, cap), (0, head)]
    out = []
    for lo, hi in segments:
        seg = t[lo:hi]
        a = lo + int(seg.searchsorted(t_from, side="left"))  # the method: no wrapper overhead per read
        b = lo + int(seg.searchsorted(t_to, side="right" if right else "left"))
        if b > a:
            out.append(slice(a, b))
    return out


def _join(parts: Sequence[npt.NDArray[Any]], dtype: type, width: int | None = None) -> npt.NDArray[Any]:
    if len(parts) == 1:
        return parts[0].copy()
    if parts:
        return np.concatenate(parts)
    return np.empty((0,) if width is None else (0, width), dtype=dtype)


def _bucket_stats(rows: F32) -> tuple[F32, F32, F32]:
    """min, mean, max per column ignoring NaN, without numpy's all-NaN warnings."""
    if rows.shape[0] == 0:
        nan = np.full(len(METRICS), np.nan, dtype=np.float32)
        return nan, nan, nan
    mn, mean, mx = _segment_stats(rows, np.zeros(1, dtype=np.intp))
    return mn[0], mean[0], mx[0]


def _segment_stats(rows: F32, starts: npt.NDArray[np.intp]) -> tuple[F32, F32, F32]:
    """min, mean, max of each run of rows beginning at `starts`, ignoring NaN, without warnings."""
    missing = np.isnan(rows)
    if not missing.any():  # the usual case
        total = np.add.reduceat(rows, starts, axis=0, dtype=np.float64)
        count = np.diff(np.append(starts, rows.shape[0]))[:, None]
        return np.minimum.reduceat(rows, starts, axis=0), (total / count).astype(np.float32), np.maximum.reduceat(
            rows, starts, axis=0)
    valid = ~missing
    counts = np.add.reduceat(valid, starts, axis=0, dtype=np.int64)
    total = np.add.reduceat(np.where(valid, rows, 0.0), starts, axis=0, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (total / counts).astype(np.float32)
    return np.fmin.reduceat(rows, starts, axis=0), mean, np.fmax.reduceat(rows, starts, axis=0)


_NAN_ROW: Final = np.full(len(METRICS), np.nan, dtype=np.float16)


class _DeviceHistory:
    """Raw ring, tiers and gap detection for one device of one host.

    Buckets are computed in bulk from the raw rows when first needed: before a raw row that no
    tier has used yet is overwritten, or when a tier is read. Ingest itself is a row copy.
    """

    def __init__(self, raw_window_s: float, max_hz: float, tiers: Sequence[TierSpec], gap_factor: float) -> None:
        self.raw = _RawRing(raw_window_s, max_rows=math.ceil(raw_window_s * max_hz) + 1)
        self.tiers = [_TierRing(spec) for spec in tiers]
        self.gap_factor = gap_factor
        self.last_t: float | None = None
        self.period: float | None = None  # smoothed sample period, for gap detection
        self.unused_from = -math.inf  # raw rows at or after this time are not in every tier yet

    def add(self, t: float, row: npt.NDArray[Any], expected_period: float | None) -> bool:
        """Add one encoded row. False: dropped (not newer than the last)."""
        last = self.last_t
        if last is not None:
            dt = t - last
            if dt <= 0:
                return False  # duplicate or out of order (host clock stepped back): drop it
            period = expected_period or self.period
            if period is not None and dt > self.gap_factor * period:
                self._append(last + period, _NAN_ROW)
            elif expected_period is None:
                self.period = dt if self.period is None else 0.9 * self.period + 0.1 * dt
        # _append, inlined: this runs for every sample.
        raw = self.raw
        times = raw.t
        cap = times.shape[0]
        head = raw.head
        if raw.size == cap:
            oldest = times[head]
            if oldest >= self.unused_from and self.tiers:
                self.aggregate()  # the ring is full and its oldest row is not in every tier yet
            if cap < raw.max_rows and oldest > t - raw.window_s:
                raw.append(t, row)  # grows
                self.last_t = t
                return True
        else:
            raw.size += 1
        times[head] = t
        raw.v[head] = row
        raw.head = head + 1 if head + 1 < cap else 0
        self.last_t = t
        return True

    def break_line(self, t: float) -> None:
        """Write a gap row (host went offline) unless the last row already is one."""
        if self.last_t is not None and t > self.last_t:
            self._append(t, _NAN_ROW)

    def _append(self, t: float, row: npt.NDArray[Any]) -> None:
        raw = self.raw
        if raw.size == raw.t.shape[0] and self.tiers and raw.t[raw.head] >= self.unused_from:
            self.aggregate()  # the ring is full and its oldest row is not in every tier yet
        raw.append(t, row)
        self.last_t = t

    def aggregate(self) -> None:
        """Compute every closed bucket of every tier not computed yet, from the raw rows."""
        if self.last_t is None:
            return
        raw = self.raw
        for tier in self.tiers:
            width = tier.spec.bucket_s
            current = int(self.last_t // width)  # the bucket still filling
            start = -math.inf if tier.done is None else tier.done * width
            parts = _ring_slices(raw.t, raw.head, raw.size, start, current * width, right=False)
            if not parts:
                continue
            t = _join([raw.t[sl] for sl in parts], np.float64)
            rows = decode_rows(_join([raw.v[sl] for sl in parts], np.float16, len(METRICS)))
            ids = (t // width).astype(np.int64)
            starts = np.flatnonzero(np.diff(ids)) + 1
            starts = np.concatenate((np.zeros(1, dtype=starts.dtype), starts))
            buckets = ids[starts]
            mn, mean, mx = _segment_stats(rows, starts)
            u8, f16 = _encode_stats(np.stack((mn, mean, mx)))
            # After each bucket, the next one with rows; a jump of more than one leaves a gap: one
            # missing row there breaks the line.
            gap_after = np.append(buckets[1:], current) > buckets + 1
            pos = np.arange(buckets.shape[0]) + np.concatenate(([0], np.cumsum(gap_after)[:-1]))
            n = buckets.shape[0] + int(gap_after.sum())
            out_t = np.empty(n, dtype=np.float64)
            out_u8 = np.full((3, n, len(_U8_COLS)), _U8_MISSING, dtype=np.uint8)
            out_f16 = np.full((3, n, len(_F16_COLS)), np.nan, dtype=np.float16)
            out_t[pos] = (buckets + 0.5) * width
            out_u8[:, pos] = u8
            out_f16[:, pos] = f16
            out_t[pos[gap_after] + 1] = (buckets[gap_after] + 1.5) * width
            tier.extend(out_t, out_u8, out_f16)
            tier.done = current
        self.unused_from = min(
            (tier.done * tier.spec.bucket_s for tier in self.tiers if tier.done is not None), default=-math.inf
        )

    def window(self, t_from: float, t_to: float, tier_name: str | None) -> Window:
        tier = self._pick(t_from, tier_name)
        raw = self.raw
        if tier is None:
            parts = _ring_slices(raw.t, raw.head, raw.size, t_from, t_to)
            t = _join([raw.t[sl] for sl in parts], np.float64)
            return Window(RAW_TIER, None, t, raw=_join([raw.v[sl] for sl in parts], np.float16, len(METRICS)))
        width = tier.spec.bucket_s
        if self.last_t is not None and (tier.done is None or int(self.last_t // width) > tier.done):
            self.aggregate()
        parts = _ring_slices(tier.t, tier.head, tier.size, t_from, t_to)
        t_parts = [tier.t[sl] for sl in parts]
        u8, f16 = tier.stored(parts) if parts else (None, None)
        open_bucket = None
        if self.last_t is not None:
            # The bucket still filling, computed on the fly so the newest minute is not missing.
            current = int(self.last_t // width)
            centre = (current + 0.5) * width
            if t_from <= centre <= t_to:
                open_parts = _ring_slices(raw.t, raw.head, raw.size, current * width, math.inf)
                rows = decode_rows(_join([raw.v[sl] for sl in open_parts], np.float16, len(METRICS)))
                if rows.shape[0]:
                    mn, mean, mx = _bucket_stats(rows)
                    t_parts.append(np.array([centre]))
                    open_bucket = np.stack((mn, mean, mx))[:, None, :]
        t = _join(t_parts, np.float64)
        return Window(tier.spec.name, tier.spec.bucket_s, t, u8=u8, f16=f16, open_bucket=open_bucket)

    def _pick(self, t_from: float, tier_name: str | None) -> _TierRing | None:
        """The finest history that still reaches back to `t_from` (None: the raw ring)."""
        if tier_name is not None:
            if tier_name == RAW_TIER:
                return None
            for tier in self.tiers:
                if tier.spec.name == tier_name:
                    return tier
            raise KeyError(f"no tier {tier_name!r}")
        newest = self.last_t if self.last_t is not None else t_from
        if newest - t_from <= self.raw.window_s:
            return None
        for tier in self.tiers:
            if newest - t_from <= tier.spec.span_s:
                return tier
        return self.tiers[-1] if self.tiers else None

    def nbytes(self) -> int:
        return self.raw.nbytes() + sum(t.nbytes() for t in self.tiers)


@dataclass
class HostStatus:
    """What the store knows about a host besides its series."""

    online: bool = False
    source: str | None = None
    simulated: bool = False
    expected_period: float | None = None
    last_t: float | None = None


class TelemetryStore:
    """Telemetry history for many hosts. Ingest from one thread, read from another."""

    def __init__(
        self,
        *,
        raw_window_s: float = 15 * 60.0,
        max_hz: float = 20.0,
        tiers: Sequence[TierSpec] = DEFAULT_TIERS,
        gap_factor: float = 3.0,
    ) -> None:
        self.raw_window_s = raw_window_s
        self.max_hz = max_hz
        self.tiers = tuple(tiers)
        self.gap_factor = gap_factor
        self._lock = threading.Lock()
        self._history: dict[str, dict[str, _DeviceHistory]] = {}
        self._latest: dict[str, dict[str, GpuSample]] = {}
        self._status: dict[str, HostStatus] = {}
        self._host_latest: dict[str, HostSample] = {}
        self._devices_changed = 0  # bumped whenever a device appears or a host is forgotten
        # host -> (the device keys of its last batch, their histories in that order): see ingest_samples
        self._layouts: dict[str, tuple[tuple[str, ...], list[_DeviceHistory]]] = {}

    # --- writing ----------------------------------------------------------------------------

    def set_rate(self, host: str, hz: float | None) -> None:
        """Tell the store the host's sample rate, so gaps are detected from the first samples."""
        with self._lock:
            self._status.setdefault(host, HostStatus()).expected_period = 1.0 / hz if hz else None

    def ingest(self, host: str, batch: SampleBatch) -> None:
        """Add one batch (all devices of `host` at one instant)."""
        self.ingest_samples(host, batch.samples, source=batch.source, simulated=batch.simulated,
                            stored=batch.stored_rows, keys=batch.keys)
        if batch.host is not None:
            self._host_latest[host] = batch.host  # one reference swap: no lock needed for readers

    def ingest_samples(
        self,
        host: str,
        samples: Iterable[GpuSample],
        *,
        source: str | None = None,
        simulated: bool = False,
        rows: F32 | None = None,
        stored: npt.NDArray[np.float16] | None = None,
        keys: tuple[str, ...] | None = None,
    ) -> None:
        """Add samples of one host (any devices, each in time order).

        `rows`: their METRICS as float32, if known; `stored`: the same already encoded as stored
        (`encode_rows`); `keys`: their device keys, one shared tuple while the device list stays the
        same (the store then finds the devices' histories once per device list, not per sample).
        """
        samples = samples if isinstance(samples, list) else list(samples)
        if not samples:
            with self._lock:
                self._status.setdefault(host, HostStatus()).online = True
            return
        n = len(samples)
        if keys is not None and len(keys) != n:
            keys = None  # not these samples' keys: find them one by one
        if stored is None or stored.shape != (n, len(METRICS)):
            # One conversion for the whole batch: readings -> stored rows (None becomes NaN).
            if rows is None or rows.shape != (n, len(METRICS)):
                rows = np.array([_row_of(s) for s in samples], dtype=np.float32)
            stored = encode_rows(rows)
        with self._lock:
            status = self._status.get(host)
            if status is None:
                status = self._status[host] = HostStatus()
            latest = self._latest.setdefault(host, {})
            period = status.expected_period
            cached = self._layouts.get(host)
            if keys is not None and cached is not None and cached[0] is keys:
                devices = cached[1]
            else:
                devices = self._devices_of(host, samples, keys)
            for i, sample in enumerate(samples):
                devices[i].add(sample.t, stored[i], period)
            if keys is not None:
                latest.update(zip(keys, samples, strict=True))
            else:
                for sample in samples:
                    latest[sample.key] = sample
            status.last_t = samples[-1].t
            status.online = True
            if source is not None:
                status.source = source
            status.simulated = simulated

    def _devices_of(self, host: str, samples: list[GpuSample], keys: tuple[str, ...] | None) -> list[_DeviceHistory]:
        """The histories of `samples`' devices, in order, made where new (under the lock)."""
        history = self._history.setdefault(host, {})
        devices = []
        for i, sample in enumerate(samples):
            key = keys[i] if keys is not None else sample.key
            dev = history.get(key)
            if dev is None:
                dev = history[key] = _DeviceHistory(self.raw_window_s, self.max_hz, self.tiers, self.gap_factor)
                self._devices_changed += 1
            devices.append(dev)
        if keys is not None:
            self._layouts[host] = (keys, devices)
        return devices

    def mark_offline(self, host: str, t: float) -> None:
        """The host dropped (disconnect): break every line of it at `t`."""
        with self._lock:
            status = self._status.setdefault(host, HostStatus())
            status.online = False
            for dev in self._history.get(host, {}).values():
                dev.break_line(t)

    def drop_devices(self, host: str, keys: Iterable[str]) -> None:
        """Drop devices that no longer exist (MIG devices after a layout change), with their history."""
        with self._lock:
            history, latest = self._history.get(host, {}), self._latest.get(host, {})
            for key in keys:
                history.pop(key, None)
                latest.pop(key, None)
            self._layouts.pop(host, None)

    def forget(self, host: str) -> None:
        """Drop everything about `host` (profile removed)."""
        with self._lock:
            self._history.pop(host, None)
            self._layouts.pop(host, None)
            self._devices_changed += 1
            self._latest.pop(host, None)
            self._status.pop(host, None)
            self._host_latest.pop(host, None)

    # --- reading ----------------------------------------------------------------------------

    def hosts(self) -> list[str]:
        with self._lock:
            return sorted(self._status)

    def status(self, host: str) -> HostStatus:
        with self._lock:
            s = self._status.get(host, HostStatus())
            return HostStatus(s.online, s.source, s.simulated, s.expected_period, s.last_t)

    @property
    def devices_version(self) -> int:
        """Changes whenever any host's device set does: a view may keep its device_keys() till then."""
        return self._devices_changed

    def device_keys(self, host: str) -> list[str]:
        """Device keys of a host ("0", "0/mig1", ...), GPUs in index order."""
        with self._lock:
            keys = list(self._history.get(host, {}))
        return sorted(keys, key=_key_order)

    def latest(self, host: str) -> dict[str, GpuSample]:
        """The newest sample per device (cheap: no copies of history)."""
        with self._lock:
            return dict(self._latest.get(host, {}))

    def host_latest(self, host: str) -> HostSample | None:
        """The host's newest CPU, memory and load figures (None: its source does not report them)."""
        return self._host_latest.get(host)

    def window(self, host: str, key: str, t_from: float, t_to: float, *, tier: str | None = None) -> Window:
        """History of one device between t_from and t_to, from the finest tier that covers it.

        Raises KeyError for an unknown host or device.
        """
        with self._lock:
            return self._history[host][key].window(t_from, t_to, tier)

    def series(self, host: str, key: str, metric: str, t_from: float, t_to: float) -> tuple[F64, F64]:
        """(t, values) of one metric; bucket means on downsampled tiers; NaN at gaps."""
        return self.window(host, key, t_from, t_to).column(metric)

    def memory_bytes(self) -> int:
        """Bytes held by the history arrays (the bulk of the store's memory)."""
        with self._lock:
            return sum(dev.nbytes() for devs in self._history.values() for dev in devs.values())


def _key_order(key: str) -> tuple[int, int]:
    gpu, _, mig = key.partition("/mig")
    try:
        return int(gpu), int(mig) if mig else -1
    except ValueError:
        return (1 << 30, 0)
