"""Every path that changes a GPU layout ends in the one after-verify step (gpuws.app.resize):
`gpuws mig-parted apply` records the slice and price in the profile exactly as `gpuws resize`
does, and `resize --recover` after a killed `mig-parted apply` finishes the whole apply (issues
23 and 28). Against a real sshd with the simulated nvidia-smi, and real CLI processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.paths import data_dir, known_hosts_path
from gpuws.core.profiles import ProfileStore
from gpuws.core.resize.audit import AuditLog
from gpuws.core.resize.journal import ResizeJournal
from gpuws.sim.state import Fault, SimStateStore
from tests.support.sshd import SshdServer

# The timeout guards against a hung child on a loaded machine; it is not a timing assertion.
pytestmark = [pytest.mark.sshd, pytest.mark.slow, pytest.mark.timeout(600)]

CONFIG = str(Path(__file__).resolve().parents[1] / "fixtures" / "mig-parted" / "config-default.yaml")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err or out
    doc = json.loads(out)
    assert isinstance(doc, dict)
    return doc


def _host(sshd: SshdServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *names: str) -> SimStateStore:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store = SimStateStore(Path(sshd.env["GPUWS_SIM_STATE"]))
    with store.update() as state:
        for gpu in state.gpus:
            gpu.set_load(0.0)
    known_hosts_path().write_text(sshd.known_hosts_line())
    for name in names:
        ProfileStore().add(HostProfile(name=name, host="127.0.0.1", port=sshd.port, user=sshd.user,
                                       auth=AuthMethod.KEY, key_path=str(sshd.client_key), price_per_hour=8.0))
    return store


def test_mig_parted_apply_updates_the_profile_exactly_as_resize(
    sshd: SshdServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _host(sshd, tmp_path, monkeypatch, "by-file", "by-resize")
    doc = _json(capsys, "mig-parted", "apply", "by-file", CONFIG, "-c", "all-1g.10gb", "--yes", "--stop-processes")
    assert doc["outcome_kind"] == "verified"
    by_file = _json(capsys, "hosts", "show", "by-file")
    assert by_file["slice_profile"] == "gpu0=7x1g.10gb;gpu1=7x1g.10gb"
    assert doc["remaining"] == []  # nothing left undone
    # Two finished records, each with its journal closed, as for two `gpuws resize` runs.
    assert [r.phase for r in AuditLog().read("by-file")] == ["started", "finished", "started", "finished"]
    assert ResizeJournal().read("by-file") is None

    # Back to the full cards, then the same layouts through `gpuws resize`, GPU by GPU.
    _json(capsys, "mig-parted", "apply", "by-resize", CONFIG, "-c", "all-disabled", "--yes", "--stop-processes")
    for gpu in ("0", "1"):
        doc = _json(capsys, "resize", "by-resize", "7x1g.10gb", "--gpu", gpu, "--yes", "--stop-processes")
        assert doc["outcome"] == "target verified"
    by_resize = _json(capsys, "hosts", "show", "by-resize")
    assert by_resize["slice_profile"] == by_file["slice_profile"]
    assert by_resize["price_per_hour"] == by_file["price_per_hour"]
    assert by_resize["slice_prices"] == by_file["slice_prices"]


def _instances(gpu: int) -> int:
    path = data_dir() / "demo-host" / "sim" / "state.json"
    try:
        return len(json.loads(path.read_text())["gpus"][gpu].get("gpu_instances") or [])
    except (OSError, ValueError):  # not written yet, or being replaced
        return -1


def _kill_apply_midway(capsys: pytest.CaptureFixture[str]) -> None:
    """Run a real `gpuws mig-parted apply` and SIGKILL it once GPU 0 is half-resized."""
    code, _out, _ = _run(capsys, "slices", "demo", "--json")  # creates the demo host's state at "full"
    assert code == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuws", "mig-parted", "apply", "demo", CONFIG, "-c", "all-1g.10gb", "--yes",
         "--stop-processes"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    deadline = time.monotonic() + 120  # a safety net for a hung child, not an assertion
    while proc.poll() is None and time.monotonic() < deadline:
        if _instances(0) >= 3:  # GPU 0 half-resized, GPU 1 not started
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.communicate(timeout=120)
    assert proc.returncode != 0, "the apply finished before it could be interrupted"


def test_recover_after_a_killed_mig_parted_apply_finishes_every_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    _kill_apply_midway(capsys)
    interrupted = json.loads(_run(capsys, "slices", "demo", "--json")[1])["interrupted_resize"]
    assert interrupted["gpu"] == 0 and interrupted["pending"] == [{"gpu": 1, "target": "7x1g.10gb"}]
    assert "(and GPU 1 after it) did not finish" in interrupted["message"]
    doc = _json(capsys, "resize", "demo", "--recover", "--yes", "--stop-processes")
    assert doc["outcome_kind"] == "verified" and doc["remaining"] == []
    assert [g["gpu"] for g in doc["gpus"]] == [0, 1]  # type: ignore[index]
    code, out, _ = _run(capsys, "mig-parted", "assert", "demo", CONFIG, "-c", "all-1g.10gb")
    assert code == 0 and "matches" in out  # GPU 1 is on the config too
    assert ResizeJournal().read("demo") is None


def test_recover_that_fails_says_which_gpus_are_left(capsys: pytest.CaptureFixture[str]) -> None:
    _kill_apply_midway(capsys)
    with SimStateStore(data_dir() / "demo-host" / "sim").update() as state:
        state.gpus[0].inject_fault(Fault.CREATE_GI_FAILS)  # completing GPU 0 now fails: it is restored
    code, out, _ = _run(capsys, "resize", "demo", "--recover", "--yes", "--stop-processes", "--json")
    doc = json.loads(out)
    assert code == 9 and doc["outcome_kind"] == "rolled-back" and doc["after"] == "full"
    assert doc["remaining"] == [{"gpu": 1, "gpu_name": "NVIDIA A100-SXM4-80GB", "target": "7x1g.10gb"}]
    code, out, _ = _run(capsys, "mig-parted", "assert", "demo", CONFIG, "-c", "all-1g.10gb")
    assert code == 1  # nothing was left half-done, and nothing claims the config holds


def test_a_resize_with_nothing_to_do_is_audited_by_the_one_service(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "resize", "demo", "full", "--gpu", "1", "--yes", "--json")
    assert code == 0 and json.loads(out)["outcome"] == "already at target"
    last = AuditLog().read("demo")[-1]
    assert (last.gpu, last.target, last.before, last.after, last.outcome, last.ok) == (
        1, "full", "full", "full", "already at target", True)
    assert ResizeJournal().read("demo") is None
