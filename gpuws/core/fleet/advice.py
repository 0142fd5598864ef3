"""Right-size advice for a fleet: from a window of dcgm-exporter series in Prometheus to `GpuAdvice`.

Prometheus answers a few range queries for the whole fleet (see `ADVICE_QUERIES` and
`gpuws.remote.prometheus.FleetSource.usage_window`), already downsampled per step; this module
joins them (pure, so it is tested on recorded answers) into one advice input per *physical GPU*:

- **current layout**: "full", or the MIG layout its instances' `GPU_I_PROFILE` labels spell
  ("2x3g.40gb"), the same text `gpuws resize` takes;
- **utilisation**: `DCGM_FI_DEV_GPU_UTIL` for a whole GPU; for a GPU in MIG mode (where NVML
  reports no utilisation) each instance's engine activity (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`),
  weighted by its compute slices, as a percentage of the layout's compute;
- **memory**: the per-step peak of `DCGM_FI_DEV_FB_USED` (summed over a MIG GPU's instances),
  out of used + free (what the workload can have);
- **throttling**: the clock-reason mask at each step (the GPU-idle bit is not a throttle).

Prices: the matched host profile's (by GPU UUID or host name, `match_profile`), else the fleet
profile's `price_per_gpu_hour` as the full-card price, else none (price deltas are null).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from gpuws.core.advice import AdvicePolicy, GpuAdvice, LayoutChoice, UsageSeries, advise_state, choices_from_targets
from gpuws.core.fleet.model import SeriesKey, series_key, series_values
from gpuws.core.models import HostProfile
from gpuws.core.resize.catalog import model_for_gpu_name
from gpuws.core.resize.mig_parse import GpuInstance
from gpuws.core.resize.pricing import PriceBook, price_book
from gpuws.core.resize.state import GpuMigState
from gpuws.core.telemetry.throttle import REASON_BITS

F64 = npt.NDArray[np.float64]

#: Points per series of an advice window: 4-minute steps over 24 h (bytes stay small at 1,000 GPUs).
ADVICE_POINTS: Final = 360
#: The least range each step averages over: longer than any usual scrape interval (15-30 s), so a
#: short step never falls between two scrapes and reads as a gap.
MIN_RANGE_S: Final = 60.0

# Names of the range answers `window_from_answers` joins.
UTIL: Final = "util"  # whole GPUs, percent
ENGINE: Final = "engine"  # MIG instances, ratio 0-1
MEM: Final = "mem"  # every device, with all its labels (identity)
MEM_TOTAL: Final = "mem_total"  # used + free
THROTTLE: Final = "throttle"  # whole GPUs, bitmask


@dataclass(frozen=True)
class DeviceIdentity:
    """What a device's labels say about it."""

    uuid: str | None
    model: str | None
    mig_profile: str | None
    simulated: bool


@dataclass
class FleetUsageWindow:
    """Per-device series on one time grid (NaN: no point), from one set of range answers."""

    start: float
    end: float
    step: float
    times: F64
    devices: dict[SeriesKey, DeviceIdentity] = field(default_factory=dict)
    util_pct: dict[SeriesKey, F64] = field(default_factory=dict)
    mem_used_mib: dict[SeriesKey, F64] = field(default_factory=dict)
    mem_total_mib: dict[SeriesKey, float] = field(default_factory=dict)
    throttle_mask: dict[SeriesKey, F64] = field(default_factory=dict)

    @classmethod
    def empty(cls, start: float, end: float) -> FleetUsageWindow:
        return cls(start, end, max(end - start, 1.0), np.zeros(0, dtype=np.float64))


def _merge(into: dict[SeriesKey, F64], key: SeriesKey, values: F64) -> None:
    # One device can have several series (one per pod on Kubernetes, labels changing in the
    # window): the same GPU, so keep the largest value at each step.
    old = into.get(key)
    into[key] = values if old is None else np.fmax(old, values)


def window_from_answers(start: float, end: float, step: float,
                        answers: Mapping[str, Sequence[Mapping[str, Any]]]) -> FleetUsageWindow:
    """Join range answers (keyed `UTIL`, `ENGINE`, `MEM`, `MEM_TOTAL`, `THROTTLE`) per device."""
    times = np.arange(start, end + step / 2, step, dtype=np.float64)
    window = FleetUsageWindow(start, end, step, times)
    targets = {UTIL: window.util_pct, ENGINE: window.util_pct, MEM: window.mem_used_mib,
               THROTTLE: window.throttle_mask}
    totals: dict[SeriesKey, F64] = {}
    for name, rows in answers.items():
        for item in rows:
            labels = item.get("metric") or {}
            key = series_key(labels)
            if key is None:
                continue
            values = series_values(item, times, np.float64)
            if name == ENGINE:
                values = values * 100.0  # DCGM's ratio as the percentage of the instance
            if name == MEM_TOTAL:
                _merge(totals, key, values)
                continue
            if name in targets:
                _merge(targets[name], key, values)
            if labels.get("UUID") and key not in window.devices:
                window.devices[key] = DeviceIdentity(labels.get("UUID") or None, labels.get("modelName") or None,
                                                     labels.get("GPU_I_PROFILE") or None,
                                                     labels.get("simulated") == "true")
    for key, values in totals.items():
        if np.isfinite(values).any():
            window.mem_total_mib[key] = float(np.nanmax(values))
    return window


@dataclass(frozen=True)
class FleetGpuUsage:
    """One physical GPU of a fleet: its MIG state (as `gpuws resize` sees it) and its use."""

    host: str
    uuid: str | None
    model: str | None
    state: GpuMigState
    series: UsageSeries
    simulated: bool
    instances: tuple[tuple[int, str], ...] = ()  # (GPU instance id, profile) in MIG mode
    instance_note: str | None = None  # each instance's engine activity and memory, for the reasons


#: Every clock-reason bit that is a throttle (the GPU-idle bit is not one).
_THROTTLE_BITS: Final = functools.reduce(operator.or_, (bit for bit, _ in REASON_BITS), 0)


def _throttled(mask: F64) -> npt.NDArray[np.bool_]:
    """At each step, whether any throttle reason was set (vectorised `decode_mask(m).reasons`)."""
    known = np.isfinite(mask) & (mask >= 0)
    bits = np.where(known, mask, 0).astype(np.int64)
    throttled: npt.NDArray[np.bool_] = known & ((bits & _THROTTLE_BITS) != 0)
    return throttled


def _nan_series(n: int) -> F64:
    return np.full(n, np.nan, dtype=np.float64)


def fleet_gpus(window: FleetUsageWindow) -> list[FleetGpuUsage]:
    """One advice input per physical GPU (MIG instances folded into their GPU), sorted by host and index."""
    n = window.times.size
    gpus: dict[tuple[str, int], list[SeriesKey]] = {}
    for key in (*window.devices, *window.util_pct, *window.mem_used_mib):
        keys = gpus.setdefault((key.host, key.gpu), [])
        if key not in keys:
            keys.append(key)
    out: list[FleetGpuUsage] = []
    for (host, index), keys in sorted(gpus.items()):
        whole = SeriesKey(host, index, None)
        parts = sorted((k for k in keys if k.gi is not None), key=lambda k: k.gi or 0)
        ident = window.devices.get(whole) or next((window.devices[k] for k in parts if k in window.devices), None)
        name = ident.model if ident and ident.model else "unknown GPU"
        model = model_for_gpu_name(name)
        mask = window.throttle_mask.get(whole)
        throttled = None if mask is None else _throttled(mask)
        instances = tuple((k.gi or 0, (window.devices.get(k) or DeviceIdentity(None, None, None, False)).mig_profile
                           or "?") for k in parts)
        if not parts:
            series = UsageSeries(window.times.copy(), window.util_pct.get(whole, _nan_series(n)),
                                 window.mem_used_mib.get(whole, _nan_series(n)),
                                 window.mem_total_mib.get(whole), throttled)
            state = GpuMigState(index, name, ident.uuid if ident else None,
                                "Disabled" if model is not None else None, None)
        else:
            weights = []
            for _, profile in instances:
                mig = model.profile(profile) if model is not None else None
                weights.append(float(mig.compute_slices) if mig is not None else 1.0)
            util = _weighted([window.util_pct.get(k, _nan_series(n)) for k in parts], weights)
            mems = np.vstack([window.mem_used_mib.get(k, _nan_series(n)) for k in parts])
            mem = np.where(np.isfinite(mems).any(axis=0), np.nansum(mems, axis=0), np.nan)
            totals = [window.mem_total_mib.get(k) for k in parts]
            total = sum(t for t in totals if t is not None) if all(t is not None for t in totals) else None
            series = UsageSeries(window.times.copy(), util, mem, total, throttled)
            gis = tuple(GpuInstance(index, profile, _profile_id(model, profile), gi, 0, 0) for gi, profile in instances)
            state = GpuMigState(index, name, ident.uuid if ident else None, "Enabled", "Enabled", gis)
            note = "MIG instances: " + "; ".join(
                _instance_text(gi, profile, window.util_pct.get(k), window.mem_used_mib.get(k))
                for (gi, profile), k in zip(instances, parts, strict=True))
        out.append(FleetGpuUsage(host, ident.uuid if ident else None, ident.model if ident else None, state,
                                 series, bool(ident and ident.simulated), instances, note if parts else None))
    return out


def _instance_text(gi: int, profile: str, util: F64 | None, mem: F64 | None) -> str:
    def p50(a: F64 | None) -> float | None:
        return float(np.nanpercentile(a, 50)) if a is not None and np.isfinite(a).any() else None

    def peak(a: F64 | None) -> float | None:
        return float(np.nanmax(a)) if a is not None and np.isfinite(a).any() else None

    active, used = p50(util), peak(mem)
    return (f"GI {gi} {profile} engine activity p50 " + ("n/a" if active is None else f"{active:.0f} %")
            + ", peak memory " + ("n/a" if used is None else f"{used / 1024:.1f} GiB"))


def _profile_id(model: Any, profile: str) -> int:
    mig = model.profile(profile) if model is not None else None
    return mig.profile_id if mig is not None else -1


def _weighted(rows: Sequence[F64], weights: Sequence[float]) -> F64:
    """Compute-weighted mean of the instances' activity at each step (over those with a value)."""
    values = np.vstack(rows)
    w = np.asarray(weights, dtype=np.float64)[:, None] * np.isfinite(values)
    total = w.sum(axis=0)
    summed = np.nansum(values * w, axis=0)  # NaN x 0 is NaN, which nansum skips
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, summed / np.where(total > 0, total, 1.0), np.nan)


class PriceSource(StrEnum):
    """Where a fleet GPU's prices come from."""

    PROFILE = "profile"  # the host profile it matched
    FLEET = "fleet"  # the fleet profile's price per GPU-hour, as the full card's
    NONE = "none"


Choices = tuple[LayoutChoice | None, list[LayoutChoice]]


@dataclass(frozen=True)
class FleetGpuAdvice:
    """The advice for one fleet GPU, with which node (and card) it is and the profile it maps to."""

    host: str
    uuid: str | None
    model: str | None
    advice: GpuAdvice
    profile: str | None  # the host profile it maps to (prices, and where "Resize to this…" goes)
    price_source: PriceSource
    simulated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """An entry of `gpuws advise FLEET --json`: the host advice keys plus host, uuid, model."""
        return {"host": self.host, "uuid": self.uuid, "model": self.model, **self.advice.to_dict(),
                "profile": self.profile}


def fleet_prices(gpu: FleetGpuUsage, host_profile: HostProfile | None, gpus_on_host: int,
                 fleet_price_per_gpu_hour: float | None) -> tuple[PriceBook, PriceSource]:
    """The price book of a fleet GPU and where it came from (never the catalog's reference price)."""
    if host_profile is not None and (host_profile.price_per_hour is not None or host_profile.slice_prices):
        return price_book(host_profile, gpu.state.model, gpus_on_host), PriceSource.PROFILE
    if fleet_price_per_gpu_hour is not None:
        return PriceBook(fleet_price_per_gpu_hour, {}, "fleet"), PriceSource.FLEET
    return PriceBook(None), PriceSource.NONE


def advise_fleet_window(
    window: FleetUsageWindow,
    host_profiles: Iterable[HostProfile] = (),
    *,
    fleet_price_per_gpu_hour: float | None = None,
    uuids: Mapping[str, Iterable[str]] | None = None,
    policy: AdvicePolicy | None = None,
) -> list[FleetGpuAdvice]:
    """Advice for every physical GPU in `window`; `host_profiles` (`HostProfile`s) give prices
    and the host to open, matched by GPU UUID (`uuids`: profile name -> UUIDs seen there) or name."""
    from gpuws.core.fleet.model import match_profile

    profiles = list(host_profiles)
    by_name = {p.name: p for p in profiles}
    gpus = fleet_gpus(window)
    per_host: dict[str, int] = {}
    for g in gpus:
        per_host[g.host] = per_host.get(g.host, 0) + 1
    out = []
    choices: dict[tuple[Any, ...], Choices] = {}  # the same card, layout and prices: the same options
    for g in gpus:
        name = match_profile(profiles, g.host, g.uuid, uuids)
        prices, source = fleet_prices(g, by_name.get(name) if name else None, per_host[g.host],
                                      fleet_price_per_gpu_hour)
        advice = advise_state(g.state, prices, g.series, policy, choices=_choices(g.state, prices, choices))
        if g.instance_note:
            advice = dataclasses.replace(advice, reasons=(*advice.reasons, g.instance_note))
        out.append(FleetGpuAdvice(g.host, g.uuid, g.model, advice, name, source, g.simulated))
    return out


def _choices(state: GpuMigState, prices: PriceBook, cache: dict[tuple[Any, ...], Choices]) -> Choices:
    """The layout options of `state` at `prices`, computed once per distinct (card, layout, prices):
    enumerating a MIG card's layouts is most of the work, and a fleet has a few kinds of card."""
    from gpuws.core.resize.targets import target_options

    key = (state.name, state.mig_current, state.layout, prices.full_card,
           tuple(sorted(prices.overrides.items())), prices.source)
    if key not in cache:
        cache[key] = choices_from_targets(target_options(state, prices))
    return cache[key]


def fleet_report(name: str, window_s: float, advices: Sequence[FleetGpuAdvice]) -> dict[str, Any]:
    """The JSON document of `gpuws advise FLEET --json` (the host document's shape)."""
    return {"host": name, "window_s": round(window_s), "gpus": [a.to_dict() for a in advices]}
