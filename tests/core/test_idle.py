"""Idle detection from recorded telemetry."""

from __future__ import annotations

import pytest

from gpuws.core.idle import GpuActivity, IdleDetector

IDLE = GpuActivity(util_gpu_pct=0, power_w=60, power_limit_w=700)
BUSY = GpuActivity(util_gpu_pct=95, power_w=650, power_limit_w=700)
LOADING = GpuActivity(util_gpu_pct=2, power_w=400, power_limit_w=700)  # low util, high power


def feed(det: IdleDetector, samples: list[tuple[float, list[GpuActivity], bool]]) -> list[float]:
    fired = []
    for t, gpus, in_use in samples:
        ev = det.update(t, gpus, in_use=in_use)
        if ev:
            fired.append(ev.at)
    return fired


def test_fires_once_after_the_idle_minutes_with_money_spent() -> None:
    det = IdleDetector("h", minutes=10, price_per_hour=6.0)
    samples = [(t * 60.0, [IDLE, IDLE], False) for t in range(0, 31)]
    events = [e for t, g, u in samples if (e := det.update(t, g, in_use=u))]
    assert len(events) == 1
    assert events[0].at == 600.0
    assert events[0].money_spent_idle == pytest.approx(1.0)  # 10 min at 6/h
    assert "10 min" in events[0].message


def test_a_busy_gpu_or_an_open_session_resets_the_clock() -> None:
    det = IdleDetector("h", minutes=5)
    samples = [(t * 60.0, [IDLE], False) for t in range(4)]
    samples += [(240.0, [IDLE, BUSY], False)]
    samples += [(t * 60.0, [IDLE], t == 6) for t in range(5, 12)]
    # idle from 5 min, a session is in use at 6 min, idle again from 7 min: due at 12 min
    assert feed(det, samples) == []
    assert feed(det, [(12 * 60.0, [IDLE], False)]) == [720.0]


def test_high_power_at_low_util_is_not_idle() -> None:
    det = IdleDetector("h", minutes=1)
    assert feed(det, [(t * 30.0, [LOADING], False) for t in range(10)]) == []


def test_unknown_utilisation_is_never_idle() -> None:
    det = IdleDetector("h", minutes=1)
    unknown = GpuActivity(None, None, None)
    assert feed(det, [(t * 30.0, [unknown], False) for t in range(10)]) == []


def test_rearms_after_activity() -> None:
    det = IdleDetector("h", minutes=1)
    first = feed(det, [(t * 30.0, [IDLE], False) for t in range(4)])
    again = feed(det, [(200.0, [BUSY], False), *[(200.0 + t * 30.0, [IDLE], False) for t in range(1, 5)]])
    assert first == [60.0] and again == [290.0]
