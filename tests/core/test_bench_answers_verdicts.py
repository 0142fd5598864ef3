"""Issue 25: scoring of checked answers, per-model thresholds, and the real H200 run (no false warn)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuws.core.bench.report import build_report
from gpuws.core.bench.results import BenchRun
from gpuws.core.bench.verdicts import GEMM_BY_MODEL, GEMM_CHECKS, Verdict, gemm_rule, score_run

H200_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "h200"
H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "mig_mode": "Disabled"}


def gemm(value: float | None, answers: dict[str, Any] | None, status: str = "ok") -> dict[str, Any]:
    details: dict[str, Any] = {"sustained_p10": value} if value else {}
    if answers is not None:
        details["answers"] = answers
    return {"type": "result", "check": "gemm_bf16", "gpu": 0, "value": value, "status": status, "harness": "gpu",
            "simulated": False, "details": details, "reason": None if status == "ok" else "too few windows"}


WRONG = {"checked": 16384, "wrong": 4, "nonfinite": 0, "max_rel_error": 0.4, "tolerance": 0.01,
         "first_wrong": [130, 646]}


def test_fast_and_wrong_fails() -> None:
    (outcome,) = score_run({"gpus": [H100]}, [gemm(900.0, WRONG)])
    assert outcome.verdict is Verdict.FAIL and "wrong answers" in outcome.reason and "row 130" in outcome.reason


def test_wrong_answers_fail_even_when_the_timing_was_inconclusive() -> None:
    (outcome,) = score_run({"gpus": [H100]}, [gemm(None, WRONG, status="inconclusive")])
    assert outcome.verdict is Verdict.FAIL


def test_a_nan_fails() -> None:
    nan = {**WRONG, "wrong": 1, "nonfinite": 1}
    (outcome,) = score_run({"gpus": [H100]}, [gemm(900.0, nan)])
    assert outcome.verdict is Verdict.FAIL and "1 not finite" in outcome.reason


def test_unchecked_answers_are_inconclusive_never_a_pass() -> None:
    (outcome,) = score_run({"gpus": [H100]}, [gemm(900.0, None)])
    assert outcome.verdict is Verdict.INCONCLUSIVE and "not checked" in outcome.reason


def test_every_threshold_row_names_its_source() -> None:
    assert all(row.source and row.check in GEMM_CHECKS for row in GEMM_BY_MODEL)
    assert gemm_rule("T4", "gemm_fp16").rule.pass_at <= 24 / 65  # a healthy 70 W T4 passes
    assert gemm_rule("H100 SXM", "gemm_fp8").rule.pass_at <= 0.60
    assert gemm_rule("A100 80GB SXM", "gemm_bf16").rule.pass_at == 0.70  # the default


def _run(name: str) -> BenchRun:
    run = BenchRun(host="h200", mode="quick", started_at="2026-12-04T15:02:00Z")
    for line in (H200_DIR / name).read_text().splitlines():
        event = json.loads(line) if line.startswith("{") else None
        if isinstance(event, dict) and event.get("type") == "result":
            run.results.append(event)
        elif isinstance(event, dict) and event.get("type") == "summary":
            run.summary = event
    return run


@pytest.mark.parametrize("name", ["bench-torch-answers.jsonl", "bench-nvcc-answers.jsonl"])
def test_a_healthy_h200_is_not_warned(name: str) -> None:
    """Recorded on one H200 by gpuws's device check: tf32/fp16/bf16/fp8 sustained 64-69 % of dense
    peak under sw_power_cap used to warn; now each GEMM passes, answers checked."""
    report = build_report(_run(name))
    gemms = [c for c in report["checks"] if c["check"] in GEMM_CHECKS and c["verdict"] != "inconclusive"]
    assert len(gemms) >= 4 and all(c["verdict"] == "pass" for c in gemms), [(c["check"], c["reason"]) for c in gemms]
    assert not [c for c in report["checks"] if c["verdict"] in ("warn", "fail")]


def test_real_gpu_that_cuda_cannot_see_is_inconclusive_with_the_reason() -> None:
    """Recorded on the H200 with CUDA_VISIBLE_DEVICES empty: nvidia-smi lists the GPU, CUDA sees none."""
    report = build_report(_run("bench-cuda-invisible.jsonl"))
    perf = [c for c in report["checks"] if c["check"] in (*GEMM_CHECKS, "mem_copy", "h2d", "stress")]
    assert perf and all(c["verdict"] == "inconclusive" and "CUDA cannot see GPU 0" in c["reason"] for c in perf)
    assert report["verdict"] == "inconclusive"


def _env(check: str, **facts: Any) -> dict[str, Any]:
    return {"type": "result", "check": check, "gpu": 0, "value": None, "status": "ok", "harness": "gpu",
            "simulated": False, "facts": facts}


def test_a_gen5_card_in_a_gen4_slot_warns() -> None:
    """Issue 25: the reference was the link the slot allows, so a capped card passed."""
    (pcie,) = score_run({"gpus": [H100]}, [_env("env.pcie", gen_current=4, gen_max=4, width_current=16,
                                                 width_max=16)])
    assert pcie.verdict is Verdict.WARN and "Gen4 x16 of the card's Gen5 x16" in pcie.reason


def test_a_low_generation_under_load_warns_at_idle_it_is_power_saving() -> None:
    idle = _env("env.pcie", gen_current=2, gen_max=5, width_current=16, width_max=16)
    outcomes = score_run({"gpus": [H100]}, [idle, _env("env.pcie_load", gen_current=3, width_current=16)])
    assert outcomes[0].verdict is Verdict.PASS and "power saving" in outcomes[0].reason
    assert outcomes[1].verdict is Verdict.WARN and "trained low" in outcomes[1].reason
    ok = score_run({"gpus": [H100]}, [idle, _env("env.pcie_load", gen_current=5, width_current=16)])
    assert ok[1].verdict is Verdict.PASS
