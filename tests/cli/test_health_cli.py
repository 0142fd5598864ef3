"""`gpuws health demo`: healthy with no fault, and each health fault of the demo host names the right
check and verdict (issue 25, "Done when")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuws.cli.main import main


def health(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, faults: str,
           *extra: str) -> tuple[int, dict[str, Any]]:
    monkeypatch.setenv("GPUWS_SIM_FAULTS", faults)
    code = main(["health", "demo", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def findings(report: dict[str, Any], gpu: int, check: str) -> list[dict[str, str]]:
    return [f for f in report["gpus"][gpu]["findings"] if f["check"] == check]


def test_healthy_demo_host(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, report = health(capsys, monkeypatch, "")
    assert code == 0 and report["verdict"] == "healthy" and report["simulated"] is True
    assert [g["verdict"] for g in report["gpus"]] == ["healthy"] * 4
    assert set(report["gpus"][0]) >= {"index", "uuid", "serial", "verdict", "findings"}
    assert all(set(f) == {"check", "verdict", "detail"} for g in report["gpus"] for f in g["findings"])
    kernel = next(f for f in report["findings"] if f["check"] == "kernel_log")
    assert kernel["verdict"] == "healthy" and "journalctl" in kernel["detail"]


@pytest.mark.parametrize(("fault", "gpu", "check", "verdict", "words"), [
    ("xid-79:0", 0, "xid", "unhealthy", "XID 79"),
    ("remap-pending:1", 1, "remapped_rows", "unhealthy", "remapped_row_pending=Yes"),
    ("reset-required:2", 2, "reset_required", "unhealthy", "gpu_recovery_action=Reset"),
    ("fabric-down:0", 0, "fabric", "unhealthy", "In Progress"),
    ("nvlink-errors:1", 1, "nvlink_errors", "degraded", "CRC Errors 4821"),
    ("pcie-capped:0", 0, "pcie", "degraded", "running at Gen4 where card and platform allow Gen5"),
    ("power-capped:0", 0, "power_limit", "degraded", "capped by the provider at 300 of 700 W"),
])
def test_each_fault_names_its_check_and_verdict(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                fault: str, gpu: int, check: str, verdict: str, words: str) -> None:
    code, report = health(capsys, monkeypatch, fault)
    (found,) = [f for f in findings(report, gpu, check) if f["verdict"] != "healthy"]
    assert found["verdict"] == verdict and words in found["detail"]
    assert report["gpus"][gpu]["verdict"] == verdict and report["verdict"] == verdict and code == 11
    others = [g["verdict"] for g in report["gpus"] if g["index"] != gpu]
    assert others == ["healthy"] * 3
    assert words.split()[0] in report["report"] and report["gpus"][gpu]["uuid"] in report["report"]


def test_application_xid_is_information_only(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    code, report = health(capsys, monkeypatch, "xid-13:1")
    (xid,) = findings(report, 1, "xid")
    assert xid["verdict"] == "info" and "XID 13" in xid["detail"] and "application" in xid["detail"]
    assert report["verdict"] == "healthy" and code == 0


def test_expectations_and_cuda(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, report = health(capsys, monkeypatch, "", "--expect-gpus", "8", "--cuda", "12.4")
    host = {f["check"]: f for f in report["findings"]}
    assert host["expect.gpu_count"]["verdict"] == "unhealthy" and "expected 8" in host["expect.gpu_count"]["detail"]
    assert host["cuda"]["verdict"] == "healthy" and ">= 550.54.14" in host["cuda"]["detail"]
    assert code == 11


def test_dcgm_absence_is_said(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, report = health(capsys, monkeypatch, "", "--dcgm")
    (dcgm,) = [f for f in report["findings"] if f["check"] == "dcgm"]
    assert dcgm["verdict"] == "info" and "not installed" in dcgm["detail"] and code == 0


def test_human_screen_and_provider_report(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUWS_SIM_FAULTS", "power-capped:0")
    assert main(["health", "demo"]) == 11
    out = capsys.readouterr().out
    assert "SIMULATED" in out and "DEGRADED" in out and "300 of 700 W" in out
    assert main(["health", "demo", "--report"]) == 11
    report = capsys.readouterr().out
    assert "serial 1650000000000" in report and "power_limit degraded" in report


def test_allow_warn_never_passes_a_degraded_card(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32: health has no warn verdict; a power cap is degraded and stays 11 with --allow-warn
    (the flag is taken so that a script can give bench and health the same flags)."""
    code, report = health(capsys, monkeypatch, "power-capped:0", "--allow-warn")
    assert report["verdict"] == "degraded" and code == 11
    code, report = health(capsys, monkeypatch, "", "--allow-warn")
    assert report["verdict"] == "healthy" and code == 0
