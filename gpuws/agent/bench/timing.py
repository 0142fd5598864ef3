"""Sizes per mode, and how timed windows become figures (median, sustained p10, peak)."""

from __future__ import annotations

import math
import statistics

from .output import Record

# A timed check that ran less than this share of the time it asked for proves nothing.
MIN_RUN_SHARE = 0.9


# Sizes per harness and mode. GPU sizes reach the plateau of a modern card; CPU sizes only
# exercise the code paths quickly.
SIZES: dict[str, dict[str, Record]] = {
    "gpu": {
        "quick": {"gemm_n": 8192, "warmup": 3, "repeats": 8, "mem_bytes": 1 << 30, "xfer_bytes": 256 << 20,
                  "p2p_bytes": 256 << 20, "stress_s": 10.0, "stress_n": 8192, "all_pairs": False,
                  "windows": 12, "window_s": 0.05},
        "full": {"gemm_n": 8192, "warmup": 5, "repeats": 30, "mem_bytes": 2 << 30, "xfer_bytes": 1 << 30,
                 "p2p_bytes": 1 << 30, "stress_s": 60.0, "stress_n": 8192, "all_pairs": True,
                 "windows": 30, "window_s": 0.2},
    },
    "cpu": {
        "quick": {"gemm_n": 256, "warmup": 1, "repeats": 3, "mem_bytes": 8 << 20, "xfer_bytes": 8 << 20,
                  "p2p_bytes": 8 << 20, "stress_s": 1.0, "stress_n": 128, "all_pairs": False,
                  "windows": 5, "window_s": 0.01},
        "full": {"gemm_n": 512, "warmup": 2, "repeats": 7, "mem_bytes": 32 << 20, "xfer_bytes": 32 << 20,
                 "p2p_bytes": 32 << 20, "stress_s": 5.0, "stress_n": 256, "all_pairs": True,
                 "windows": 9, "window_s": 0.02},
    },
}


OVERALL_TIMEOUT = {"quick": 90.0, "full": 330.0}


# Every GEMM answer is checked against a float64 product on a grid of sampled rows and columns,
# GEMM_SAMPLES_PER_TILE of each in every GEMM_TILE-wide band, so every output tile holds checked
# elements. An element is wrong when it is off by more than the tolerance times the largest
# reference element of its sampled row; a non-finite element is always wrong.
MIN_WARMUP_S = 0.2  # issue 25: 2-3 warm-up calls left clocks and caches cold


MIN_WINDOW_S = 0.01  # a timed window shorter than this is mostly launch and event overhead


def median_or_none(times: list[float]) -> float | None:
    """The median of the positive times; None when there is none."""
    good = [t for t in times if t > 0]
    return statistics.median(good) if good else None


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of `values`, linearly interpolated."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def significant(value: float, digits: int = 4) -> float:
    """`value` to `digits` significant figures: a slow CPU harness's 0.0004 TFLOP/s stays 0.0004
    (three decimals read it as 0.0, a measurement of nothing)."""
    return float(f"{value:.{digits}g}")


def window_stats(rates: list[float]) -> Record:
    """Median, sustained (10th percentile) and peak of per-window throughputs."""
    return {"windows": len(rates), "median": significant(statistics.median(rates)),
            "sustained_p10": significant(percentile(rates, 10)), "peak": significant(max(rates)),
            "per_window": [significant(r) for r in rates]}


def run_share_problem(ran: float, asked: float, what: str = "s") -> str | None:
    """Why a timed check that ran `ran` of `asked` proves nothing, or None when it ran enough."""
    if asked > 0 and ran < MIN_RUN_SHARE * asked:
        return (f"ran {ran:.3g} {what} of the {asked:.3g} {what} asked (under {MIN_RUN_SHARE:.0%}): "
                "cut short by the time limit")
    return None
