"""The Workspace keeps the cost ledger and the idle policy: a session begins when a host is
connected and ends when it is not (or at exit), written off the caller's thread and in order; a
resize's new price is one new price segment; an idle host is stopped through its provider's
command. Qt-free."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuws.app.costs import IdleSettings
from gpuws.app.workspace import Change, Workspace
from gpuws.core.models import HostProfile, ProviderInfo
from gpuws.core.session import SessionLedger
from gpuws.core.telemetry.sample import SampleBatch
from gpuws.remote.connection import ConnectionState
from gpuws.remote.loop import LoopThread
from tests.ui.telemetry_samples import h100_sample


class RecordingLedger(SessionLedger):
    """The real ledger on disk, noting which thread did each write and every reprice."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.writes: list[tuple[str, str]] = []  # (what, thread name)

    def begin(self, profile: HostProfile, t: float) -> Any:
        self.writes.append(("begin", threading.current_thread().name))
        return super().begin(profile, t)

    def reprice(self, profile: HostProfile, t: float) -> None:
        self.writes.append(("reprice", threading.current_thread().name))
        super().reprice(profile, t)

    def end(self, host: str, t: float) -> Any:
        self.writes.append(("end", threading.current_thread().name))
        return super().end(host, t)


@pytest.fixture
def loop() -> Iterator[LoopThread]:
    thread = LoopThread("test-loop")
    thread.start()
    yield thread
    thread.stop()


def _never_spawn(coro: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
    coro.close()
    return concurrent.futures.Future()


def test_cost_session_follows_the_connection_state_off_the_callers_thread(tmp_path: Path) -> None:
    ledger = RecordingLedger(tmp_path / "open.json")
    ws = Workspace(_never_spawn, ledger=ledger)
    heard: list[tuple[Change, str]] = []
    ws.subscribe(lambda change, host: heard.append((change, host)))
    profile = HostProfile(name="h100", host="10.0.0.9", price_per_hour=4.0)
    ws.add_host(profile)
    for state in (ConnectionState.CONNECTING, ConnectionState.CONNECTED, ConnectionState.RECONNECTING,
                  ConnectionState.CONNECTED):
        ws.state_changed("h100", state)
    assert ws.costs.flush(10)
    assert "h100" in ledger.running() and ws.host("h100").metering  # type: ignore[union-attr]
    assert len(ledger.running()["h100"].segments) == 1  # a drop does not end (nor restart) the session
    ws.state_changed("h100", ConnectionState.UNREACHABLE)
    ws.state_changed("h100", ConnectionState.CONNECTED)
    ws.state_changed("h100", ConnectionState.DISCONNECTED)
    assert ws.costs.flush(10)
    assert ledger.running() == {} and len(ledger.history.load()) == 2
    assert [w for w, _ in ledger.writes] == ["begin", "reprice", "end", "begin", "reprice", "end"]
    assert {thread for _, thread in ledger.writes} != {threading.current_thread().name}
    assert all(thread.startswith("gpuws-ledger") for _, thread in ledger.writes)
    assert heard.count((Change.COST, "h100")) == 4  # one per write, for the views to read again


def test_a_resize_reprices_once_and_exit_ends_open_sessions(tmp_path: Path) -> None:
    ledger = RecordingLedger(tmp_path / "open.json")
    ws = Workspace(_never_spawn, ledger=ledger)
    full = HostProfile(name="a100", host="10.0.0.7", price_per_hour=4.0, slice_profile="full")
    ws.add_host(full)
    ws.state_changed("a100", ConnectionState.CONNECTED)
    assert ws.costs.flush(10)
    ledger.writes.clear()
    # The window's Resize tab changes the shown profile in place, then reports the new price.
    full.price_per_hour, full.slice_profile = 0.6, "7x1g.10gb"
    ws.price_changed(full)
    ws.add_host(replace(full))  # the saved profile read back (the window reloads its profiles)
    ws.state_changed("a100", ConnectionState.CONNECTED)  # the re-probe reports the state again
    assert ws.costs.flush(10)
    assert [w for w, _ in ledger.writes] == ["reprice"]
    segments = ledger.running()["a100"].segments
    assert [(s.price_per_hour, s.slice_profile) for s in segments] == [(4.0, "full"), (0.6, "7x1g.10gb")]

    ws.close(timeout=10)  # quitting gpuws: no billing while it is closed
    assert ledger.running() == {} and ledger.history.load()[-1].segments[-1].end is not None


def test_a_failing_ledger_write_is_reported_and_the_next_writes_still_happen(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    ws = Workspace(_never_spawn, ledger=SessionLedger(blocker / "open.json"))
    ws.add_host(HostProfile(name="h", host="10.0.0.2", price_per_hour=2.0))
    ws.state_changed("h", ConnectionState.CONNECTED)
    assert ws.costs.flush(10)
    assert ws.host("h").cost_error  # type: ignore[union-attr]


def _idle_host(ws: Workspace, name: str, now: float) -> None:
    store = ws.telemetry.store
    store.set_rate(name, 1.0)
    for t in (now - 2, now - 1, now):
        store.ingest(name, SampleBatch(t, [h100_sample(t, 0, busy=False)], "nvml", simulated=True))


def test_idle_policy_warns_and_stops_the_instance_through_its_provider(tmp_path: Path, loop: LoopThread) -> None:
    stopped = tmp_path / "stopped"
    provider = ProviderInfo(kind="custom", instance_id="i-1", commands={"stop": ["touch", str(stopped)]})
    ws = Workspace(loop.submit, ledger=SessionLedger(tmp_path / "open.json"))
    heard: list[tuple[Change, str]] = []
    ws.subscribe(lambda change, host: heard.append((change, host)))
    watched = HostProfile(name="bg", host="10.0.0.4", price_per_hour=3.0, provider=provider)
    warned_only = HostProfile(name="other", host="10.0.0.5", price_per_hour=3.0, provider=provider)
    for profile in (watched, warned_only):
        ws.add_host(profile)
        ws.state_changed(profile.name, ConnectionState.CONNECTED)
    ws.idle.configure("bg", IdleSettings(stop=True, minutes=1))
    ws.idle.configure("other", IdleSettings(stop=False, minutes=1))

    now = time.time()
    _idle_host(ws, "bg", now)
    _idle_host(ws, "other", now)
    assert ws.check_idle(now) == []  # idle, but not for a minute yet
    later = now + 61
    _idle_host(ws, "bg", later)
    _idle_host(ws, "other", later)
    events = ws.check_idle(later)
    assert sorted(e.host for e in events) == ["bg", "other"]
    assert "bg" in ws.idle.warnings and (Change.IDLE, "bg") in heard
    deadline = time.monotonic() + 20
    while ws.host("bg").power_status != "bg: stop done" and time.monotonic() < deadline:  # type: ignore[union-attr]
        time.sleep(0.05)  # waiting on the condition, bounded only to fail instead of hanging
    assert ws.host("bg").power_status == "bg: stop done" and stopped.exists()  # type: ignore[union-attr]
    assert ws.host("other").power_status == ""  # type: ignore[union-attr]  # warned, not stopped
    assert ws.check_idle(later + 10) == []  # once per idle stretch
    ws.close(timeout=10)


def test_stale_telemetry_never_counts_as_idle_and_a_budget_stop_without_provider_says_so(tmp_path: Path) -> None:
    ledger = SessionLedger(tmp_path / "open.json")
    profile = HostProfile(name="h", host="10.0.0.2", price_per_hour=36.0, budget=1.0, budget_stop=True)
    now = time.time()
    ledger.begin(profile, now - 600)  # ten minutes at 36/h: past the 1.00 budget (kept on connect)
    ws = Workspace(_never_spawn, ledger=ledger)
    ws.add_host(profile)
    (cost,) = ws.cost_report([profile], now).values()
    assert not ws.enforce_budget(cost)  # not connected: gpuws does not stop what it does not meter
    ws.state_changed("h", ConnectionState.CONNECTED)
    ws.idle.configure("h", IdleSettings(stop=True, minutes=1))
    _idle_host(ws, "h", now - 120)  # a stream that stopped two minutes ago
    assert ws.check_idle(now) == [] and not ws.idle.idle("h")

    assert ws.costs.flush(10)
    (cost,) = ws.cost_report([profile], now).values()
    assert ws.enforce_budget(cost) and "no provider command" in ws.host("h").power_status  # type: ignore[union-attr]
    assert not ws.enforce_budget(cost)  # once: the user may start it again on purpose
    ws.budget_changed("h")
    assert ws.enforce_budget(cost)
    ws.close(timeout=10)
