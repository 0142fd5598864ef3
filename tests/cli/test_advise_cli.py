"""`gpuws advise` against the built-in simulated GPU host (in-process demo), as a user runs it.

The demo's loads: GPU 1 (A100) holds a notebook kernel and computes nothing; GPU 2 (L40S) runs a
sustained render at ~88 % (see gpuws/sim/dynamics.py). `--observe` is a few seconds here, with
`--min-data` lowered to match (the default minimum of data is 30 s).
"""

from __future__ import annotations

import json

import pytest

from gpuws.cli.main import main

pytestmark = pytest.mark.slow
ADVICE = ("keep", "smaller", "larger", "stop", "not enough data")


def test_advise_demo_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["advise", "demo", "--observe", "4", "--min-data", "2", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"host", "window_s", "gpus"}
    assert doc["host"] == "demo" and 4 <= doc["window_s"] <= 10
    keys = {"gpu", "current", "advice", "target", "price_delta_per_hour", "confidence", "reasons"}
    for gpu in doc["gpus"]:
        assert set(gpu) == keys and gpu["advice"] in ADVICE and gpu["confidence"] == "low"  # seconds: short
        assert gpu["reasons"] and all(isinstance(r, str) for r in gpu["reasons"])
    idle, saturated = doc["gpus"][1], doc["gpus"][2]
    # The idle A100 costs the demo's full-card price (2.45/h) for nothing.
    assert idle["advice"] in ("smaller", "stop") and idle["price_delta_per_hour"] < 0
    assert idle["advice"] != "stop" or idle["price_delta_per_hour"] == -2.45
    assert idle["reasons"][0].startswith("idle 100 % of")
    assert saturated["advice"] in ("keep", "larger") and saturated["price_delta_per_hour"] is not None
    assert saturated["reasons"][0].endswith("(sustained >= 80 %)")
    assert doc["gpus"][3]["current"] == "GRID A100-10C"  # the vGPU guest is named by its type


def test_advise_demo_human_readable_and_not_enough_data(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "demo", "--observe", "2"]) == 0  # the default minimum: 30 s of data
    out, err = capsys.readouterr()
    assert out.startswith("[SIMULATED GPU HOST] demo  advice over ")
    assert "GPU 1: not enough data yet" in out and "advice needs at least 30 s of data" in out
    assert "observing demo for 2 s" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--window", "soon"], "--window: cannot read 'soon'"),
    (["--observe", "0"], "--observe: must be more than 0"),
    (["--observe", "-1"], "--observe: must be more than 0"),  # "nan": the number parser's (test_hostile_input)
    (["--interval", "9"], "--interval: must be between 0.1 and 5 seconds"),
    (["--min-data", "-1"], "min_data_s: must be a number of seconds >= 0"),
])
def test_bad_arguments_are_one_line_before_connecting(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["advise", "demo", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpuws: error: {message}") and err.count("\n") == 1


def test_unknown_host_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "nosuchhost", "--observe", "1"]) == 2  # refused input (the exit-status table)
    err = capsys.readouterr().err
    assert err.startswith("gpuws: error: ") and "nosuchhost" in err and err.count("\n") == 1
