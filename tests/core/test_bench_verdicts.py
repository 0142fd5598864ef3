"""Verdict rules: each figure against the datasheet, and every way to be inconclusive."""

from __future__ import annotations

from typing import Any

import pytest

from gpuws.core.bench.verdicts import CPU_LABEL, NO_TOOLCHAIN, Outcome, Verdict, overall, score_run

H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "mig_mode": "Disabled"}
A100 = {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "mig_mode": "Disabled"}
ANSWERS_OK = {"checked": 16384, "wrong": 0, "nonfinite": 0, "max_rel_error": 0.001, "tolerance": 0.01}


def result(check: str, value: Any = None, *, gpu: int | None = 0, status: str = "ok", **extra: Any) -> dict[str, Any]:
    if check in ("mem_copy", "h2d", "d2h", "p2p") and value is not None:
        # Every measured copy comes verified from the runner (a wrong byte fails it).
        extra.setdefault("details", {"verify": {"checked_bytes": 1 << 20, "bad_bytes": 0}})
    if check.startswith("gemm_") and value is not None:
        # Every measured GEMM comes with its answers checked against float64 (issue 25).
        extra["details"] = {"answers": ANSWERS_OK, **extra.get("details", {})}
    return {"type": "result", "check": check, "gpu": gpu, "value": value, "status": status,
            "harness": extra.pop("harness", "gpu"), "simulated": False, **extra}


def score_one(r: dict[str, Any], gpus: list[dict[str, Any]] | None = None,
              extra: list[dict[str, Any]] | None = None) -> Outcome:
    outcomes = score_run({"gpus": gpus if gpus is not None else [H100]}, [*(extra or []), r])
    return outcomes[-1]


@pytest.mark.parametrize(
    ("check", "value", "verdict"),
    [
        # GEMM on H100 SXM bf16 (989.5): pass >= 60% of the dense peak, warn >= 45% (GEMM_BY_MODEL:
        # a healthy 700 W card sustains about 65-69% under its power cap), else fail.
        ("gemm_bf16", 800.0, Verdict.PASS),
        ("gemm_bf16", 0.60 * 989.5, Verdict.PASS),
        ("gemm_bf16", 0.59 * 989.5, Verdict.WARN),
        ("gemm_bf16", 0.45 * 989.5, Verdict.WARN),
        ("gemm_bf16", 0.44 * 989.5, Verdict.FAIL),
        ("gemm_fp32", 55.0, Verdict.PASS),
        ("gemm_fp8", 400.0, Verdict.FAIL),
        # Memory: pass >= 75% of the datasheet bandwidth (3,350 GB/s), warn >= 55%.
        ("mem_copy", 2900.0, Verdict.PASS),
        ("mem_triad", 2000.0, Verdict.WARN),
        ("mem_copy", 1500.0, Verdict.FAIL),
        # Host link: Gen5 x16 is 63 GB/s one way: pass >= 70%, warn >= 45%.
        ("h2d", 50.0, Verdict.PASS),
        ("d2h", 30.0, Verdict.WARN),
        ("h2d", 20.0, Verdict.FAIL),
        # Far above the datasheet is a wrong model or broken timer, never a pass.
        ("gemm_bf16", 1500.0, Verdict.INCONCLUSIVE),
    ],
)
def test_figures_against_the_datasheet(check: str, value: float, verdict: Verdict) -> None:
    outcome = score_one(result(check, value))
    assert outcome.verdict is verdict, outcome.reason
    assert outcome.datasheet is not None and outcome.ratio == pytest.approx(value / outcome.datasheet, abs=1e-3)


def test_host_link_is_scored_against_the_link_the_slot_allows() -> None:
    pcie = result("env.pcie", facts={"gen_current": 4, "gen_max": 4, "width_current": 16, "width_max": 16})
    outcome = score_one(result("h2d", 25.0), extra=[pcie])
    assert outcome.verdict is Verdict.PASS
    assert outcome.datasheet == pytest.approx(31.5)


def test_p2p_uses_nvlink_when_links_are_up() -> None:
    nvlink = result("env.nvlink", facts={"links_total": 18, "links_active": 18, "total_gb_s": 900})
    outcome = score_one(result("p2p", 350.0, peer=1), extra=[nvlink])
    assert (outcome.datasheet, outcome.verdict, outcome.peer) == (450.0, Verdict.PASS, 1)
    without = score_one(result("p2p", 350.0, peer=1))
    assert without.verdict is Verdict.INCONCLUSIVE  # 350 GB/s over PCIe Gen5 is not believable


@pytest.mark.parametrize(
    ("r", "gpus", "reason_part"),
    [
        (result("gemm_bf16", status="inconclusive", reason="allocation failed: CUDA out of memory"), [H100],
         "allocation failed"),
        (result("gemm_bf16", status="inconclusive", reason="zero iterations completed (timeout)"), [H100],
         "zero iterations"),
        (result("toolchain", gpu=None, status="inconclusive", reason=NO_TOOLCHAIN), [H100], "no CUDA toolchain"),
        (result("gemm_bf16", 500.0), [{"index": 0, "name": "NVIDIA GeForce RTX 3090"}], "unknown model"),
        (result("gemm_bf16", 500.0), [{**H100, "mig_mode": "Enabled"}], "MIG"),
        # A vGPU whose card is not known: no share to judge against.
        (result("gemm_bf16", 30.0), [{"index": 0, "name": "GRID RTX8000-12Q"}], "vGPU"),
        (result("gemm_fp32", 0.1, harness="cpu"), [], CPU_LABEL),
        (result("stress", 0, harness="cpu"), [], CPU_LABEL),
        (result("gemm_bf16", None), [H100], "no figure"),
        (result("timeout", gpu=None, status="inconclusive", reason="the overall time limit (1 s) was reached"),
         [H100], "time limit"),
    ],
)
def test_inconclusive_never_passes(r: dict[str, Any], gpus: list[dict[str, Any]], reason_part: str) -> None:
    outcome = score_one(r, gpus)
    assert outcome.verdict is Verdict.INCONCLUSIVE
    assert reason_part in outcome.reason


def test_cards_without_a_format_skip_it() -> None:
    outcome = score_one(result("gemm_fp8", 100.0), [A100])
    assert outcome.verdict is Verdict.SKIPPED
    assert score_one(result("p2p", gpu=None, status="skipped", reason="one GPU")).verdict is Verdict.SKIPPED


@pytest.mark.parametrize(
    ("value", "details", "verdict"),
    [
        (0, {"telemetry": {"throttle_reasons_seen": ["gpu_idle", "sw_power_cap"]}}, Verdict.PASS),
        (0, {"telemetry": {"throttle_reasons_seen": ["hw_thermal_slowdown"]}}, Verdict.WARN),
        (3, {}, Verdict.FAIL),
    ],
)
def test_stress_correctness(value: int, details: dict[str, Any], verdict: Verdict) -> None:
    assert score_one(result("stress", value, details=details)).verdict is verdict


def test_cpu_harness_mismatches_still_fail() -> None:
    outcome = score_one(result("stress", 2, harness="cpu"), [])
    assert outcome.verdict is Verdict.FAIL and CPU_LABEL in outcome.reason


@pytest.mark.parametrize(
    ("value", "verdict"), [(0.95, Verdict.PASS), (0.8, Verdict.PASS), (0.79, Verdict.WARN), (0.5, Verdict.FAIL)]
)
def test_scaling_is_flagged_under_0_8(value: float, verdict: Verdict) -> None:
    assert score_one(result("scaling", value, gpu=None)).verdict is verdict


@pytest.mark.parametrize(
    ("check", "facts", "verdict"),
    [
        ("env.driver", {"driver_cuda_version": "12.4", "runtime_cuda_version": "12.1"}, Verdict.PASS),
        ("env.driver", {"driver_cuda_version": "12.2", "runtime_cuda_version": "12.4"}, Verdict.WARN),
        ("env.driver", {"driver_cuda_version": "11.8", "runtime_cuda_version": "12.1"}, Verdict.FAIL),
        ("env.driver", {"driver_cuda_version": None, "runtime_cuda_version": "12.1"}, Verdict.INCONCLUSIVE),
        ("env.ecc", {"ecc_mode": "Enabled", "uncorrected_volatile": 0, "uncorrected_aggregate": 0}, Verdict.PASS),
        ("env.ecc", {"ecc_mode": "Enabled", "uncorrected_volatile": 2}, Verdict.FAIL),
        ("env.ecc", {"ecc_mode": "Enabled", "uncorrected_volatile": 0, "uncorrected_aggregate": 1}, Verdict.WARN),
        ("env.ecc", {"ecc_mode": "Disabled"}, Verdict.WARN),
        ("env.retired_pages", {"pending": "No", "double_bit": 0, "remapped_pending": "No",
                               "remapped_failure": "No"}, Verdict.PASS),
        ("env.retired_pages", {"pending": "Yes"}, Verdict.FAIL),
        ("env.retired_pages", {"pending": "No", "remapped_failure": "Yes"}, Verdict.FAIL),
        ("env.retired_pages", {"pending": "No", "remapped_pending": "Yes"}, Verdict.WARN),
        ("env.persistence", {"persistence_mode": "Disabled"}, Verdict.WARN),
        ("env.persistence", {"persistence_mode": "Enabled"}, Verdict.PASS),
        ("env.pcie", {"gen_current": 1, "gen_max": 5, "width_current": 16, "width_max": 16}, Verdict.PASS),
        ("env.pcie", {"gen_current": 5, "gen_max": 5, "width_current": 8, "width_max": 16}, Verdict.FAIL),
        ("env.throttle_idle", {"reasons": ["gpu_idle"]}, Verdict.PASS),
        ("env.throttle_idle", {"reasons": ["gpu_idle", "sw_power_cap"]}, Verdict.WARN),
        ("env.throttle_idle", {"reasons": ["hw_slowdown"]}, Verdict.FAIL),
        ("env.nvlink", {"links_total": 18, "links_active": 16}, Verdict.WARN),
        ("env.nvlink", {"links_total": 0, "links_active": 0}, Verdict.SKIPPED),
        ("env.topology", {"gpu_count": 8, "mig_modes": ["Disabled"] * 8, "names": ["NVIDIA H100 80GB HBM3"] * 8,
                          "expected": {"gpu_count": 8, "mig_mode": "Disabled", "model": "H100 SXM"}}, Verdict.PASS),
        ("env.topology", {"gpu_count": 7, "mig_modes": ["Disabled"] * 7, "names": ["NVIDIA H100 80GB HBM3"] * 7,
                          "expected": {"gpu_count": 8}}, Verdict.FAIL),
        ("env.topology", {"gpu_count": 1, "mig_modes": ["Enabled"], "names": ["NVIDIA H100 80GB HBM3"],
                          "expected": {"mig_mode": "Disabled"}}, Verdict.FAIL),
    ],
)
def test_environment_rules(check: str, facts: dict[str, Any], verdict: Verdict) -> None:
    gpu = None if check in ("env.driver", "env.topology") else 0
    outcome = score_one(result(check, gpu=gpu, facts=facts))
    assert outcome.verdict is verdict, outcome.reason


def test_overall_verdict_order() -> None:
    def o(v: Verdict) -> Outcome:
        return Outcome("x", 0, v)

    assert overall([o(Verdict.PASS), o(Verdict.SKIPPED)]) is Verdict.PASS
    assert overall([o(Verdict.PASS), o(Verdict.WARN)]) is Verdict.WARN
    assert overall([o(Verdict.WARN), o(Verdict.INCONCLUSIVE)]) is Verdict.INCONCLUSIVE
    assert overall([o(Verdict.INCONCLUSIVE), o(Verdict.FAIL)]) is Verdict.FAIL
    assert overall([o(Verdict.SKIPPED)]) is Verdict.INCONCLUSIVE
    assert overall([]) is Verdict.INCONCLUSIVE


def test_empty_or_broken_runs_are_inconclusive() -> None:
    assert [o.verdict for o in score_run({}, [])] == [Verdict.INCONCLUSIVE]
    outcomes = score_run({"error": "RuntimeError: CUDA driver initialization failed"}, [])
    assert outcomes[-1].verdict is Verdict.INCONCLUSIVE and "initialization" in outcomes[-1].reason
    # Hostile or malformed lines are scored as inconclusive, never crash.
    odd = score_run({"gpus": [{"index": "x"}, "junk"]}, [{"check": "gemm_bf16", "gpu": "0", "value": "9e9",
                                                         "status": "ok"}])
    assert odd[0].verdict is Verdict.INCONCLUSIVE
