"""The Workspace's verbs `bench` and `stop_process` (#23, Deliver 1) on the demo host as a process of
its own: each is a thin verb over the one implementation (`gpuws.app.bench.run_benchmark`,
`gpuws.remote.processes.stop_process`), given a host name; both refuse a host that is not connected."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuws.app.bench import keep_run
from gpuws.app.workspace import Workspace
from gpuws.core.bench.results import ResultStore
from gpuws.core.models import HostProfile
from gpuws.core.processes import GpuProcess
from gpuws.remote.connection import NotConnected
from tests.app.test_host_life import PACE, Owner, _opened

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[Workspace, Owner, dict[str, Any]]]:
    with _opened(tmp_path, PACE) as opened:
        yield opened


def test_bench_runs_on_the_named_host_and_is_kept_as_from_either_front_end(
        host: tuple[Workspace, Owner, dict[str, Any]], tmp_path: Path) -> None:
    ws, owner, _state = host
    events: list[dict[str, Any]] = []
    run = owner.spawn(ws.bench("rig", "quick", on_event=events.append)).result(180)
    assert run.host == "rig" and run.mode == "quick" and run.results and events
    assert run.summary.get("simulated") is True  # the demo host, labelled as such
    kept = keep_run(run, ResultStore(tmp_path / "bench"))
    assert kept.saved_path is not None and kept.saved_path.exists()


def test_stop_process_stops_a_process_on_the_named_host(host: tuple[Workspace, Owner, dict[str, Any]]) -> None:
    ws, owner, _state = host
    victim = subprocess.Popen(["sleep", "120"])  # the demo host runs on this machine: its pid is visible there
    reaper = threading.Thread(target=victim.wait, daemon=True)  # reaped at once: no zombie left for ps to see
    reaper.start()
    try:
        gone = owner.spawn(ws.stop_process("rig", GpuProcess(victim.pid, "0", "sleep", 512))).result(30)
        reaper.join(10)
        assert gone is True and victim.returncode == -15  # SIGTERM
    finally:
        victim.kill()
        victim.wait()


def test_the_verbs_refuse_a_host_that_is_not_connected() -> None:
    ws = Workspace(lambda coro: pytest.fail("nothing runs"))  # type: ignore[arg-type, return-value]
    ws.add_host(HostProfile(name="lab", host="h"))
    with pytest.raises(NotConnected, match="lab is not connected"):
        ws.bench("lab")
    with pytest.raises(NotConnected, match="lab is not connected"):
        ws.stop_process("lab", GpuProcess(1, "0", "python", 1))
    with pytest.raises(KeyError):
        ws.bench("unknown")


def test_resize_on_the_named_host_saves_the_profile_and_every_view_hears_the_new_layout(
        host: tuple[Workspace, Owner, dict[str, Any]]) -> None:
    from gpuws.app.resize import plan_mig
    from gpuws.app.workspace import Change
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.resize.audit import AuditLog

    ws, owner, _state = host
    record = ws.host("rig")
    assert record is not None
    ProfileStore().add(record.profile)  # the after-verify step saves the profile's new slice
    heard: list[tuple[Change, str]] = []
    ws.subscribe(lambda change, name: heard.append((change, name)))
    before = record.inventory
    _state_now, _model, plan = owner.spawn(plan_mig(ws.runner("rig"), 1, "7x1g.10gb")).result(60)
    applied = owner.spawn(ws.resize("rig", plan, stop_processes=True, audit=AuditLog())).result(180)
    assert applied.result.after is not None and applied.result.after.describe() == "7x1g.10gb"
    owner.wait_until(lambda: (Change.PRICE, "rig") in heard and record.inventory is not before)
    saved = ProfileStore().get("rig")
    assert saved.slice_profile is not None and "7x1g.10gb" in saved.slice_profile
    assert ws.host("rig").profile.slice_profile == saved.slice_profile  # type: ignore[union-attr]
