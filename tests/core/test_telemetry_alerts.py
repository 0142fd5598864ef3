"""Alerts: fire once, clear with hysteresis, idle cost arithmetic, unreachable hosts."""

from __future__ import annotations

import pytest

from gpuws.core.models import AlertThresholds
from gpuws.core.telemetry.alerts import AlertEngine, AlertEvent, AlertKind, Severity, idle_cost
from gpuws.core.telemetry.sample import GpuSample, MigRef

T0 = 1_700_000_000.0


def s(t: float, gpu: int = 0, **values: object) -> GpuSample:
    base: dict[str, object] = {"util_gpu_pct": 50.0, "mem_used_mib": 10.0, "mem_total_mib": 100.0}
    base.update(values)
    return GpuSample(t=T0 + t, gpu=gpu, **base)  # type: ignore[arg-type]


def kinds(events: list[AlertEvent]) -> list[tuple[str, bool]]:
    return [(e.alert.kind.value, e.fired) for e in events]


def test_memory_alert_fires_once_and_clears_below_the_margin() -> None:
    engine = AlertEngine()
    assert engine.evaluate("h", [s(0, mem_used_mib=85)]) == []
    fired = engine.evaluate("h", [s(1, mem_used_mib=95)])
    assert kinds(fired) == [("oom_risk", True)]
    assert "95%" in fired[0].alert.message and fired[0].alert.severity is Severity.WARNING
    assert engine.evaluate("h", [s(2, mem_used_mib=97)]) == []  # fires once
    assert engine.evaluate("h", [s(3, mem_used_mib=89)]) == []  # hysteresis: still within 5 points
    cleared = engine.evaluate("h", [s(4, mem_used_mib=80)])
    assert kinds(cleared) == [("oom_risk", False)] and cleared[0].alert.cleared_at == T0 + 4
    assert [a.kind for a in engine.log.entries()] == [AlertKind.OOM_RISK] and engine.log.active() == []
    assert kinds(engine.evaluate("h", [s(5, mem_used_mib=99)])) == [("oom_risk", True)]  # a new alert


def test_threshold_comes_from_the_profile() -> None:
    engine = AlertEngine()
    engine.configure("h", AlertThresholds(mem_used_pct=50.0), None)
    assert kinds(engine.evaluate("h", [s(0, mem_used_mib=60)])) == [("oom_risk", True)]


def test_thermal_throttle_needs_to_persist_and_to_stop_for_a_while() -> None:
    engine = AlertEngine()
    hot = {"throttle_reasons": ["hw_thermal_slowdown"]}
    assert engine.evaluate("h", [s(0, **hot)]) == []
    assert engine.evaluate("h", [s(3, **hot)]) == []
    fired = engine.evaluate("h", [s(5, **hot)])
    assert kinds(fired) == [("thermal_throttle", True)] and fired[0].alert.started_at == T0
    assert engine.evaluate("h", [s(6, throttle_reasons=[])]) == []
    assert engine.evaluate("h", [s(20, **hot)]) == []  # came back: the clear timer restarts
    assert engine.evaluate("h", [s(21, throttle_reasons=[])]) == []
    assert kinds(engine.evaluate("h", [s(51, throttle_reasons=[])])) == [("thermal_throttle", False)]


def test_power_cap_and_idle_bit_are_not_thermal() -> None:
    engine = AlertEngine()
    events = []
    for t in range(0, 62):
        events += engine.evaluate("h", [s(t, throttle_reasons=["sw_power_cap"], idle=True)])
    assert kinds(events) == [("power_throttle", True)]


POWER = {"throttle_reasons": ["sw_power_cap"]}


def flap(engine: AlertEngine, start: float, on_s: int, off_s: int, cycles: int) -> list[AlertEvent]:
    """Power capping on for `on_s`, off for `off_s`, `cycles` times, one sample a second."""
    events: list[AlertEvent] = []
    t = start
    for _ in range(cycles):
        for _ in range(on_s):
            events += engine.evaluate("h", [s(t, **POWER)])
            t += 1
        for _ in range(off_s):
            events += engine.evaluate("h", [s(t, throttle_reasons=[])])
            t += 1
    return events


def test_power_throttle_flapping_every_40_s_never_fires() -> None:
    """Found: GPU 3's power-throttle alert raised and cleared every ~40 s, each time a pop-up."""
    engine = AlertEngine()
    assert flap(engine, 0, on_s=20, off_s=20, cycles=10) == []
    assert engine.log.entries() == []


def test_minimum_hold_is_per_kind_and_editable() -> None:
    engine = AlertEngine()
    assert engine.policy(AlertKind.POWER_THROTTLE).hold_s == 60.0
    engine.set_policy(AlertKind.POWER_THROTTLE, hold_s=10)
    events = flap(engine, 0, on_s=12, off_s=0, cycles=1)
    assert kinds(events) == [("power_throttle", True)] and events[0].alert.started_at == T0
    assert engine.policy(AlertKind.OOM_RISK).hold_s == 0.0  # other kinds unchanged


def test_a_flapping_alert_is_one_row_with_a_count_and_repeats_are_marked() -> None:
    engine = AlertEngine()
    engine.set_policy(AlertKind.POWER_THROTTLE, hold_s=5, repeat_s=600)
    events = flap(engine, 0, on_s=10, off_s=40, cycles=5)  # fires, clears after 30 s, comes back
    fired = [e for e in events if e.fired]
    assert len(fired) == 5 and [e.repeat for e in fired] == [False, True, True, True, True]
    entries = engine.log.entries()
    assert len(entries) == 1 and entries[0].count == 5 and entries[0].severity is Severity.INFO
    # After the repeat window a new episode is a new row.
    later = flap(engine, 250 + 700, on_s=10, off_s=0, cycles=1)
    assert [e.repeat for e in later if e.fired] == [False] and len(engine.log.entries()) == 2


def test_acknowledge_and_mute_per_host_and_kind() -> None:
    engine = AlertEngine()
    engine.log.mute("h", AlertKind.OOM_RISK)
    seen: list[AlertEvent] = []
    engine.log.subscribe(seen.append)
    engine.evaluate("h", [s(0, mem_used_mib=95)])
    engine.evaluate("other", [s(0, mem_used_mib=95)])
    assert [(e.alert.host, e.muted) for e in seen] == [("h", True), ("other", False)]
    assert len(engine.log.entries()) == 2  # muted alerts are still logged
    alert = engine.log.entries()[0]
    assert not alert.acknowledged and engine.log.acknowledge(alert.id) is alert and alert.acknowledged
    engine.log.mute("h", AlertKind.OOM_RISK, False)
    assert not engine.log.is_muted("h", AlertKind.OOM_RISK)


def test_idle_cost_names_its_currency() -> None:
    engine = AlertEngine()
    engine.configure("h", AlertThresholds(idle_minutes=1), 3.6, "EUR")
    events = [e for t in range(0, 61, 10) for e in engine.evaluate("h", [s(t, util_gpu_pct=0.0)])]
    assert kinds(events) == [("idle_gpu", True)]
    assert "burning €0.06 so far" in events[0].alert.message and events[0].alert.currency == "EUR"


def test_ecc_alert_on_increase_only() -> None:
    engine = AlertEngine()
    assert engine.evaluate("h", [s(0, ecc_errors_corrected=3, ecc_errors_uncorrected=0)]) == []  # baseline
    assert engine.evaluate("h", [s(1, ecc_errors_corrected=3, ecc_errors_uncorrected=0)]) == []
    fired = engine.evaluate("h", [s(2, ecc_errors_corrected=3, ecc_errors_uncorrected=1)])
    assert kinds(fired) == [("ecc_errors", True)] and fired[0].alert.severity is Severity.CRITICAL
    assert engine.evaluate("h", [s(300, ecc_errors_corrected=3, ecc_errors_uncorrected=1)]) == []
    assert kinds(engine.evaluate("h", [s(602, ecc_errors_corrected=3, ecc_errors_uncorrected=1)])) == [
        ("ecc_errors", False)
    ]


def test_idle_alert_after_n_minutes_with_money_burnt() -> None:
    engine = AlertEngine()
    engine.configure("h", AlertThresholds(idle_util_pct=5.0, idle_minutes=10.0), price_per_hour=4.0)
    events: list[AlertEvent] = []
    for minute in range(0, 31):
        # Two GPUs: GPU 0 idle, GPU 1 busy; the price is shared between them.
        events += engine.evaluate("h", [s(minute * 60, 0, util_gpu_pct=1.0), s(minute * 60, 1, util_gpu_pct=90.0)])
    assert kinds(events) == [("idle_gpu", True)]
    alert = events[0].alert
    assert alert.gpu == "0" and alert.started_at == T0
    assert alert.active and "idle" in alert.message and "30 min" in alert.message
    # 30 min idle at 4.00/h shared by 2 GPUs: 2.00/h * 0.5 h = 1.00
    assert alert.cost == pytest.approx(1.0)
    from gpuws.core.money import default_currency, money

    assert f"burning {money(1.0, default_currency())} so far" in alert.message  # Found: a bare "1.00"
    # A short blip of work does not clear it; sustained work above threshold + margin does.
    assert engine.evaluate("h", [s(31 * 60, 0, util_gpu_pct=80.0)]) == []
    assert engine.evaluate("h", [s(31 * 60 + 5, 0, util_gpu_pct=2.0)]) == []
    assert engine.evaluate("h", [s(32 * 60, 0, util_gpu_pct=8.0)]) == []  # under 5 + 5: still idle
    assert engine.evaluate("h", [s(33 * 60, 0, util_gpu_pct=60.0)]) == []
    cleared = engine.evaluate("h", [s(33 * 60 + 30, 0, util_gpu_pct=60.0)])
    assert kinds(cleared) == [("idle_gpu", False)]


def test_idle_cost_arithmetic() -> None:
    assert idle_cost(3.6, 3600) == pytest.approx(3.6)
    assert idle_cost(3.6, 600, gpu_count=4) == pytest.approx(0.15)
    assert idle_cost(None, 600) is None


def test_unsupported_utilisation_is_never_idle() -> None:
    engine = AlertEngine()
    engine.configure("h", AlertThresholds(idle_minutes=1.0), 1.0)
    events: list[AlertEvent] = []
    for minute in range(10):
        events += engine.evaluate("h", [s(minute * 60, util_gpu_pct=None),
                                        s(minute * 60, util_gpu_pct=0.0, mig=MigRef(0, 1, 1, 0))])
    assert events == []


def test_host_unreachable_fires_and_clears_on_samples() -> None:
    engine = AlertEngine()
    seen: list[AlertEvent] = []
    engine.log.subscribe(seen.append)
    fired = engine.host_unreachable("h", T0, "connection refused")
    assert kinds(fired) == [("host_unreachable", True)] and fired[0].alert.gpu is None
    assert engine.host_unreachable("h", T0 + 5) == []
    assert kinds(engine.evaluate("h", [s(10)])) == [("host_unreachable", False)]
    assert kinds(seen) == [("host_unreachable", True), ("host_unreachable", False)]
