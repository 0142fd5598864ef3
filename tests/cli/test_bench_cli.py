"""`gpuws bench` against the built-in simulated GPU host (in-process demo), as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core import paths

EXIT_FAIL, EXIT_INCONCLUSIVE = 11, 12  # the one table's verdict statuses


def test_bench_demo_json_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    markdown = tmp_path / "report.md"
    code = main(["bench", "demo", "--quick", "--json", "--export-md", str(markdown)])
    report = json.loads(capsys.readouterr().out)
    # Without faults the demo host reads pass or warn (its vGPU judged against its share).
    assert report["verdict"] in ("pass", "warn"), [c for c in report["checks"] if c["verdict"] in ("fail",
                                                                                                "inconclusive")]
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
