"""Session glue: open sessions on disk, cost reports and budget warnings, idle from real telemetry."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuws.core.cost import sessions_csv
from gpuws.core.idle import IdleDetector
from gpuws.core.models import HostProfile
from gpuws.core.nvsmi.query_csv import parse_query_csv
from gpuws.core.session import SessionLedger, budget_warning, cost_report, gpu_activity, host_cost
from gpuws.core.telemetry.smi_query import sample_from_query_row
from tests.core.nvsmi_fixtures import H100, capture_section

UTC = UTC
T0 = datetime(2025, 3, 31, 22, 0, tzinfo=UTC).timestamp()  # 22:00 on the last day of March
H = 3600.0


def profile(name: str = "gpu1", price: float = 4.0, **changes: object) -> HostProfile:
    return HostProfile(name=name, host="gpu1.example", price_per_hour=price, **changes)  # type: ignore[arg-type]


def test_ledger_keeps_open_sessions_on_disk_and_moves_them_to_history(tmp_path: Path) -> None:
    ledger = SessionLedger(tmp_path / "open.json")
    p = profile(slice_profile="full")
    ledger.begin(p, T0)
    ledger.begin(p, T0 + 100)  # already open: kept, not restarted
    other_view = SessionLedger(tmp_path / "open.json")  # e.g. `gpuws cost` while the GUI runs
    assert other_view.running()["gpu1"].start == T0
    resized = profile(price=1.0, slice_profile="1g.10gb")
    ledger.reprice(resized, T0 + H)
    ledger.reprice(resized, T0 + 1.5 * H)  # same price: no new segment
    assert [s.price_per_hour for s in other_view.running()["gpu1"].segments] == [4.0, 1.0]
    done = ledger.end("gpu1", T0 + 3 * H)
    assert done is not None and done.cost(T0 + 10 * H) == pytest.approx(4.0 + 2 * 1.0)
    assert ledger.running() == {}
    assert [s.host for s in ledger.history.load()] == ["gpu1"]
    assert ledger.end("gpu1", T0) is None
    rows = list(csv.reader(io.StringIO(sessions_csv(ledger.all_sessions(), T0 + 10 * H, UTC))))
    assert [r[3] for r in rows[1:]] == ["full", "1g.10gb"]


def test_damaged_open_file_reads_as_nothing_open(tmp_path: Path) -> None:
    path = tmp_path / "open.json"
    path.write_text("{broken")
    assert SessionLedger(path).running() == {}


def test_cost_across_midnight_and_month_end_with_budget(tmp_path: Path) -> None:
    ledger = SessionLedger(tmp_path / "open.json")
    p = profile(budget=20.0)
    ledger.begin(p, T0)  # runs from 22:00 on 31 March over midnight into April
    now = T0 + 5 * H  # 03:00 on 1 April
    cost = host_cost(p, ledger.all_sessions(), now, tz=UTC)
    assert cost.running == pytest.approx(20.0)
    assert cost.daily == pytest.approx(12.0)  # 00:00-03:00 today
    assert cost.monthly == pytest.approx(12.0)  # April only: the budget is per calendar month
    assert cost.budget.level == "ok"
    assert cost.hours_left == pytest.approx(2.0)
    later = host_cost(p, ledger.all_sessions(), now + 1.5 * H, tz=UTC)
    assert later.budget.level == "warning"
    warning = budget_warning(later)
    assert warning is not None and "nearing its budget" in warning and "0.5 h left" in warning
    over = host_cost(p, ledger.all_sessions(), now + 3 * H, tz=UTC)
    assert over.budget.level == "exceeded" and "budget exceeded" in (budget_warning(over) or "")
    doc = over.to_dict()
    assert set(doc) >= {"running", "daily", "monthly", "budget"}
    assert doc["budget"]["limit"] == 20.0 and doc["budget"]["level"] == "exceeded"


def test_report_covers_hosts_without_sessions(tmp_path: Path) -> None:
    report = cost_report([profile("a"), profile("b", price=0.0)], [], T0, tz=UTC)
    assert [(c.host, c.running, c.daily, c.budget.level) for c in report] == [
        ("a", None, 0.0, "none"), ("b", None, 0.0, "none")]
    assert budget_warning(report[0]) is None


def recorded(section: str, t: float) -> list[object]:
    rows = parse_query_csv(capture_section(H100, section))
    samples = [sample_from_query_row(row, t=t) for row in rows]
    assert samples and all(s is not None for s in samples)
    return samples  # type: ignore[return-value]


def test_idle_warning_from_a_real_h100_capture() -> None:
    """The idle capture counts as idle and the gpu-burn capture does not, with money spent idle."""
    det = IdleDetector("h100", minutes=15, price_per_hour=4.0)
    events = []
    # 10 minutes of load, then the load stops: idle samples every minute for 20 minutes.
    timeline = [(T0 + m * 60, "load :: query-gpu") for m in range(10)]
    timeline += [(T0 + m * 60, "idle :: query-gpu") for m in range(10, 31)]
    for t, section in timeline:
        gpus = [gpu_activity(s) for s in recorded(section, t)]
        if event := det.update(t, gpus, in_use=False):
            events.append(event)
    assert len(events) == 1
    event = events[0]
    assert event.idle_since == T0 + 10 * 60 and event.at == T0 + 25 * 60
    assert event.money_spent_idle == pytest.approx(1.0)  # 15 min at 4/h
    assert "15 min" in event.message and "1.00 spent idle" in event.message


def test_tunnel_in_use_keeps_an_idle_gpu_from_firing() -> None:
    det = IdleDetector("h100", minutes=5)
    idle = [gpu_activity(s) for s in recorded("idle :: query-gpu", T0)]
    fired = [det.update(T0 + m * 60, idle, in_use=True) for m in range(20)]
    assert fired == [None] * 20
    assert det.update(T0 + timedelta(minutes=30).total_seconds(), idle, in_use=False) is None  # clock restarts
