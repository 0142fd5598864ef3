"""From a fleet's Prometheus range answers (dcgm-exporter series) to right-size advice per physical GPU.

The answers are written in the HTTP API's shape (`query_range` matrices, values as strings), with
the label sets dcgm-exporter gives (tests/fixtures/dcgm_exporter/): a MIG GPU whose instances carry
`GPU_I_PROFILE`/`GPU_I_ID` and report engine activity as a ratio, a whole GPU seen through two pods
(two series, one device), scrapes missing for a stretch, the GPU-idle clock bit (not a throttle).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuws.core.advice import Advice, AdvicePolicy, LayoutChoice, UsageSeries, advise_gpu
from gpuws.core.fleet import advice as fa
from gpuws.core.models import HostProfile

T0, STEP, N = 1_700_000_000.0, 60.0, 121  # two hours at one point a minute
H100 = "NVIDIA H100 80GB HBM3"


def labels(host: str, gpu: int, uuid: str, gi: int | None = None, profile: str | None = None,
           **extra: str) -> dict[str, str]:
    out = {"gpu": str(gpu), "UUID": uuid, "pci_bus_id": "00000000:18:00.0", "device": f"nvidia{gpu}",
           "modelName": H100, "Hostname": host, "DCGM_FI_DRIVER_VERSION": "580.105.08",
           "instance": f"{host}:9400", "job": "dcgm-exporter", **extra}
    if gi is not None:
        out |= {"GPU_I_PROFILE": profile or "?", "GPU_I_ID": str(gi)}
    return out


def key_labels(host: str, gpu: int, gi: int | None = None) -> dict[str, str]:
    """What a `max by (Hostname, hostname, instance, gpu, GPU_I_ID)` answer keeps."""
    out = {"Hostname": host, "instance": f"{host}:9400", "gpu": str(gpu)}
    return out | ({"GPU_I_ID": str(gi)} if gi is not None else {})


def row(metric: dict[str, str], values: Any, skip: range = range(0)) -> dict[str, Any]:
    vs = values if isinstance(values, list) else [values] * N
    return {"metric": metric, "values": [[T0 + i * STEP, f"{v:f}" if isinstance(v, float) else str(v)]
                                         for i, v in enumerate(vs) if i not in skip]}


def answers() -> dict[str, list[dict[str, Any]]]:
    bursty = [90 if i % 10 == 0 else 3 for i in range(N)]
    return {
        fa.UTIL: [row(key_labels("node-a", 1), 0), row(key_labels("node-a", 2), bursty, skip=range(30, 90))],
        fa.ENGINE: [row(key_labels("node-a", 0, 1), 0.9), row(key_labels("node-a", 0, 2), 0.0)],
        fa.MEM: [
            row(labels("node-a", 0, "GPU-aaaa", 1, "3g.40gb"), 20480),
            row(labels("node-a", 0, "GPU-aaaa", 2, "3g.40gb"), 512),
            row(labels("node-a", 0, "GPU-aaaa"), 20992),  # the MIG GPU itself: the sum, not counted twice
            row(labels("node-a", 1, "GPU-bbbb"), 1),
            # One GPU seen by two pods in turn: two series of one device.
            row(labels("node-a", 2, "GPU-cccc", pod="train-1"), [6000] * 60 + [0] * 61, skip=range(30, 90)),
            row(labels("node-a", 2, "GPU-cccc", pod="train-2"), [0] * 60 + [7000] * 61, skip=range(30, 90)),
        ],
        fa.MEM_TOTAL: [row(key_labels("node-a", 0, 1), 40192), row(key_labels("node-a", 0, 2), 40192),
                       row(key_labels("node-a", 0), 80960), row(key_labels("node-a", 1), 80960),
                       row(key_labels("node-a", 2), 80960)],
        # GPU 1 idles with its clocks down (the GPU-idle bit only); GPU 2 is power capped when busy.
        fa.THROTTLE: [row(key_labels("node-a", 0), 0), row(key_labels("node-a", 1), 1),
                      row(key_labels("node-a", 2), [4 if b == 90 else 0 for b in bursty], skip=range(30, 90))],
    }


def window() -> fa.FleetUsageWindow:
    return fa.window_from_answers(T0, T0 + (N - 1) * STEP, STEP, answers())


def test_the_answers_join_into_one_input_per_physical_gpu() -> None:
    gpus = {g.state.index: g for g in fa.fleet_gpus(window())}
    assert sorted(gpus) == [0, 1, 2]
    mig, idle, bursty = gpus[0], gpus[1], gpus[2]
    assert (mig.host, mig.uuid, mig.model) == ("node-a", "GPU-aaaa", H100)
    assert mig.state.layout.describe() == "2x3g.40gb" and mig.instances == ((1, "3g.40gb"), (2, "3g.40gb"))
    # Engine activity as a percentage of the layout's compute: (90 x 3 + 0 x 3) / 6.
    assert np.allclose(mig.series.util_pct, 45.0)
    assert np.allclose(mig.series.mem_used_mib, 20992.0) and mig.series.mem_total_mib == 2 * 40192
    assert mig.instance_note is not None and "GI 1 3g.40gb engine activity p50 90 %" in mig.instance_note
    assert idle.state.layout.describe() == "full" and idle.series.throttled is not None
    assert not idle.series.throttled.any()  # the GPU-idle clock bit is not a throttle
    # Two pods, one GPU: the larger value per step; a stretch with no scrape stays a gap (NaN).
    mem = bursty.series.mem_used_mib
    assert mem[0] == 6000 and mem[-1] == 7000 and np.isnan(mem[30:90]).all() and not np.isnan(mem[:30]).any()
    assert bursty.series.throttled is not None and bursty.series.throttled[0] and not bursty.series.throttled[1]


def test_advice_prices_from_the_matched_profile_the_fleet_or_nothing() -> None:
    w = window()
    profile = HostProfile(name="a", host="node-a.gpu.example", price_per_hour=9.0)  # 3 GPUs: 3.00 each
    by = {g.advice.gpu: g for g in fa.advise_fleet_window(w, [profile])}
    assert {g.profile for g in by.values()} == {"a"} and {g.price_source for g in by.values()} == {"profile"}
    mig, idle, bursty = by[0].advice, by[1].advice, by[2].advice
    assert (mig.advice, mig.target) == (Advice.SMALLER, "3g.40gb")
    assert mig.price_delta_per_hour == pytest.approx(-3 * 3 / 7, abs=1e-3)
    assert (idle.advice, idle.price_delta_per_hour) == (Advice.STOP, -3.0)
    assert any("no samples" in r for r in bursty.reasons)  # half the window missing is named
    assert bursty.confidence.value == "low"

    fleet_priced = {g.advice.gpu: g for g in fa.advise_fleet_window(w, fleet_price_per_gpu_hour=2.0)}
    assert fleet_priced[1].profile is None and fleet_priced[1].price_source == "fleet"
    assert fleet_priced[1].advice.price_delta_per_hour == -2.0
    unpriced = {g.advice.gpu: g for g in fa.advise_fleet_window(w)}
    assert unpriced[1].price_source == "none" and unpriced[1].advice.price_delta_per_hour is None
    # A UUID seen on a profile's inventory wins over names that do not match.
    other = HostProfile(name="b", host="10.0.0.7", price_per_hour=4.0)
    exact = {g.advice.gpu: g for g in fa.advise_fleet_window(w, [other], uuids={"b": ["GPU-bbbb"]})}
    assert exact[1].profile == "b" and exact[0].profile is None

    doc = fa.fleet_report("lab", 7200, list(by.values()))
    assert doc["host"] == "lab" and doc["window_s"] == 7200
    assert doc["gpus"][1] | {"reasons": []} == {
        "host": "node-a", "uuid": "GPU-bbbb", "model": H100, "profile": "a", "gpu": 1, "current": "full",
        "advice": "stop", "target": None, "price_delta_per_hour": -3.0, "confidence": "high", "reasons": []}


def test_without_any_price_a_smaller_layout_is_still_advised() -> None:
    """Before: 'smaller' needed a cheaper price, so an unpriced GPU (a fleet GPU no profile prices)
    with light use was always told to keep its full card."""
    t = np.arange(0, 3600, 10.0)
    series = UsageSeries(t, np.where(np.arange(t.size) % 2 == 0, 20.0, 8.0), np.full(t.size, 6000.0), 80960.0)
    full = LayoutChoice("full", 80.0, 1.0, None)
    slices = [LayoutChoice("1g.10gb", 9.75, 1 / 7, None, 1), LayoutChoice("2g.20gb", 19.5, 2 / 7, None, 1),
              LayoutChoice("3g.40gb", 39.5, 3 / 7, None, 1), LayoutChoice("7g.80gb", 79.25, 1.0, None, 1), full]
    a = advise_gpu(0, series, full, slices, AdvicePolicy())
    assert (a.advice, a.target, a.price_delta_per_hour) == (Advice.SMALLER, "2g.20gb", None)


def test_an_empty_window_is_not_enough_data() -> None:
    empty = fa.FleetUsageWindow.empty(T0, T0 + 3600)
    assert fa.fleet_gpus(empty) == [] and fa.advise_fleet_window(empty) == []


def test_a_matrix_row_lands_on_the_grid_and_odd_values_are_skipped() -> None:
    from gpuws.core.fleet.model import series_values

    times = np.arange(0.0, 50.0, 10.0)
    row_ = {"values": [[0, "1"], [10.2, "NaN"], [30, "+Inf"], [40, "4"], [90, "9"]]}  # 90: off the grid
    assert np.array_equal(series_values(row_, times, np.float64), [1, np.nan, np.nan, np.nan, 4], equal_nan=True)
    odd = {"values": [[0, "1"], [10, "x"], [20, None], [30, "-Inf"], [40, "4"]]}
    assert np.array_equal(series_values(odd, times), [1, np.nan, np.nan, np.nan, 4], equal_nan=True)
