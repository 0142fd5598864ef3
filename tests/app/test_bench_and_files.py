"""The benchmark and file-copy services both front ends call: a run is kept (and a check
reported) one way; a copy's direction is read from its NAME:PATH side one way. Qt-free; the
transfers and runs themselves are tested against a real sshd in tests/remote and tests/cli."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.app.bench import keep_run
from gpuws.app.files import CopyPlan, plan_copy, split_remote
from gpuws.core.bench.results import BenchRun, ResultStore
from gpuws.core.errors import RefusedInput


def _run(mode: str) -> BenchRun:
    return BenchRun(host="rig", mode=mode, started_at="2026-12-03T13:00:00.000000+00:00",
                    summary={"harness": "simulated", "simulated": True})


def test_a_check_is_saved_and_its_report_written_next_to_it(tmp_path: Path) -> None:
    kept = keep_run(_run("check"), ResultStore(tmp_path / "bench"))
    assert kept.saved_path is not None and kept.saved_path.exists()
    assert kept.report_paths is not None
    md, js = kept.report_paths
    assert md.parent == kept.saved_path.parent and md.exists() and js.exists()
    quick = keep_run(_run("quick"), ResultStore(tmp_path / "bench"))
    assert quick.saved_path is not None and quick.report_paths is None  # only a check has a report


def test_unsaved_check_reports_where_asked_and_a_failed_save_writes_no_report(tmp_path: Path) -> None:
    kept = keep_run(_run("check"), ResultStore(tmp_path / "bench"), save=False, report_dir=tmp_path / "out")
    assert kept.saved_path is None and kept.report_paths is not None
    assert kept.report_paths[0].parent == tmp_path / "out" and not (tmp_path / "bench").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    failed = keep_run(_run("check"), ResultStore(blocker))  # its root is a file: the save fails
    assert isinstance(failed.save_error, OSError) and failed.report_paths is None


def test_copy_direction_comes_from_the_host_side() -> None:
    assert plan_copy("./model.pt", "rig:/data/") == CopyPlan("rig", ("./model.pt",), "/data/", to_host=True)
    assert plan_copy("rig:", "/tmp/x") == CopyPlan("rig", ("~",), "/tmp/x", to_host=False)
    assert plan_copy("rig:a", "rig:b/*.pt", ".") == CopyPlan("rig", ("a", "b/*.pt"), ".", to_host=False)
    for args in (("a.txt", "b.txt"), ("rig:a", "lab:b"), ("rig:a", "lab:b", "."), ("rig:a", "b", "c")):
        with pytest.raises(RefusedInput, match="exactly one side"):
            plan_copy(*args)
    assert split_remote("/tmp/a:b") == (None, "/tmp/a:b")
