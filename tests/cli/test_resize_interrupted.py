"""A resize killed mid-apply (SIGKILL / SIGINT of a real `gpuws resize demo ... --yes` process) is
journaled, detected on the next connect and finished by `gpuws resize demo --recover`.

The moments are chosen from what the simulated host's state shows (journal written, N GPU
instances created), never from timings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core.paths import data_dir
from gpuws.core.resize.audit import AuditLog
from gpuws.core.resize.journal import ResizeJournal
from gpuws.sim.state import Fault, SimStateStore

# The timeout guards against a hung child on a loaded machine; it is not a timing assertion.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TARGET = "7x1g.10gb"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _sim_store() -> SimStateStore:
    return SimStateStore(data_dir() / "demo-host" / "sim")


def _gpu0_instances() -> int:
    path = data_dir() / "demo-host" / "sim" / "state.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):  # not written yet, or being replaced
        return -1
    gpu = doc["gpus"][0]
    return len(gpu.get("gpu_instances") or [])


def _kill_when(condition: Callable[[], bool], sig: int) -> subprocess.Popen[str]:
    """Start the real CLI resize and send `sig` once `condition` holds (polled on the state)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuws", "resize", "demo", TARGET, "--gpu", "0", "--yes", "--stop-processes"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ),
    )
    deadline = time.monotonic() + 120  # a safety net for a hung child, not an assertion
    while proc.poll() is None and time.monotonic() < deadline:
        if condition():
            proc.send_signal(sig)
            break
        time.sleep(0.02)
    proc.communicate(timeout=120)
    return proc


@pytest.mark.parametrize(
    ("moment", "sig"),
    [
        ("journal", signal.SIGKILL),  # right after the journal is written, before or at the first step
        ("2-instances", signal.SIGKILL),
        ("4-instances", signal.SIGKILL),  # the report: left at 4x1g.10gb
        ("5-instances", signal.SIGINT),  # Ctrl-C
    ],
)
def test_killed_resize_is_detected_and_recovered(
    moment: str, sig: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "slices", "demo", "--json")  # creates the demo host's state at "full"
    assert code == 0 and json.loads(out)["gpus"][0]["current"] == "full"
    assert json.loads(out)["interrupted_resize"] is None
    journal = ResizeJournal()
    conditions: dict[str, Callable[[], bool]] = {
        "journal": lambda: journal.read("demo") is not None,
        "2-instances": lambda: _gpu0_instances() >= 2,
        "4-instances": lambda: _gpu0_instances() >= 4,
        "5-instances": lambda: _gpu0_instances() >= 5,
    }
    proc = _kill_when(conditions[moment], sig)
    assert proc.returncode != 0, "the resize finished before it could be interrupted"
    half = _gpu0_instances()
    assert half < 7

    # The next connect says so: human and JSON output of `slices` and `probe`.
    code, out, _ = _run(capsys, "slices", "demo", "--json")
    interrupted = json.loads(out)["interrupted_resize"]
    assert code == 0 and interrupted["gpu"] == 0
    assert (interrupted["before"], interrupted["target"]) == ("full", TARGET)
    assert interrupted["recover"] == "gpuws resize demo --recover"
    code, out, _ = _run(capsys, "slices", "demo")
    assert "interrupted resize of GPU 0 (full -> 7x1g.10gb" in out and "--recover" in out
    code, out, _ = _run(capsys, "probe", "demo", "--json")
    assert code == 0 and json.loads(out)["interrupted_resize"]["target"] == TARGET
    code, out, _ = _run(capsys, "probe", "demo")
    assert "interrupted resize" in out

    # The audit log has the "started" record even though the run never finished.
    records = AuditLog().read("demo")
    assert [r.phase for r in records][-1] == "started" and records[-1].target == TARGET

    code, out, _ = _run(capsys, "resize", "demo", "--recover", "--yes", "--stop-processes", "--json")
    doc = json.loads(out)
    assert code == 0, doc
    assert doc["outcome"] == "target verified" and doc["after"] == TARGET and doc["before"] == "full"
    assert records[-1].started_at == doc["recovered"]["started_at"]
    code, out, _ = _run(capsys, "slices", "demo", "--json")
    after = json.loads(out)
    assert after["interrupted_resize"] is None and after["gpus"][0]["current"] == TARGET
    last = AuditLog().read("demo")[-1]
    assert last.phase == "finished" and last.ok and last.outcome == "recover: target verified"


def test_recover_restores_the_previous_layout_when_the_target_cannot_be_completed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _run(capsys, "slices", "demo", "--json")
    proc = _kill_when(lambda: _gpu0_instances() >= 3, signal.SIGKILL)
    assert proc.returncode != 0
    with _sim_store().update() as state:
        state.gpus[0].inject_fault(Fault.CREATE_GI_FAILS)  # completing the target now fails
    code, out, _ = _run(capsys, "resize", "demo", "--recover", "--yes", "--stop-processes", "--json")
    doc = json.loads(out)
    assert code == 9, doc  # the one table: 9 rolled back
    assert doc["outcome_kind"] == "rolled-back" and doc["after"] == "full"
    code, out, _ = _run(capsys, "slices", "demo", "--json")
    assert json.loads(out)["interrupted_resize"] is None and json.loads(out)["gpus"][0]["current"] == "full"


def test_recover_without_a_journal_and_refusals(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "resize", "demo", "--recover", "--json")
    assert code == 0 and json.loads(out)["outcome"] == "nothing to recover"
    code, _, err = _run(capsys, "resize", "demo", "full", "--recover")
    assert code == 2 and "--recover takes no TARGET" in err
    code, _, err = _run(capsys, "resize", "demo")
    assert code == 2 and "give a TARGET" in err


def test_journal_is_written_before_the_first_change_and_kept_only_until_the_record(tmp_path: Path) -> None:
    from gpuws.core.resize.audit import AuditRecord
    from gpuws.core.resize.journal import JournalEntry

    journal = ResizeJournal(tmp_path / "j", AuditLog(tmp_path / "audit.jsonl"))
    entry = JournalEntry(host="a/../b", gpu=1, gpu_name="NVIDIA H100 80GB HBM3", before="full", target="2x3g.40gb",
                         pid=2**22 + 12345)  # no such process: an interrupted run
    journal.begin(entry)
    assert journal.path_for("a/../b").parent == tmp_path / "j"  # a profile name is never a path
    assert journal.interrupted("a/../b") == entry
    assert journal.interrupted("other") is None
    live = JournalEntry(host="live", gpu=0, gpu_name="x", before="full", target="mig")  # this process
    journal.begin(live)
    assert journal.read("live") == live and journal.interrupted("live") is None
    journal.finish("a/../b", AuditRecord(host="a/../b", gpu=1, backend="mig", target="2x3g.40gb", before="full",
                                         after="full", outcome="rolled back", ok=False), keep=True)
    assert journal.read("a/../b") is not None  # a failed rollback keeps the journal
    journal.finish("a/../b", AuditRecord(host="a/../b", gpu=1, backend="mig", target="2x3g.40gb", before="full",
                                         after="2x3g.40gb", outcome="target verified", ok=True))
    assert journal.read("a/../b") is None
    phases = [r.phase for r in AuditLog(tmp_path / "audit.jsonl").read()]
    assert phases == ["started", "started", "finished", "finished"]
    (journal.path_for("torn")).write_text("{not json")
    torn = journal.interrupted("torn")
    assert torn is not None and torn.gpu == -1  # unreadable still means "did not finish"
