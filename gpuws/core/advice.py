"""Right-size advice: from a window of measured use to the layout that fits, with the money.

Input is plain per-GPU series (`UsageSeries`: times, utilisation, memory used, throttling), so
any source can feed it: the app's telemetry store (`series_from_window`), samples collected by
the CLI (`series_from_samples`), or a fleet's Prometheus (DCGM engine activity as utilisation on
MIG). The layouts a GPU can take come as `LayoutChoice`s with their memory, compute share and
price (`choices_from_targets` turns the resize catalog's options into them).

The rules, in order (thresholds in `AdvicePolicy`):

- too few samples or too short a span: **not enough data**, never a guess;
- idle for most of the window while the meter runs: **stop**;
- sustained utilisation >= 80 %, peak memory >= 90 % of the slice, or throttling while busy:
  **larger** (the cheapest bigger layout of the card); already the largest: **keep**, saying so;
- a cheaper single-slice layout where peak memory x safety margin fits the slice's memory and
  the p95 utilisation (as a share of the whole card) is below the slice's compute share:
  **smaller**;
- otherwise **keep**.

Confidence is low when the span is short or has gaps, medium under an hour, high beyond.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from gpuws.core.errors import ValidationError
from gpuws.core.telemetry.metrics import METRIC_INDEX
from gpuws.core.telemetry.store import RAW_TIER

if TYPE_CHECKING:
    from gpuws.core.models import HostProfile
    from gpuws.core.resize.pricing import PriceBook
    from gpuws.core.resize.state import GpuMigState
    from gpuws.core.resize.targets import TargetOption
    from gpuws.core.telemetry.sample import GpuSample
    from gpuws.core.telemetry.store import TelemetryStore, Window

F64 = npt.NDArray[np.float64]

HOURS_PER_MONTH: Final = 730.0  # 365 x 24 / 12: how cloud price lists quote a month
DEFAULT_WINDOW_S: Final = 24 * 3600.0
# The rules' floor: `gpuws advise HOST` watches the host for as long as it is asked to (--observe,
# 120 s by default), right then, and advises on that window.
DEFAULT_MIN_DATA_S: Final = 30.0
# Advice from a history (the window's advice strip, the fleet view, `gpuws advise FLEET`): ten
# minutes, the span below which confidence is "low". From less, no advice and no money is projected
# (#35: the fleet view said "Over 24 h: ... saves $4.29/h" from 33 s); every view says how far along.
HISTORY_MIN_DATA_S: Final = 600.0


class Advice(StrEnum):
    """What to do with one GPU."""

    KEEP = "keep"
    SMALLER = "smaller"
    LARGER = "larger"
    STOP = "stop"
    NOT_ENOUGH_DATA = "not enough data"


class Confidence(StrEnum):
    """How much the window supports the advice."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


@dataclass(frozen=True)
class AdvicePolicy:
    """The thresholds of the rules (see the module docstring)."""

    min_data_s: float = DEFAULT_MIN_DATA_S  # less measured span than this: not enough data
    min_samples: int = 3
    safety_margin: float = 1.2  # peak memory x this must fit the smaller slice
    idle_util_pct: float = 5.0  # at or below: an idle sample
    stop_idle_fraction: float = 0.9  # idle this share of the window: stop
    saturated_util_pct: float = 80.0  # median utilisation at or above: larger
    memory_full_fraction: float = 0.9  # peak memory at or above this share of the slice: larger
    throttled_busy_fraction: float = 0.2  # throttled this share of busy samples: larger
    medium_span_s: float = 600.0  # shorter spans give low confidence
    high_span_s: float = 3600.0  # at least this (and few gaps) gives high confidence
    max_gap_fraction: float = 0.1  # more of the span missing: low confidence

    def __post_init__(self) -> None:
        if not (math.isfinite(self.min_data_s) and self.min_data_s >= 0):
            raise ValidationError("min_data_s", "must be a number of seconds >= 0")
        if self.min_samples < 1:
            raise ValidationError("min_samples", "must be at least 1")
        if not self.safety_margin >= 1.0:
            raise ValidationError("safety_margin", "must be at least 1")


# --- input ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageSeries:
    """One GPU's measured use over a window; NaN marks a missing value or a gap.

    `util_pct` is GPU utilisation (or, on MIG, engine activity) in percent of the *current*
    slice; all NaN when the source cannot tell. `throttled` is None when the source cannot tell.
    """

    t: F64
    util_pct: F64
    mem_used_mib: F64
    mem_total_mib: float | None = None
    throttled: npt.NDArray[np.bool_] | None = None

    @classmethod
    def of(
        cls,
        t: Sequence[float],
        util_pct: Sequence[float | None],
        mem_used_mib: Sequence[float | None],
        mem_total_mib: float | None = None,
        throttled: Sequence[bool] | None = None,
    ) -> UsageSeries:
        """Build from plain sequences (None becomes NaN); lengths must match."""
        n = len(t)
        if len(util_pct) != n or len(mem_used_mib) != n or (throttled is not None and len(throttled) != n):
            raise ValidationError("series", "t, util_pct, mem_used_mib and throttled must have the same length")
        return cls(
            np.asarray(t, dtype=np.float64),
            np.array([math.nan if v is None else v for v in util_pct], dtype=np.float64),
            np.array([math.nan if v is None else v for v in mem_used_mib], dtype=np.float64),
            mem_total_mib,
            None if throttled is None else np.asarray(throttled, dtype=np.bool_),
        )


def series_from_samples(samples: Sequence[GpuSample]) -> UsageSeries:
    """A series from `GpuSample`s of one device (time order); throttling from the clock reasons."""
    known = [s.throttle_reasons is not None for s in samples]
    totals = [s.mem_total_mib for s in samples if s.mem_total_mib]
    return UsageSeries.of(
        [s.t for s in samples],
        [s.util_gpu_pct for s in samples],
        [s.mem_used_mib for s in samples],
        totals[-1] if totals else None,
        [bool(s.throttle_reasons) for s in samples] if samples and all(known) else None,
    )


def series_from_window(window: Window, mem_total_mib: float | None) -> UsageSeries:
    """A series from a telemetry-store window (bucket means on downsampled tiers).

    The store keeps no throttle history, so `throttled` is unknown here. On downsampled tiers
    the peak memory is the bucket maximum, so a short spike is not averaged away.
    """
    _, util = window.column("util_gpu_pct")
    mem = window.max[:, METRIC_INDEX["mem_used_mib"]].astype(np.float64)
    return UsageSeries(window.t.copy(), util, mem, mem_total_mib, None)


# --- statistics ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageStats:
    """What the rules look at, computed from one `UsageSeries`."""

    samples: int  # rows with a memory or utilisation value
    span_s: float  # first to last such row
    gap_fraction: float  # share of the span without samples
    peak_mem_mib: float | None
    p95_mem_mib: float | None
    mem_total_mib: float | None
    p50_util_pct: float | None  # None: utilisation not reported
    p95_util_pct: float | None
    idle_fraction: float | None  # share of samples at or below the idle threshold
    throttled_busy_fraction: float | None  # share of busy samples that were throttled


def usage_stats(series: UsageSeries, policy: AdvicePolicy | None = None) -> UsageStats:
    """Peak/p95 memory, p50/p95 utilisation, time idle, throttling and gaps of one series."""
    policy = policy or AdvicePolicy()
    t, util, mem = series.t, series.util_pct, series.mem_used_mib
    has_util = ~np.isnan(util)
    has_mem = ~np.isnan(mem)
    valid = has_util | has_mem
    n = int(valid.sum())
    tv = t[valid]
    span = float(tv[-1] - tv[0]) if n >= 2 else 0.0
    gap_fraction = 0.0
    if n >= 3 and span > 0:
        period = float(np.median(np.diff(tv)))
        covered = min(span, period * (n - 1))
        gap_fraction = max(0.0, 1.0 - covered / span)
    peak = p95m = p50u = p95u = idle = throttled = None
    if has_mem.any():
        peak = float(mem[has_mem].max())
        p95m = float(np.percentile(mem[has_mem], 95))
    if has_util.any():
        u = util[has_util]
        p50u = float(np.percentile(u, 50))
        p95u = float(np.percentile(u, 95))
        idle = float((u <= policy.idle_util_pct).mean())
        if series.throttled is not None:
            busy = has_util & (util > policy.idle_util_pct)
            if busy.any():
                throttled = float(series.throttled[busy].mean())
    return UsageStats(n, span, gap_fraction, peak, p95m, series.mem_total_mib, p50u, p95u, idle, throttled)


# --- layouts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayoutChoice:
    """A layout (or instance type) a GPU can take, with what it gives and costs.

    `compute_share` is the share of the whole card's compute (1.0 for the full card); None when
    unknown. `instances` is the number of MIG instances: one workload uses one, so only layouts
    of at most one instance are offered as a smaller target.
    """

    target: str
    memory_gib: float | None
    compute_share: float | None
    price_per_hour: float | None
    instances: int = 0
    selectable: bool = True


def choices_from_targets(options: Sequence[TargetOption]) -> tuple[LayoutChoice | None, list[LayoutChoice]]:
    """(current, all) from the resize catalog's options (`core.resize.targets.target_options`)."""
    choices: list[LayoutChoice] = []
    current: LayoutChoice | None = None
    for option in options:
        figures = option.figures
        share = figures.compute_share
        choice = LayoutChoice(
            option.target, figures.memory_gib, None if share is None else float(share),
            figures.price_per_hour, figures.instances, option.selectable,
        )
        choices.append(choice)
        if option.current:
            current = choice
    return current, choices


# --- the advice ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuAdvice:
    """The advice for one GPU: what to do, to which layout, for how much, and why (in numbers)."""

    gpu: int
    current: str
    advice: Advice
    target: str | None
    price_delta_per_hour: float | None
    confidence: Confidence
    reasons: tuple[str, ...]
    stats: UsageStats | None = field(default=None, compare=False)
    # For "stop": the smallest layout that would fit, if it must stay up (offered in the window;
    # not part of the JSON, whose target for "stop" is null).
    alternative: str | None = None
    # For "not enough data": the span the advice needs (the policy's), to say how far along it is.
    min_data_s: float | None = field(default=None, compare=False)

    @property
    def waiting_text(self) -> str:
        """'not enough data yet (33 s of 600 s)' (how much is measured of what the advice needs)."""
        have = self.stats.span_s if self.stats is not None else 0.0
        return data_wanted_text(have, self.min_data_s) if self.min_data_s is not None else "not enough data yet"

    @property
    def price_delta_per_month(self) -> float | None:
        d = self.price_delta_per_hour
        return None if d is None else round(d * HOURS_PER_MONTH, 2)

    @property
    def signature(self) -> tuple[str, str | None]:
        """What a dismissal remembers: the advice comes back only when this changes."""
        return (self.advice.value, self.target)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `gpuws advise --json` (one entry of "gpus")."""
        return {
            "gpu": self.gpu,
            "current": self.current,
            "advice": self.advice.value,
            "target": self.target,
            "price_delta_per_hour": self.price_delta_per_hour,
            "confidence": self.confidence.value,
            "reasons": list(self.reasons),
        }

    def headline(self) -> str:
        """One sentence with the money, for the window and the CLI table."""
        money = money_text(self.price_delta_per_hour)
        if self.advice is Advice.NOT_ENOUGH_DATA:
            # Waiting helps only when the data is short; a slice whose GPU gives no engine
            # activity (no GPM: pre-Hopper) never gets utilisation, and the line says so.
            unsupported = next((r for r in self.reasons if r.startswith(UNREPORTED_UTIL)), None)
            return f"GPU {self.gpu}: not enough data: {unsupported}" if unsupported else (
                f"GPU {self.gpu}: {self.waiting_text}")
        if self.advice is Advice.STOP:
            return f"GPU {self.gpu}: stop it (idle){money}"
        if self.advice is Advice.KEEP:
            return f"GPU {self.gpu}: keep {self.current}"
        where = f" to {self.target}" if self.target else ""
        return f"GPU {self.gpu}: {self.advice.value}{where}{money}"


UNREPORTED_UTIL: Final = "utilisation is not reported for this GPU"


def data_wanted_text(have_s: float, need_s: float) -> str:
    """How every view says advice is still measuring: "not enough data yet (33 s of 600 s)"."""
    return f"not enough data yet ({min(have_s, need_s):.0f} s of {need_s:.0f} s)"


def money_text(delta: float | None) -> str:
    """ ' (-$2.15/h, -$1,569.50/month)', or '' when the delta is unknown or zero."""
    if delta is None or abs(delta) < 0.005:
        return ""
    sign = "-" if delta < 0 else "+"
    return f" ({sign}${abs(delta):,.2f}/h, {sign}${abs(delta) * HOURS_PER_MONTH:,.2f}/month)"


def _pct(x: float) -> str:
    return f"{x:.0f} %"


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _delta(target: LayoutChoice | None, current: LayoutChoice) -> float | None:
    if target is None:
        return 0.0 if current.price_per_hour is not None else None
    if target.price_per_hour is None or current.price_per_hour is None:
        return None
    return round(target.price_per_hour - current.price_per_hour, 4)


def _confidence(stats: UsageStats, policy: AdvicePolicy) -> Confidence:
    if stats.span_s < policy.medium_span_s or stats.gap_fraction > policy.max_gap_fraction:
        return Confidence.LOW
    if stats.span_s < policy.high_span_s or stats.gap_fraction > policy.max_gap_fraction / 5:
        return Confidence.MEDIUM
    return Confidence.HIGH


def _cheapest(choices: Sequence[LayoutChoice]) -> LayoutChoice | None:
    if not choices:
        return None
    # Unknown prices sort last; then the least compute and memory (the tightest fit).
    return min(choices, key=lambda c: (c.price_per_hour is None, c.price_per_hour or 0.0,
                                       c.compute_share or 0.0, c.memory_gib or 0.0))


def _fits(choice: LayoutChoice, need_mem_gib: float, need_share: float) -> bool:
    return (choice.memory_gib is not None and choice.compute_share is not None
            and choice.memory_gib >= need_mem_gib and choice.compute_share > need_share)


def advise_gpu(
    gpu: int,
    series: UsageSeries | UsageStats,
    current: LayoutChoice,
    choices: Sequence[LayoutChoice] = (),
    policy: AdvicePolicy | None = None,
) -> GpuAdvice:
    """The advice for GPU `gpu` now in layout `current`, given the layouts it can take."""
    policy = policy or AdvicePolicy()
    stats = series if isinstance(series, UsageStats) else usage_stats(series, policy)
    confidence = _confidence(stats, policy)

    def result(advice: Advice, target: LayoutChoice | None, reasons: list[str],
               delta: float | None = None, conf: Confidence = confidence,
               alternative: LayoutChoice | None = None) -> GpuAdvice:
        if advice is not Advice.STOP and advice is not Advice.NOT_ENOUGH_DATA:
            delta = _delta(target, current)
        return GpuAdvice(gpu, current.target, advice, target.target if target else None,
                         delta, conf, tuple(reasons), stats, alternative.target if alternative else None,
                         policy.min_data_s if advice is Advice.NOT_ENOUGH_DATA else None)

    if stats.samples < policy.min_samples or stats.span_s < policy.min_data_s:
        return result(Advice.NOT_ENOUGH_DATA, None, [
            f"{stats.samples} samples over {_duration(stats.span_s)}; advice needs at least "
            f"{_duration(policy.min_data_s)} of data"], conf=Confidence.LOW)

    reasons: list[str] = []
    if stats.gap_fraction > policy.max_gap_fraction:
        reasons.append(f"{_pct(100 * stats.gap_fraction)} of the {_duration(stats.span_s)} window has no samples")
    slice_mib = stats.mem_total_mib or (current.memory_gib * 1024 if current.memory_gib else None)
    mem_full = (stats.peak_mem_mib is not None and slice_mib is not None
                and stats.peak_mem_mib >= policy.memory_full_fraction * slice_mib)
    mem_text = (f"peak memory {_gib(stats.peak_mem_mib)}" + (f" of {_gib(slice_mib)}" if slice_mib else "")
                if stats.peak_mem_mib is not None else "memory not reported")

    if stats.p50_util_pct is None or stats.p95_util_pct is None or stats.idle_fraction is None:
        # Utilisation unknown (MIG without engine activity): memory alone can only say "larger".
        if mem_full and slice_mib is not None and stats.peak_mem_mib is not None:
            return _larger(result, current, choices, stats, policy, slice_mib, [
                *reasons, f"{mem_text} (>= {_pct(100 * policy.memory_full_fraction)} of the slice)"], by_memory=True)
        return result(Advice.NOT_ENOUGH_DATA, None, [
            *reasons, f"{UNREPORTED_UTIL} (MIG without engine activity)", mem_text],
            conf=Confidence.LOW)

    window = _duration(stats.span_s)
    if stats.idle_fraction >= policy.stop_idle_fraction:
        reasons = [f"idle {_pct(100 * stats.idle_fraction)} of {window} "
                   f"(utilisation <= {_pct(policy.idle_util_pct)})", mem_text, *reasons]
        delta = None if current.price_per_hour is None else -current.price_per_hour
        if delta is not None:
            reasons.append(f"stopping saves ${current.price_per_hour:,.2f}/h "
                           f"(${(current.price_per_hour or 0) * HOURS_PER_MONTH:,.2f}/month)")
        small = _smaller_target(current, choices, stats, policy)
        if small is not None and small.price_per_hour is not None:
            reasons.append(f"to keep it up, {small.target} fits for ${small.price_per_hour:,.2f}/h")
        return result(Advice.STOP, None, reasons, delta=delta, alternative=small)

    saturated = stats.p50_util_pct >= policy.saturated_util_pct
    throttled = (stats.throttled_busy_fraction is not None
                 and stats.throttled_busy_fraction >= policy.throttled_busy_fraction)
    util_text = f"utilisation p50 {_pct(stats.p50_util_pct)}, p95 {_pct(stats.p95_util_pct)}"
    if saturated or mem_full or throttled:
        why = []
        if saturated:
            why.append(f"{util_text} (sustained >= {_pct(policy.saturated_util_pct)})")
        if mem_full:
            why.append(f"{mem_text} (>= {_pct(100 * policy.memory_full_fraction)} of the slice)")
        if throttled and stats.throttled_busy_fraction is not None:
            why.append(f"throttled {_pct(100 * stats.throttled_busy_fraction)} of the busy time")
        return _larger(result, current, choices, stats, policy, slice_mib, why + reasons,
                       by_memory=mem_full, by_compute=saturated or throttled)

    small = _smaller_target(current, choices, stats, policy)
    facts = [util_text, mem_text, f"idle {_pct(100 * stats.idle_fraction)} of {window}"]
    if small is not None:
        assert stats.peak_mem_mib is not None and small.memory_gib is not None
        facts.append(f"{small.target} has {small.memory_gib:g} GiB (>= peak x {policy.safety_margin:g}) "
                     f"and {_pct(100 * (small.compute_share or 0))} of the card's compute")
        return result(Advice.SMALLER, small, facts + reasons)
    last = ("no cheaper layout fits this use" if choices
            else "no other layout is listed for it; its size changes with the instance type (provider)")
    return result(Advice.KEEP, None, [*facts, *reasons, last])


def _smaller_target(
    current: LayoutChoice, choices: Sequence[LayoutChoice], stats: UsageStats, policy: AdvicePolicy
) -> LayoutChoice | None:
    if stats.peak_mem_mib is None or current.compute_share is None:
        return None
    need_mem = stats.peak_mem_mib * policy.safety_margin / 1024
    share = current.compute_share
    need_share = (stats.p95_util_pct or 0.0) / 100 * share
    price = current.price_per_hour

    def smaller(c: LayoutChoice) -> bool:
        # Cheaper when the current price is known; without one (a fleet GPU that no profile
        # prices), a layout with less of the card's compute is the smaller one, money unknown.
        if price is not None:
            return c.price_per_hour is not None and c.price_per_hour < price
        return c.compute_share is not None and c.compute_share < share

    cheaper = [
        c for c in choices
        if c.selectable and c.instances <= 1 and c.target != current.target and _fits(c, need_mem, need_share)
        and smaller(c)
    ]
    return _cheapest(cheaper)


def _larger(
    result: Callable[..., GpuAdvice], current: LayoutChoice, choices: Sequence[LayoutChoice], stats: UsageStats,
    policy: AdvicePolicy, slice_mib: float | None, reasons: list[str],
    *, by_memory: bool = False, by_compute: bool = False,
) -> GpuAdvice:
    need_mem = (stats.peak_mem_mib or 0.0) * policy.safety_margin / 1024
    cur_mem = current.memory_gib if current.memory_gib is not None else (slice_mib or 0.0) / 1024
    cur_share = current.compute_share
    bigger = []
    for c in choices:
        if not c.selectable or c.instances > 1 or c.target == current.target:
            continue
        if c.memory_gib is None or c.compute_share is None or cur_share is None:
            continue
        if by_memory and not (c.memory_gib > cur_mem and c.memory_gib >= need_mem):
            continue
        if by_compute and not c.compute_share > cur_share:
            continue
        if c.compute_share < cur_share or c.memory_gib < cur_mem:
            continue
        bigger.append(c)
    target = _cheapest(bigger)
    if target is None:
        last = (f"{current.target} is already the largest layout of this card" if choices
                else f"{current.target} changes size only with the instance type")
        return result(Advice.KEEP, None, [*reasons, f"{last}; more needs a bigger instance type (provider)"])
    return result(Advice.LARGER, target, reasons)


# --- durations -----------------------------------------------------------------------------------

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE | re.ASCII)
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str, what: str = "--window") -> float:
    """Seconds from '90', '90s', '15m', '24h' or '7d'; ValidationError otherwise."""
    match = _DURATION_RE.match(text or "")
    if not match:
        raise ValidationError(what, f"cannot read {text[:40]!r}; write a duration like 90s, 15m, 24h or 7d")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2).lower()]
    if not 0 < seconds <= 366 * 86400:
        raise ValidationError(what, "must be more than 0 and at most a year")
    return seconds


# --- a host --------------------------------------------------------------------------------------


def advise_host(
    states: Sequence[GpuMigState],
    profile: HostProfile | None,
    series_by_gpu: Mapping[int, UsageSeries],
    policy: AdvicePolicy | None = None,
) -> list[GpuAdvice]:
    """Advice for every GPU of a host: its MIG state and prices from the resize catalog and the
    host profile (`core.resize.pricing`), its use from `series_by_gpu` (no series: not enough data)."""
    from gpuws.core.resize.pricing import price_book

    return [advise_state(state, price_book(profile, state.model, len(states)),
                         series_by_gpu.get(state.index) or UsageSeries.of([], [], []), policy)
            for state in states]


def advise_state(state: GpuMigState, prices: PriceBook, series: UsageSeries,
                 policy: AdvicePolicy | None = None, *,
                 choices: tuple[LayoutChoice | None, list[LayoutChoice]] | None = None) -> GpuAdvice:
    """Advice for one GPU in MIG state `state` priced by `prices` (a host's, or a fleet GPU's).

    `choices`: `choices_from_targets(target_options(state, prices))` when the caller has it already.
    """
    from gpuws.core.resize.targets import is_vgpu, target_options

    current, options = choices if choices is not None else choices_from_targets(target_options(state, prices))
    choices_list = list(options)
    if current is None:  # a vGPU guest: its layouts change only through the provider
        name = state.name if is_vgpu(state.name) else state.layout.describe()
        current = LayoutChoice(name, None, None, prices.full_card)
        choices_list = []
    return advise_gpu(state.index, series, current, choices_list, policy)


def host_report(host: str, window_s: float, advices: Sequence[GpuAdvice]) -> dict[str, Any]:
    """The JSON document of `gpuws advise --json`."""
    return {"host": host, "window_s": round(window_s), "gpus": [a.to_dict() for a in advices]}


def advise_from_store(
    store: TelemetryStore,
    host: str,
    states: Sequence[GpuMigState],
    profile: HostProfile | None,
    *,
    window_s: float = DEFAULT_WINDOW_S,
    now: float,
    policy: AdvicePolicy | None = None,
) -> list[GpuAdvice]:
    """Advice for every GPU of `host` from the last `window_s` of the app's telemetry history.

    Reads copies from the store (thread-safe), then computes: call it off the GUI thread.
    """
    latest = store.latest(host)
    series: dict[int, UsageSeries] = {}
    for state in states:
        key = str(state.index)
        try:
            # The raw ring first: when the whole history fits in it, the full-rate samples beat
            # the 1-minute buckets a 24 h request would get (minutes of history = a few buckets).
            raw_from = now - min(window_s, store.raw_window_s)
            window = store.window(host, key, raw_from, now, tier=RAW_TIER)
            if window_s > store.raw_window_s and (window.t.size == 0 or window.t[0] < raw_from + 60.0):
                window = store.window(host, key, now - window_s, now)
        except KeyError:
            continue  # no samples of this GPU yet: not enough data
        sample = latest.get(key)
        series[state.index] = series_from_window(window, sample.mem_total_mib if sample else None)
    return advise_host(states, profile, series, policy)
