"""Right-size advice on recorded telemetry windows (tests/core/data/advice, see record_advice_windows.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from gpuws.core.advice import (
    Advice,
    AdvicePolicy,
    Confidence,
    GpuAdvice,
    LayoutChoice,
    UsageSeries,
    advise_from_store,
    advise_gpu,
    choices_from_targets,
    host_report,
    money_text,
    parse_duration,
    series_from_samples,
    series_from_window,
    usage_stats,
)
from gpuws.core.errors import ValidationError
from gpuws.core.models import HostProfile
from gpuws.core.resize.pricing import PriceBook
from gpuws.core.resize.state import GpuMigState
from gpuws.core.resize.targets import target_options
from gpuws.core.telemetry.sample import GpuSample
from gpuws.core.telemetry.store import TelemetryStore

DATA = Path(__file__).parent / "data" / "advice"
# The demo profile's prices (gpuws.sim.server.DEMO_SLICE_PRICES), written out: the core tests do not import sim.
PRICES = PriceBook(2.45, {"full": 2.45, "1g.10gb": 0.30, "1g.20gb": 0.42, "2g.20gb": 0.62, "3g.40gb": 0.95,
                          "4g.40gb": 1.30, "7g.80gb": 2.45}, "override")


def window(name: str) -> tuple[str, UsageSeries]:
    doc = json.loads((DATA / f"{name}.json").read_text())
    rows = doc["rows"]
    series = UsageSeries.of([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                            doc["mem_total_mib"], [r[3] for r in rows])
    return doc["gpu_name"], series


def layouts(gpu_name: str, current: str | None = None) -> tuple[LayoutChoice, list[LayoutChoice]]:
    """The GPU's layouts with the demo prices; `current` picks one as if the GPU were in it now."""
    mig = None if "L40S" in gpu_name else "Disabled"
    now, choices = choices_from_targets(target_options(GpuMigState(0, gpu_name, None, mig, mig), PRICES))
    if current is not None:
        now = next(c for c in choices if c.target == current)
    assert now is not None
    return now, choices


def advise(name: str) -> GpuAdvice:
    gpu_name, series = window(name)
    now, choices = layouts(gpu_name)
    return advise_gpu(0, series, now, choices)


def test_idle_gpu_is_told_to_stop_with_the_money() -> None:
    a = advise("idle")
    assert (a.advice, a.target, a.price_delta_per_hour, a.price_delta_per_month) == (Advice.STOP, None, -2.45, -1788.5)
    assert a.reasons[0] == "idle 100 % of 10 min (utilisation <= 5 %)"
    assert "peak memory 2.0 GiB of 80.0 GiB" in a.reasons
    assert "to keep it up, 1g.10gb fits for $0.30/h" in a.reasons and a.alternative == "1g.10gb"


def test_bursty_light_use_gets_the_cheapest_slice_that_fits_memory_and_compute() -> None:
    a = advise("bursty")
    # p95 25 % of the card needs more than 1/7 of its compute; 12 GiB x 1.2 needs more than 10 GiB.
    assert (a.advice, a.target, a.price_delta_per_hour) == (Advice.SMALLER, "2g.20gb", -1.83)
    assert a.reasons[:2] == ("utilisation p50 5 %, p95 25 %", "peak memory 12.0 GiB of 79.6 GiB")
    assert a.confidence is Confidence.LOW  # 10 minutes is a short window
    assert a.to_dict() == {"gpu": 0, "current": "full", "advice": "smaller", "target": "2g.20gb",
                           "price_delta_per_hour": -1.83, "confidence": "low", "reasons": list(a.reasons)}


def test_saturated_full_card_is_kept_and_says_why() -> None:
    a = advise("saturated")
    assert (a.advice, a.target, a.price_delta_per_hour) == (Advice.KEEP, None, 0.0)
    assert a.reasons[0] == "utilisation p50 88 %, p95 92 % (sustained >= 80 %)"
    assert "throttled 50 % of the busy time" in a.reasons
    assert "already the largest layout" in a.reasons[-1]


def test_saturated_slice_gets_the_next_larger_one() -> None:
    # The same window as a fleet would give it for a 3g.40gb instance (engine activity as utilisation).
    _, series = window("saturated")
    now, choices = layouts("NVIDIA H100 80GB HBM3", "3g.40gb")
    a = advise_gpu(0, UsageSeries(series.t, series.util_pct, series.mem_used_mib, 39.5 * 1024, None), now, choices)
    assert (a.advice, a.target, a.price_delta_per_hour) == (Advice.LARGER, "4g.40gb", 0.35)


def test_memory_bound_slice_grows_memory_and_full_card_is_kept() -> None:
    full = advise("memory-bound")
    assert (full.advice, full.target) == (Advice.KEEP, None)
    assert full.reasons[0] == "peak memory 76.0 GiB of 79.6 GiB (>= 90 % of the slice)"
    gpu_name, series = window("memory-bound")
    # 9.2 GiB peak on a 1g.10gb instance (9.75 GiB): more memory, same compute, cheapest first.
    small = UsageSeries(series.t, series.util_pct, series.mem_used_mib * 9.2 / 76, 9.75 * 1024, None)
    now, choices = layouts(gpu_name, "1g.10gb")
    a = advise_gpu(0, small, now, choices)
    assert (a.advice, a.target, a.price_delta_per_hour) == (Advice.LARGER, "1g.20gb", 0.12)


def test_gaps_lower_the_confidence_and_are_named() -> None:
    a = advise("gaps")
    assert a.advice is Advice.SMALLER and a.confidence is Confidence.LOW
    assert "40 % of the 10 min window has no samples" in a.reasons
    stats = usage_stats(window("gaps")[1])
    assert stats.gap_fraction == pytest.approx(0.4, abs=0.01)


def test_confidence_grows_with_a_long_complete_window() -> None:
    _, series = window("bursty")
    # The same 10 minutes repeated over 2 hours: a long window without gaps.
    t = series.t[0] + 2.0 * np.arange(3600)
    reps = 3600 // len(series.t) + 1
    long = UsageSeries(t, np.tile(series.util_pct, reps)[:3600], np.tile(series.mem_used_mib, reps)[:3600],
                       series.mem_total_mib, None)
    now, choices = layouts("NVIDIA H100 80GB HBM3")
    assert advise_gpu(0, long, now, choices).confidence is Confidence.HIGH
    medium = UsageSeries(t[:900], long.util_pct[:900], long.mem_used_mib[:900], series.mem_total_mib, None)
    assert advise_gpu(0, medium, now, choices).confidence is Confidence.MEDIUM


def test_short_window_is_not_enough_data_and_the_minimum_is_an_option() -> None:
    _, series = window("idle")
    short = UsageSeries(series.t[:5], series.util_pct[:5], series.mem_used_mib[:5], series.mem_total_mib, None)
    now, choices = layouts("NVIDIA A100-SXM4-80GB")
    a = advise_gpu(0, short, now, choices)
    assert (a.advice, a.target, a.price_delta_per_hour, a.confidence) == (
        Advice.NOT_ENOUGH_DATA, None, None, Confidence.LOW)
    assert a.reasons == ("5 samples over 8 s; advice needs at least 30 s of data",)
    assert a.headline() == "GPU 0: not enough data yet (8 s of 30 s)"  # #35: how far along, in every view
    assert advise_gpu(0, short, now, choices, AdvicePolicy(min_data_s=5)).advice is Advice.STOP
    empty = UsageSeries.of([], [], [])
    assert advise_gpu(0, empty, now, choices).advice is Advice.NOT_ENOUGH_DATA


def test_unknown_utilisation_is_never_guessed() -> None:
    _, series = window("bursty")
    nan = series.util_pct * math.nan
    now, choices = layouts("NVIDIA H100 80GB HBM3", "3g.40gb")
    quiet = UsageSeries(series.t, nan, series.mem_used_mib, 39.5 * 1024, None)
    a = advise_gpu(0, quiet, now, choices)
    assert a.advice is Advice.NOT_ENOUGH_DATA
    assert "utilisation is not reported for this GPU (MIG without engine activity)" in a.reasons
    # The headline says why, rather than "yet": waiting does not bring utilisation to such a slice.
    assert a.headline() == ("GPU 0: not enough data: utilisation is not reported for this GPU "
                            "(MIG without engine activity)")
    # Memory alone can still say the slice is too small.
    full = UsageSeries(series.t, nan, series.mem_used_mib * 37 / 12, 39.5 * 1024, None)
    assert advise_gpu(0, full, now, choices).advice is Advice.LARGER


def test_not_mig_capable_card_with_light_use_is_kept() -> None:
    _, series = window("bursty")
    now, choices = layouts("NVIDIA L40S")
    a = advise_gpu(0, series, now, choices)
    assert (a.advice, a.target, a.price_delta_per_hour) == (Advice.KEEP, None, 0.0)
    assert a.reasons[-1] == "no cheaper layout fits this use"


def test_series_from_samples_and_from_the_store_agree_on_the_advice() -> None:
    _, series = window("idle")
    samples = [
        GpuSample(t=float(t), gpu=0, util_gpu_pct=float(u), mem_used_mib=float(m), mem_total_mib=81920.0,
                  throttle_reasons=[], idle=True)
        for t, u, m in zip(series.t, series.util_pct, series.mem_used_mib, strict=True)
    ]
    from_samples = series_from_samples(samples)
    assert from_samples.throttled is not None and not from_samples.throttled.any()
    store = TelemetryStore()
    store.ingest_samples("h", samples)
    from_store = series_from_window(store.window("h", "0", series.t[0], series.t[-1]), 81920.0)
    now, choices = layouts("NVIDIA A100-SXM4-80GB")
    a, b = advise_gpu(0, from_samples, now, choices), advise_gpu(0, from_store, now, choices)
    assert a.to_dict() == b.to_dict() and a.advice is Advice.STOP


def test_series_lengths_must_match() -> None:
    with pytest.raises(ValidationError):
        UsageSeries.of([1.0, 2.0], [1.0], [1.0, 2.0])


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("15m", 900.0), ("24h", 86400.0),
                                               ("7d", 604800.0), ("1.5h", 5400.0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-5m", "5 weeks", "1e9", "400d"])
def test_bad_durations_are_one_clear_error(text: str) -> None:
    with pytest.raises(ValidationError, match=r"^--window: "):
        parse_duration(text)


def test_money_text() -> None:
    assert money_text(-2.45) == " (-$2.45/h, -$1,788.50/month)"
    assert money_text(0.0) == money_text(None) == ""


def test_advice_from_the_app_store_over_24h_uses_the_minutes_it_has() -> None:
    """Three minutes of history asked for over 24 h: the raw samples, not three 1-minute buckets
    (whose means would hide the 25 % bursts and the idle time between them)."""
    _, idle = window("idle")
    _, bursty = window("bursty")
    store = TelemetryStore()
    now = float(idle.t[0]) + 180.0
    for i in range(90):  # 2 s apart, as recorded
        rows = [(0, bursty), (1, idle)]
        store.ingest_samples("h", [
            GpuSample(t=float(s.t[i]), gpu=g, util_gpu_pct=float(s.util_pct[i]), mem_used_mib=float(s.mem_used_mib[i]),
                      mem_total_mib=81559.0 if g == 0 else 81920.0)
            for g, s in rows
        ])
    states = [GpuMigState(0, "NVIDIA H100 80GB HBM3", None, "Disabled", "Disabled"),
              GpuMigState(1, "NVIDIA A100-SXM4-80GB", None, "Disabled", "Disabled"),
              GpuMigState(2, "NVIDIA L40S", None, None, None)]  # no samples yet
    profile = HostProfile(name="h", host="127.0.0.1", user="me", price_per_hour=9.80,
                          slice_prices={"full": 2.45, "2g.20gb": 0.62, "1g.10gb": 0.30})
    advices = advise_from_store(store, "h", states, profile, now=now)
    assert [(a.advice, a.target, a.price_delta_per_hour) for a in advices] == [
        (Advice.SMALLER, "2g.20gb", -1.83), (Advice.STOP, None, -2.45), (Advice.NOT_ENOUGH_DATA, None, None)]
    assert advices[0].reasons[0] == "utilisation p50 5 %, p95 25 %"
    doc = host_report("h", 180.4, advices)
    assert doc["host"] == "h" and doc["window_s"] == 180 and [g["gpu"] for g in doc["gpus"]] == [0, 1, 2]
