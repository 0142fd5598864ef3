"""Telemetry store: tiers, gaps on disconnect and time jumps, bounded memory, CSV export."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from gpuws.core.telemetry.export import export_csv
from gpuws.core.telemetry.sample import GpuSample, MigRef
from gpuws.core.telemetry.store import METRICS, STORAGE_LOSS, TelemetryStore, TierSpec

T0 = 1_700_000_000.0


def feed(store: TelemetryStore, host: str, start: float, seconds: float, hz: float = 1.0, gpus: int = 1,
         util: float | None = None) -> float:
    n = int(seconds * hz)
    for i in range(n):
        t = start + i / hz
        store.ingest_samples(host, [
            GpuSample(t=t, gpu=g, util_gpu_pct=(t - T0) % 100 if util is None else util, mem_used_mib=1000.0 + g,
                      temp_c=None)
            for g in range(gpus)
        ])
    return start + n / hz


def test_raw_window_returns_full_rate_values_and_nan_for_unsupported() -> None:
    store = TelemetryStore()
    end = feed(store, "h", T0, 60, hz=10)
    t, util = store.series("h", "0", "util_gpu_pct", end - 10, end)
    assert len(t) == 100 and np.all(np.diff(t) > 0)
    assert util[-1] == pytest.approx((end - 0.1 - T0) % 100, abs=100 * STORAGE_LOSS["util_gpu_pct"][1])
    _, temp = store.series("h", "0", "temp_c", end - 10, end)
    assert np.isnan(temp).all()  # None stays missing, not 0
    assert store.latest("h")["0"].mem_used_mib == 1000.0


def test_long_windows_use_downsampled_min_mean_max() -> None:
    store = TelemetryStore()
    end = feed(store, "h", T0, 3 * 3600, hz=1)
    hour = store.window("h", "0", end - 3600, end)
    assert hour.tier == "5s" and 715 <= len(hour.t) <= 722
    day = store.window("h", "0", end - 24 * 3600, end)
    assert day.tier == "120s" and 89 <= len(day.t) <= 92
    col = day.metrics.index("util_gpu_pct")
    full = day.t[:-1]  # the last bucket is still filling
    assert np.all(day.min[: len(full), col] <= day.mean[: len(full), col])
    assert np.all(day.mean[: len(full), col] <= day.max[: len(full), col])
    # A sawtooth 0..99 over 100 s: a 120 s bucket spans all of it (stored in 0.5 % steps).
    assert np.nanmax(day.max[:, col]) == pytest.approx(99, abs=0.25)
    assert np.nanmin(day.min[:, col]) == pytest.approx(0, abs=0.25)
    assert store.window("h", "0", end - 300, end).tier == "raw"


def test_disconnect_leaves_a_gap_in_raw_and_tiers() -> None:
    store = TelemetryStore()
    mid = feed(store, "h", T0, 120, hz=2)
    store.mark_offline("h", mid)
    assert store.status("h").online is False
    end = feed(store, "h", mid + 600, 120, hz=2)
    assert store.status("h").online is True
    t, util = store.series("h", "0", "util_gpu_pct", T0, end)
    gap = np.flatnonzero(np.isnan(util))
    assert len(gap) >= 1 and t[gap[0]] == pytest.approx(mid)
    assert not np.isnan(util[: gap[0]]).any() and not np.isnan(util[gap[-1] + 1 :]).any()
    hour = store.window("h", "0", T0, end, tier="5s")
    col = hour.metrics.index("util_gpu_pct")
    assert np.isnan(hour.mean[:, col]).any()  # empty buckets break the line too


def test_time_jump_without_disconnect_inserts_gap() -> None:
    store = TelemetryStore()
    store.set_rate("h", 1.0)
    mid = feed(store, "h", T0, 30)
    end = feed(store, "h", mid + 20, 30)  # 20 s silence at 1 Hz: more than 3 periods
    _, util = store.series("h", "0", "util_gpu_pct", T0, end)
    assert np.isnan(util).sum() == 1
    assert feed(store, "h", end, 5) == end + 5
    _, util2 = store.series("h", "0", "util_gpu_pct", T0, end + 5)
    assert np.isnan(util2).sum() == 1  # steady samples add no gaps


def test_memory_is_flat_over_a_long_session() -> None:
    store = TelemetryStore(raw_window_s=60, tiers=(TierSpec(5, 600), TierSpec(60, 3600)))
    end = feed(store, "h", T0, 2 * 3600, hz=2, gpus=2)
    after_2h = store.memory_bytes()
    feed(store, "h", end, 2 * 3600, hz=2, gpus=2)
    assert store.memory_bytes() == after_2h
    window = store.window("h", "1", T0, end + 7200)
    assert window.tier == "60s" and len(window.t) <= 62


def test_mig_devices_have_their_own_series_and_keys() -> None:
    store = TelemetryStore()
    store.ingest_samples("h", [
        GpuSample(t=T0, gpu=0, mem_used_mib=10),
        GpuSample(t=T0, gpu=0, mem_used_mib=5, mig=MigRef(0, 1, 5, 0)),
        GpuSample(t=T0, gpu=10, mem_used_mib=1),
        GpuSample(t=T0, gpu=2, mem_used_mib=2),
    ])
    assert store.device_keys("h") == ["0", "0/mig1", "2", "10"]
    with pytest.raises(KeyError):
        store.window("h", "7", T0, T0 + 1)


def test_export_csv_raw_and_downsampled() -> None:
    store = TelemetryStore()
    end = feed(store, "h", T0, 30, hz=1, gpus=2)
    store.mark_offline("h", end)
    buf = io.StringIO()
    assert export_csv(store, "h", T0, end, buf) == 60  # the gap row is not exported
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert rows[0]["time"] == "2023-11-14T22:13:20.000Z" and rows[0]["device"] == "0"
    assert rows[0]["temp_c"] == "" and float(rows[5]["util_gpu_pct"]) == 5.0
    assert {r["device"] for r in rows} == {"0", "1"}
    buf = io.StringIO()
    export_csv(store, "h", T0 - 120, end, buf, tier="120s", devices=["1"])
    banded = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert banded and banded[0]["tier"] == "120s"
    assert float(banded[0]["util_gpu_pct_min"]) <= float(banded[0]["util_gpu_pct"]) <= float(
        banded[0]["util_gpu_pct_max"])
    assert math.isclose(float(banded[0]["mem_used_mib"]), 1001.0)


def _within_loss(metric: str, got: np.ndarray, want: np.ndarray, hops: int = 1) -> bool:
    absolute, relative = STORAGE_LOSS[metric]
    bound = hops * (absolute + relative * np.abs(want)) + 1e-6
    return bool(np.all(np.abs(got - want) <= bound))


RANGES = {  # realistic extremes per metric: 0 up to a B300's memory, PCIe gen6 x16, hot cards
    "mem_used_mib": 294_912.0, "power_w": 2_700.0, "sm_clock_mhz": 3_105.0, "mem_clock_mhz": 10_501.0,
    "pcie_rx_kib_s": 120_000_000.0, "pcie_tx_kib_s": 120_000_000.0, "temp_c": 110.0,
}


def test_stored_values_stay_within_the_stated_loss() -> None:
    rng = np.random.default_rng(7)
    store = TelemetryStore()
    n = 3 * 600  # 30 min at 1 Hz: raw and the 5 s tier both cover it
    readings = {m: rng.uniform(0, RANGES.get(m, 100.0), n).round(2) for m in METRICS}
    for i in range(n):
        store.ingest_samples("h", [GpuSample(t=T0 + i, gpu=0, **{m: float(readings[m][i]) for m in METRICS})])
    raw = store.window("h", "0", T0 + n - 600, T0 + n, tier="raw")
    assert len(raw.t) == 600
    for m in METRICS:
        assert _within_loss(m, raw.column(m)[1], readings[m][-600:]), m
    tier = store.window("h", "0", T0, T0 + n, tier="5s")
    full = len(tier.t) - 1  # the last bucket is still filling
    for m in METRICS:
        values = readings[m][: full * 5].reshape(full, 5)
        col = METRICS.index(m)
        # The bucket is computed from the stored raw rows, then stored itself: two roundings.
        assert _within_loss(m, tier.mean[:full, col], values.mean(axis=1), hops=2), m
        assert _within_loss(m, tier.min[:full, col], values.min(axis=1), hops=2), m
        assert _within_loss(m, tier.max[:full, col], values.max(axis=1), hops=2), m


def test_out_of_range_values_are_clipped_not_lost_as_infinity() -> None:
    store = TelemetryStore()
    store.ingest_samples("h", [GpuSample(t=T0, gpu=0, power_w=1e9, util_gpu_pct=-5.0)])
    _, power = store.series("h", "0", "power_w", T0 - 1, T0 + 1)
    assert np.isfinite(power).all() and power[0] >= 65_000


@pytest.mark.slow
def test_a_day_at_one_hertz_fits_in_128_kib_per_gpu() -> None:
    store = TelemetryStore()
    store.set_rate("h", 1.0)
    gpus = 2
    samples = [GpuSample(t=0.0, gpu=g, util_gpu_pct=50.0, mem_used_mib=1000.0, temp_c=60.0, power_w=300.0,
                         sm_clock_mhz=1800.0, pcie_rx_kib_s=100.0) for g in range(gpus)]
    for k in range(24 * 3600 + 60):
        for s in samples:
            s.t = T0 + k
        store.ingest_samples("h", samples)
    assert store.memory_bytes() / gpus <= 128 * 1024
    day = store.window("h", "0", T0 + 3600, T0 + 24 * 3600)
    assert day.tier == "120s" and len(day.t) >= 600  # still at least a point per pixel of a plot


def test_a_dropped_device_gets_a_new_history_though_its_batches_keep_the_same_key_tuple() -> None:
    """Batches of one device list share their keys tuple and the store remembers the histories it
    found for it; dropping a device (MIG layout change) must not leave later samples in the
    dropped history."""
    from gpuws.core.telemetry.sample import SampleBatch

    store = TelemetryStore()
    keys = ("0", "0/mig1")

    def batch(t: float) -> SampleBatch:
        return SampleBatch(t, [GpuSample(t=t, gpu=0, util_gpu_pct=10.0),
                               GpuSample(t=t, gpu=0, util_gpu_pct=20.0, mig=MigRef(0, 1, 2, 0))], "nvml", keys=keys)

    store.ingest("h", batch(1.0))
    store.ingest("h", batch(2.0))
    store.drop_devices("h", ["0/mig1"])
    assert store.device_keys("h") == ["0"]
    store.ingest("h", batch(3.0))
    assert sorted(store.device_keys("h")) == ["0", "0/mig1"]
    window = store.window("h", "0/mig1", 0.0, 10.0)
    assert list(window.t) == [3.0] and window.column("util_gpu_pct")[1][0] == 20.0
    assert store.latest("h")["0/mig1"].t == 3.0


@pytest.mark.parametrize("tier", ["raw", "5s", "120s"])
def test_a_window_decodes_only_the_columns_asked_for_and_the_same_values(tier: str) -> None:
    """`Window.means(columns)` (what the cards and overview tiles read) equals the columns of the
    fully decoded `mean`, gaps and the bucket still filling included; and a window is a snapshot:
    later samples, which overwrite the rings, do not change what it holds."""
    store = TelemetryStore()
    mid = feed(store, "h", T0, 1800, hz=1, gpus=2)
    store.mark_offline("h", mid)
    end = feed(store, "h", mid + 300, 333, hz=1, gpus=2)  # the gap in every tier; ends mid-bucket
    window = store.window("h", "1", end - 3600, end, tier=tier)
    columns = [METRICS.index("mem_used_mib"), METRICS.index("util_gpu_pct"), METRICS.index("temp_c")]
    partial = window.means(columns)
    assert partial.shape == (len(window.t), 3)
    assert np.isnan(partial[:, 1]).any() and np.isnan(partial[:, 2]).all()  # the gap; temp unsupported
    feed(store, "h", end, 2 * 3600, hz=1, gpus=2)  # the rings move on, past everything read above
    np.testing.assert_array_equal(window.means(columns), partial)
    np.testing.assert_array_equal(window.mean[:, columns], partial)
    t, util = window.column("util_gpu_pct")
    assert t is window.t
    np.testing.assert_array_equal(util, partial[:, 1].astype(np.float64))
    assert np.nanmax(partial[:, 0]) == pytest.approx(1001.0, rel=2**-11)
