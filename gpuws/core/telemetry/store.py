"""Bounded, tiered telemetry history in numpy ring buffers.

Per (host, device key) the store keeps:

- a *raw* ring at full sample rate for the recent window (15 min by default, up to 20 Hz). It
  starts small and grows only while it holds less than the window, so memory follows the real
  rate; once full it overwrites its oldest rows;
- *tiers* of fixed-size rings of min/mean/max buckets (5 s buckets for 2 h, 60 s for 24 h).
  A bucket is computed from the raw rows when it closes, so ingest stays a row copy.

Memory is therefore flat over a session of any length (see `memory_bytes`).

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

from gpuws.core.telemetry.sample import GpuSample, SampleBatch

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]

# The numeric series kept as history; constants (totals, limits, max clocks) live in `latest`.
METRICS: Final[tuple[str, ...]] = (
    "util_gpu_pct",
    "util_mem_pct",
    "mem_used_mib",
    "temp_c",
    "power_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "pcie_rx_kib_s",
    "pcie_tx_kib_s",
    "fan_pct",
    "enc_util_pct",
    "dec_util_pct",
)
METRIC_INDEX: Final = {name: i for i, name in enumerate(METRICS)}
_row_of = attrgetter(*METRICS)

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


DEFAULT_TIERS: Final = (TierSpec(5.0, 2 * 3600.0), TierSpec(60.0, 24 * 3600.0))


@dataclass(frozen=True)
class Window:
    """History of one device over a time range: `t` (unix s) and (rows, len(metrics)) arrays.

    For the raw tier min, mean and max are the same array. NaN rows are gaps.
    """

    tier: str
    bucket_s: float | None
    t: F64
    mean: F32
    min: F32
    max: F32
    metrics: tuple[str, ...] = METRICS

    def column(self, metric: str) -> tuple[F64, F64]:
        """(t, values) of one metric as float64, NaN where there is a gap."""
        return self.t, self.mean[:, METRIC_INDEX[metric]].astype(np.float64)


class _RawRing:
    """Full-rate rows: t (float64) and metrics (float32); grows up to `max_rows`."""

    def __init__(self, window_s: float, max_rows: int, initial_rows: int = 256) -> None:
        self.window_s = window_s
        self.max_rows = max_rows
        cap = min(initial_rows, max_rows)
        self.t = np.empty(cap, dtype=np.float64)
        self.v = np.empty((cap, len(METRICS)), dtype=np.float32)
        self.head = 0  # next row written
        self.size = 0

    def append(self, t: float, row: Sequence[float | None]) -> None:
        cap = self.t.shape[0]
        if self.size == cap and cap < self.max_rows and self.t[self.head] > t - self.window_s:
            self._grow()
            cap = self.t.shape[0]
        self.t[self.head] = t
        self.v[self.head] = row  # None becomes NaN in a float array
        self.head = (self.head + 1) % cap
        if self.size < cap:
            self.size += 1

    def _grow(self) -> None:
        t, v = self.ordered()
        cap = min(self.max_rows, self.t.shape[0] * 2)
        self.t = np.empty(cap, dtype=np.float64)
        self.v = np.empty((cap, len(METRICS)), dtype=np.float32)
        self.t[: t.shape[0]] = t
        self.v[: t.shape[0]] = v
        self.head = t.shape[0] % cap
        self.size = t.shape[0]

    def ordered(self) -> tuple[F64, F32]:
        """All rows, oldest first (copies)."""
        cap = self.t.shape[0]
        start = (self.head - self.size) % cap
        if start + self.size <= cap:
            return self.t[start : start + self.size].copy(), self.v[start : start + self.size].copy()
        idx = (np.arange(self.size) + start) % cap
        return self.t[idx], self.v[idx]

    def tail(self, rows: int) -> F32:
        """The last `rows` metric rows (oldest first)."""
        rows = min(rows, self.size)
        cap = self.t.shape[0]
        start = (self.head - rows) % cap
        if start + rows <= cap:
            return self.v[start : start + rows]
        return np.concatenate((self.v[start:], self.v[: self.head]))

    def nbytes(self) -> int:
        return int(self.t.nbytes + self.v.nbytes)


class _TierRing:
    """Fixed-size ring of (t, min, mean, max) buckets."""

    def __init__(self, spec: TierSpec) -> None:
        self.spec = spec
        cap = spec.capacity
        self.t = np.empty(cap, dtype=np.float64)
        self.stats = np.empty((3, cap, len(METRICS)), dtype=np.float32)  # min, mean, max
        self.head = 0
        self.size = 0
        self.open_bucket: int | None = None  # index (t // bucket_s) of the bucket being filled
        self.open_rows = 0  # raw rows that belong to the open bucket

    def append(self, t: float, mn: F32 | float, mean: F32 | float, mx: F32 | float) -> None:
        self.t[self.head] = t
        self.stats[0, self.head] = mn
        self.stats[1, self.head] = mean
        self.stats[2, self.head] = mx
        cap = self.t.shape[0]
        self.head = (self.head + 1) % cap
        if self.size < cap:
            self.size += 1

    def nbytes(self) -> int:
        return int(self.t.nbytes + self.stats.nbytes)


def _ring_slices(t: F64, head: int, size: int, t_from: float, t_to: float) -> list[slice]:
    """Index slices (oldest first) of a ring's rows with t_from <= t <= t_to, without copying the ring."""
    cap = t.shape[0]
    start = (head - size) % cap
    segments = [(start, start + size)] if start + size <= cap else [(start, cap), (0, head)]
    out = []
    for lo, hi in segments:
        seg = t[lo:hi]
        a = lo + int(seg.searchsorted(t_from, side="left"))  # the method: no wrapper overhead per read
        b = lo + int(seg.searchsorted(t_to, side="right"))
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
    missing = np.isnan(rows)
    if not missing.any():  # the usual case, and a read-path hot spot (the open bucket of every window)
        mean = (rows.sum(axis=0, dtype=np.float64) / rows.shape[0]).astype(np.float32)
        return rows.min(axis=0), mean, rows.max(axis=0)
    valid = ~missing
    count = valid.sum(axis=0)
    total = np.where(valid, rows, 0.0).sum(axis=0, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (total / count).astype(np.float32)
    return np.fmin.reduce(rows, axis=0), mean, np.fmax.reduce(rows, axis=0)


class _DeviceHistory:
    """Raw ring, tiers and gap detection for one device of one host."""

    def __init__(self, raw_window_s: float, max_hz: float, tiers: Sequence[TierSpec], gap_factor: float) -> None:
        self.raw = _RawRing(raw_window_s, max_rows=math.ceil(raw_window_s * max_hz) + 1)
        self.tiers = [_TierRing(spec) for spec in tiers]
        self.gap_factor = gap_factor
        self.last_t: float | None = None
        self.period: float | None = None  # smoothed sample period, for gap detection
        self.nan_row = (math.nan,) * len(METRICS)

    def add(self, t: float, row: Sequence[float | None], expected_period: float | None) -> None:
        last = self.last_t
        if last is not None:
            dt = t - last
            if dt <= 0:
                return  # duplicate or out of order (host clock stepped back): drop it
            period = expected_period or self.period
            if period is not None and dt > self.gap_factor * period:
                self._append(last + period, self.nan_row)
            elif expected_period is None:
                self.period = dt if self.period is None else 0.9 * self.period + 0.1 * dt
        self._append(t, row)
        self.last_t = t

    def break_line(self, t: float) -> None:
        """Write a gap row (host went offline) unless the last row already is one."""
        if self.last_t is not None and t > self.last_t:
            self._append(t, self.nan_row)
            self.last_t = t

    def _append(self, t: float, row: Sequence[float | None]) -> None:
        for tier in self.tiers:
            bucket = int(t // tier.spec.bucket_s)
            if tier.open_bucket is None:
                tier.open_bucket = bucket
            elif bucket != tier.open_bucket:
                self._close(tier, bucket)
            tier.open_rows += 1
        self.raw.append(t, row)

    def _close(self, tier: _TierRing, next_bucket: int) -> None:
        assert tier.open_bucket is not None
        width = tier.spec.bucket_s
        mn, mean, mx = _bucket_stats(self.raw.tail(tier.open_rows))
        tier.append((tier.open_bucket + 0.5) * width, mn, mean, mx)
        if next_bucket > tier.open_bucket + 1:  # empty buckets in between: one NaN row breaks the line
            tier.append((tier.open_bucket + 1.5) * width, math.nan, math.nan, math.nan)
        tier.open_bucket = next_bucket
        tier.open_rows = 0

    def window(self, t_from: float, t_to: float, tier_name: str | None) -> Window:
        tier = self._pick(t_from, tier_name)
        if tier is None:
            raw = self.raw
            parts = _ring_slices(raw.t, raw.head, raw.size, t_from, t_to)
            t = _join([raw.t[sl] for sl in parts], np.float64)
            v = _join([raw.v[sl] for sl in parts], np.float32, len(METRICS))
            return Window(RAW_TIER, None, t, v, v, v)
        parts = _ring_slices(tier.t, tier.head, tier.size, t_from, t_to)
        t_parts = [tier.t[sl] for sl in parts]
        s_parts = [tier.stats[:, sl] for sl in parts]
        if tier.open_bucket is not None and tier.open_rows:
            # The bucket still filling, computed on the fly so the newest minute is not missing.
            centre = (tier.open_bucket + 0.5) * tier.spec.bucket_s
            if t_from <= centre <= t_to:
                mn, mean, mx = _bucket_stats(self.raw.tail(tier.open_rows))
                t_parts.append(np.array([centre]))
                s_parts.append(np.stack((mn, mean, mx))[:, None, :])
        t = _join(t_parts, np.float64)
        stats = np.concatenate(s_parts, axis=1) if s_parts else np.empty((3, 0, len(METRICS)), np.float32)
        return Window(tier.spec.name, tier.spec.bucket_s, t, stats[1], stats[0], stats[2])

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

    # --- writing ----------------------------------------------------------------------------

    def set_rate(self, host: str, hz: float | None) -> None:
        """Tell the store the host's sample rate, so gaps are detected from the first samples."""
        with self._lock:
            self._status.setdefault(host, HostStatus()).expected_period = 1.0 / hz if hz else None

    def ingest(self, host: str, batch: SampleBatch) -> None:
        """Add one batch (all devices of `host` at one instant)."""
        self.ingest_samples(host, batch.samples, source=batch.source, simulated=batch.simulated)

    def ingest_samples(
        self, host: str, samples: Iterable[GpuSample], *, source: str | None = None, simulated: bool = False
    ) -> None:
        """Add samples of one host (any devices, each in time order)."""
        with self._lock:
            status = self._status.get(host)
            if status is None:
                status = self._status[host] = HostStatus()
            history = self._history.setdefault(host, {})
            latest = self._latest.setdefault(host, {})
            period = status.expected_period
            for sample in samples:
                key = sample.key
                dev = history.get(key)
                if dev is None:
                    dev = history[key] = _DeviceHistory(self.raw_window_s, self.max_hz, self.tiers, self.gap_factor)
                dev.add(sample.t, _row_of(sample), period)
                latest[key] = sample
                status.last_t = sample.t
            status.online = True
            if source is not None:
                status.source = source
            status.simulated = simulated

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

    def forget(self, host: str) -> None:
        """Drop everything about `host` (profile removed)."""
        with self._lock:
            self._history.pop(host, None)
            self._latest.pop(host, None)
            self._status.pop(host, None)

    # --- reading ----------------------------------------------------------------------------

    def hosts(self) -> list[str]:
        with self._lock:
            return sorted(self._status)

    def status(self, host: str) -> HostStatus:
        with self._lock:
            s = self._status.get(host, HostStatus())
            return HostStatus(s.online, s.source, s.simulated, s.expected_period, s.last_t)

    def device_keys(self, host: str) -> list[str]:
        """Device keys of a host ("0", "0/mig1", ...), GPUs in index order."""
        with self._lock:
            keys = list(self._history.get(host, {}))
        return sorted(keys, key=_key_order)

    def latest(self, host: str) -> dict[str, GpuSample]:
        """The newest sample per device (cheap: no copies of history)."""
        with self._lock:
            return dict(self._latest.get(host, {}))

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
