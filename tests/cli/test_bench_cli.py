"""`gpuws bench` against the built-in simulated GPU host (in-process demo), as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core import paths
from gpuws.core.bench.report import build_report
from gpuws.core.bench.results import BenchRun, ResultStore

H200_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "h200"

EXIT_FAIL, EXIT_INCONCLUSIVE = 11, 12  # the one table's verdict statuses


def test_bench_demo_json_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    markdown = tmp_path / "report.md"
    code = main(["bench", "demo", "--quick", "--json", "--export-md", str(markdown)])
    report = json.loads(capsys.readouterr().out)
    # Without faults the demo host reads pass (issue 25), and only a pass exits 0 (issue 32).
    assert report["verdict"] == "pass", [c for c in report["checks"] if c["verdict"] != "pass"]
    assert code == 0
    assert report["simulated"] is True and report["label"].startswith("SIMULATED")
    assert report["summary"]["verdict"] == report["verdict"]
    assert [g["name"] for g in report["gpus"]][:3] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
                                                        "NVIDIA L40S"]
    assert report["gpus"][0]["driver_version"]
    bf16 = next(c for c in report["checks"] if c["check"] == "gemm_bf16" and c["gpu"] == 1)
    assert {"measured", "datasheet", "ratio", "verdict", "unit"} <= set(bf16)
    assert bf16["datasheet"] == 312 and bf16["unit"] == "TFLOP/s" and bf16["simulated"] is True
    assert bf16["verdict"] in ("pass", "warn", "fail")
    saved = list((paths.data_dir() / "bench" / "demo").glob("*-simulated.json"))
    assert len(saved) == 1
    assert "SIMULATED" in markdown.read_text()


def test_bench_demo_human_output_is_labelled(capsys: pytest.CaptureFixture[str]) -> None:
    main(["bench", "demo", "--quick", "--no-save"])
    out = capsys.readouterr().out
    assert "[SIMULATED GPU HOST] [1/8] environment" in out
    assert "[SIMULATED: figures from the simulated GPU host, not a measurement]" in out
    assert "gemm_bf16 gpu0" in out and "verdict: " in out
    assert not (paths.data_dir() / "bench" / "demo").exists()


def test_bench_unknown_profile_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "no-such-host", "--json"]) == 2  # refused input: no such profile
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("gpuws: error:") and "no-such-host" in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_bench_refuses_a_bad_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "demo", "--timeout", "0"]) == 2
    assert "--timeout must be positive" in capsys.readouterr().err


def _recorded_h200(factor: float) -> BenchRun:
    """The H200 recording (tests/fixtures/real/h200, PyTorch backend), every throughput figure
    times `factor`: the same card, that much slower."""
    run = BenchRun(host="h200", mode="check", started_at="2026-12-04T15:02:00Z")
    for line in (H200_DIR / "bench-torch-answers.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "summary":
            run.summary = event
        if event.get("type") != "result":
            continue
        if event.get("unit") in ("TFLOP/s", "GB/s") and event.get("value") is not None:
            event["value"] *= factor
            details = event.get("details") or {}
            for key in ("sustained_p10", "peak"):
                if isinstance(details.get(key), (int, float)):
                    details[key] *= factor
            details["per_window"] = [x * factor for x in details.get("per_window") or []]
        run.results.append(event)
    return run


@pytest.mark.parametrize(("factor", "allow_warn", "verdict", "code"), [
    (1.0, False, "pass", 0), (0.7, False, "warn", 13), (0.7, True, "warn", 0)])
def test_a_card_30_percent_below_its_recording_is_not_a_pass(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              factor: float, allow_warn: bool, verdict: str,
                                                              code: int) -> None:
    """Issue 32: an H200 30 % below its recording exited 0 from `bench --check`; a script checking
    $? read it as a pass. The CLI's last step (scoring, report, exit status) on the recording."""
    from gpuws.cli.commands.bench import _finish_check
    from gpuws.cli.main import build_parser

    argv = ["bench", "h200", "--check", "--json", "--no-save", "--report-dir", str(tmp_path)]
    args = build_parser().parse_args(argv + (["--allow-warn"] if allow_warn else []))
    run = _recorded_h200(factor)
    report = build_report(run)
    assert _finish_check(args, run, report, ResultStore(), None) == code
    printed = json.loads(capsys.readouterr().out)
    assert printed["verdict"] == verdict
