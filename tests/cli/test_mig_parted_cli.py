"""`gpuws mig-parted` on the demo host with NVIDIA's default config file (the issue's done-when)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpuws.cli.main import main
from gpuws.core.resize.audit import AuditLog
from gpuws.core.resize.journal import ResizeJournal

# The timeout is a guard against a hang on a loaded machine, not a timing assertion.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

DEFAULT_CONFIG = str(Path(__file__).resolve().parents[1] / "fixtures" / "mig-parted" / "config-default.yaml")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _current(capsys: pytest.CaptureFixture[str]) -> list[str]:
    code, out, _ = _run(capsys, "slices", "demo", "--json")
    assert code == 0
    return [g["current"] for g in json.loads(out)["gpus"]]


def _apply_and_assert(capsys: pytest.CaptureFixture[str], config: str, layout: str) -> None:
    code, out, _ = _run(capsys, "mig-parted", "apply", "demo", DEFAULT_CONFIG, "--config", config,
                        "--yes", "--stop-processes", "--json")
    doc = json.loads(out)
    assert code == 0, doc
    actions = [g["action"] for g in doc["gpus"]]
    assert actions == ["change", "change", "not-selected", "not-mig-capable"]  # device-filter by PCI id
    assert [g["pci_device_id"] for g in doc["gpus"][:2]] == ["0x233010DE", "0x20B210DE"]
    code, out, _ = _run(capsys, "mig-parted", "assert", "demo", DEFAULT_CONFIG, "--config", config)
    assert code == 0 and "matches" in out
    assert _current(capsys)[:2] == [layout, layout]


def test_all_1g_10gb_applies_and_asserts(capsys: pytest.CaptureFixture[str]) -> None:
    assert _current(capsys) == ["full", "full", "full", "full"]  # H100, A100 80GB, L40S, vGPU guest
    code, out, _ = _run(capsys, "mig-parted", "assert", "demo", DEFAULT_CONFIG, "--config", "all-1g.10gb")
    assert code == 1 and "does not match" in out and "GPU 0 (NVIDIA H100 80GB HBM3): has full" in out
    _apply_and_assert(capsys, "all-1g.10gb", "7x1g.10gb")
    assert ResizeJournal().read("demo") is None  # every journal closed by its record
    phases = [r.phase for r in AuditLog().read("demo")]
    assert phases == ["started", "finished", "started", "finished"]


def test_all_balanced_then_all_disabled_returns_every_gpu_to_the_full_card(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _apply_and_assert(capsys, "all-balanced", "3g.40gb,2g.20gb,2x1g.10gb")
    code, out, _ = _run(capsys, "mig-parted", "export", "demo", "--gpu", "1")
    exported = yaml.safe_load(out)
    assert exported == {"version": "v1", "mig-configs": {"current": [
        {"devices": [1], "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]}}
    code, out, _ = _run(capsys, "mig-parted", "apply", "demo", DEFAULT_CONFIG, "--config", "all-disabled",
                        "--yes", "--stop-processes")
    assert code == 0
    code, out, _ = _run(capsys, "mig-parted", "assert", "demo", DEFAULT_CONFIG, "--config", "all-disabled")
    assert code == 0
    assert _current(capsys) == ["full", "full", "full", "full"]


def test_plus_me_config_and_refusals(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _run(capsys, "mig-parted", "apply", "demo", DEFAULT_CONFIG, "--config", "all-1g.10gb.me",
                        "--dry-run", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["outcome_kind"] == "dry-run"
    assert doc["plans"]["0"]["steps"][-1]["argv"][-3:] == ["-cgi", "20", "-C"]  # +me is profile ID 20
    # all-1g.5gb selects every GPU, but the H100 has no 1g.5gb: refused before anything changes.
    code, _, err = _run(capsys, "mig-parted", "apply", "demo", DEFAULT_CONFIG, "--config", "all-1g.5gb", "--yes")
    assert code == 8 and "config 'all-1g.5gb' on GPU 0 (NVIDIA H100 80GB HBM3)" in err and "1g.5gb" in err
    code, _, err = _run(capsys, "mig-parted", "apply", "demo", DEFAULT_CONFIG, "--config", "no-such", "--yes")
    assert code == 2 and "has no config named 'no-such' (it has 81:" in err  # refused input (issue 28)
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: v2\n")
    code, _, err = _run(capsys, "mig-parted", "assert", "demo", str(bad), "--config", "x")
    assert code == 2 and "version: v1" in err and "Traceback" not in err
    code, _, err = _run(capsys, "mig-parted", "apply", "demo", DEFAULT_CONFIG, "--config", "all-1g.10gb")
    assert code == 2 and "pass --yes" in err  # not a terminal: no confirmation (refused input), nothing changed
    assert _current(capsys) == ["full", "full", "full", "full"]
