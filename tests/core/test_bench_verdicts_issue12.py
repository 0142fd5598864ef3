"""Issue 12: the right reference for every check, and no pass from a busy, throttled or corrupt run."""

from __future__ import annotations

from typing import Any

import pytest

from gpuws.core.bench.verdicts import Outcome, Verdict, overall, score_run

H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "mig_mode": "Disabled"}
A100 = {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "mig_mode": "Disabled"}
VERIFIED = {"verify": {"checked_bytes": 1 << 28, "bad_bytes": 0}}


ANSWERS_OK = {"checked": 16384, "wrong": 0, "nonfinite": 0, "max_rel_error": 0.001, "tolerance": 0.01}


def res(check: str, value: Any = None, *, gpu: int | None = 0, **extra: Any) -> dict[str, Any]:
    if check.startswith("gemm_") and value is not None:  # answers checked against float64 (issue 25)
        extra["details"] = {"answers": ANSWERS_OK, **extra.get("details", {})}
    return {"type": "result", "check": check, "gpu": gpu, "value": value, "status": extra.pop("status", "ok"),
            "harness": "gpu", "simulated": False, **extra}


def pcie(gpu: int, gen: int) -> dict[str, Any]:
    return res("env.pcie", gpu=gpu, facts={"gen_current": gen, "gen_max": gen, "width_current": 16, "width_max": 16})


def last(results: list[dict[str, Any]], gpus: list[dict[str, Any]] | None = None) -> Outcome:
    return score_run({"gpus": gpus or [H100, A100]}, results)[-1]


def test_p2p_between_gen5_and_gen4_is_judged_against_the_slower_link() -> None:
    """H100 (Gen5) -> A100 (Gen4) at 21 GB/s is 2/3 of Gen4 x16: a pass, not a FAIL against Gen5."""
    outcome = last([pcie(0, 5), pcie(1, 4), res("p2p", 21.0, peer=1, details=VERIFIED)])
    assert outcome.datasheet == pytest.approx(31.5)
    assert outcome.verdict is Verdict.PASS, outcome.reason
    assert "slower link" in outcome.reason


def test_p2p_uses_nvlink_where_topology_shows_it() -> None:
    topo = res("env.topology", gpu=None, facts={"gpu_count": 2, "links": {"0-1": "NV12", "1-0": "NV12"}})
    outcome = last([topo, res("p2p", 250.0, peer=1, details=VERIFIED)])
    assert outcome.datasheet == 300.0  # the A100's 600 GB/s NVLink, one direction: the slower card
    assert outcome.verdict is Verdict.PASS


def test_sustained_p10_is_judged_and_the_peak_shown() -> None:
    details = {"sustained_p10": 400.0, "peak": 900.0, "telemetry": {}}
    outcome = last([res("gemm_bf16", 850.0, details=details)])
    assert outcome.ratio == pytest.approx(400 / 989.5, abs=1e-3)
    assert outcome.verdict is Verdict.FAIL and "peak window" in outcome.reason


def test_a_throttle_that_cuts_sustained_throughput_is_named_never_passed() -> None:
    telemetry = {"samples": 10, "sm_clock_min_mhz": 660, "sm_clock_max_mhz": 1980,
                 "throttle_reasons_seen": ["hw_slowdown"]}
    outcome = last([res("gemm_bf16", 850.0, details={"sustained_p10": 720.0, "peak": 880.0,
                                                      "telemetry": telemetry})])
    assert outcome.verdict is Verdict.WARN
    assert "throttled: hw_slowdown (SM clock 660-1,980 MHz)" in outcome.reason


def test_a_corrupt_copy_fails_whatever_its_speed() -> None:
    outcome = last([res("mem_copy", 3000.0, details={"verify": {"checked_bytes": 1 << 30, "bad_bytes": 1}})])
    assert outcome.verdict is Verdict.FAIL and "1 of" in outcome.reason


def test_an_unverified_copy_is_inconclusive() -> None:
    outcome = last([res("h2d", 55.0)])
    assert outcome.verdict is Verdict.INCONCLUSIVE and "not verified" in outcome.reason


def test_a_busy_gpu_is_inconclusive_never_fail() -> None:
    busy = {"processes": 3, "utilization_pct": 88, "busy": True}
    outcome = last([res("gemm_bf16", 100.0, busy=busy, details={"sustained_p10": 90.0})])
    assert outcome.verdict is Verdict.INCONCLUSIVE
    assert outcome.reason.startswith("GPU in use by 3 processes (88% utilisation)")


def test_idle_throttle_read_under_load_is_inconclusive_and_busy_warns() -> None:
    throttle = last([res("env.throttle_idle", facts={"reasons": ["hw_slowdown"], "busy": True})])
    assert throttle.verdict is Verdict.INCONCLUSIVE
    busy = last([res("env.busy", facts={"processes": 1, "utilization_pct": 97, "busy": True})])
    assert busy.verdict is Verdict.WARN and "GPU in use by 1 processes" in busy.reason
    idle = last([res("env.busy", facts={"processes": 0, "utilization_pct": 0, "busy": False})])
    assert idle.verdict is Verdict.PASS


def test_vgpu_is_a_time_slice_of_the_whole_card_never_a_framebuffer_share() -> None:
    """Issue 25: a lone vGPU gets the whole card in its slice; a fifth of the card's speed must not
    pass as "its 25 % share", and a low figure is inconclusive (other VMs), never a fail."""
    vgpu = [{"index": 0, "name": "GRID A100-10C"}]
    fast = last([res("gemm_bf16", 250.0)], vgpu)
    assert fast.datasheet == pytest.approx(312) and fast.verdict is Verdict.PASS  # the whole 40 GB A100
    slow = last([res("gemm_bf16", 70.0)], vgpu)
    assert slow.verdict is Verdict.INCONCLUSIVE and "time slice" in slow.reason and "share" not in slow.reason


@pytest.mark.parametrize("details", [
    {"tflops": {"sustained_p10": 300.0, "peak": 700.0}, "telemetry": {"samples": 9}},
    {"telemetry": {"samples": 9, "throttle_reasons_seen": ["hw_thermal_slowdown"]}},
])
def test_stress_that_slows_down_warns(details: dict[str, Any]) -> None:
    outcome = last([res("stress", 0, unit="mismatches", details=details)])
    assert outcome.verdict is Verdict.WARN


def test_inconclusive_stress_is_never_a_pass_overall() -> None:
    outcomes = score_run({"gpus": [H100]}, [res("stress", status="inconclusive", reason="ran 0.6 s of 10 s"),
                                            res("gemm_bf16", 900.0, details={"sustained_p10": 880.0})])
    assert overall(outcomes) is Verdict.INCONCLUSIVE


@pytest.mark.parametrize(("reasons", "sustained", "verdict"), [
    (["hw_thermal_slowdown"], 250.0, Verdict.WARN),  # sustained fell to 86% of the peak window while throttled
    (["hw_power_brake_slowdown"], 250.0, Verdict.WARN),
    (["sw_power_cap"], 250.0, Verdict.PASS),  # the default power limit: how a healthy SXM card runs
    ([], 250.0, Verdict.PASS),  # the same drop, no throttle seen: nothing to name
    (["hw_thermal_slowdown"], 265.0, Verdict.PASS),  # throttled, but sustained held 91% of the peak window
])
def test_the_throttle_rule_on_another_card_format_and_reason(reasons: list[str], sustained: float,
                                                             verdict: Verdict) -> None:
    """A second, independent test of the throttle rule (issue 36): A100, fp16, other reasons, and
    both sides of it (the exempt power cap, the 90%-of-peak-window line)."""
    telemetry = {"samples": 10, "sm_clock_min_mhz": 900, "sm_clock_max_mhz": 1410, "throttle_reasons_seen": reasons}
    outcome = last([res("gemm_fp16", 280.0, gpu=1, details={"sustained_p10": sustained, "peak": 290.0,
                                                            "telemetry": telemetry})])
    assert outcome.verdict is verdict, outcome.reason
    assert ("throttled: " in outcome.reason) == (verdict is Verdict.WARN)
    if verdict is Verdict.WARN:
        assert f"throttled: {reasons[0]} (SM clock 900-1,410 MHz)" in outcome.reason
