"""Cost arithmetic across slice changes, day and month boundaries, budgets and history."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from gpuws.core.cost import (
    CostSession,
    PriceSegment,
    SessionHistory,
    budget_status,
    daily_totals,
    hours_to_budget,
    monthly_totals,
    sessions_csv,
    split_by_day,
)


def ts(*args: int, tz: timezone = UTC) -> float:
    return datetime(*args, tzinfo=tz).timestamp()


def test_slice_change_mid_session_charges_each_price_for_its_own_time() -> None:
    s = CostSession("h100")
    s.open(ts(2026, 3, 1, 10), 4.0, "full")
    s.change_price(ts(2026, 3, 1, 12), 0.5, "1g.10gb")  # 2 h at 4.0
    s.close(ts(2026, 3, 1, 13, 30))  # 1.5 h at 0.5
    assert s.cost(now=ts(2026, 3, 2)) == pytest.approx(8.0 + 0.75)
    assert [seg.slice_profile for seg in s.segments] == ["full", "1g.10gb"]
    assert not s.running


def test_running_session_cost_climbs_with_now() -> None:
    s = CostSession("a")
    s.open(ts(2026, 3, 1, 10), 3.0)
    assert s.cost(ts(2026, 3, 1, 11)) == pytest.approx(3.0)
    assert s.cost(ts(2026, 3, 1, 12)) == pytest.approx(6.0)


def test_session_over_midnight_is_split_between_days() -> None:
    seg = PriceSegment(ts(2026, 3, 1, 22), ts(2026, 3, 2, 3), 2.0)
    days = split_by_day(seg, now=0, tz=UTC)
    assert days == {date(2026, 3, 1): pytest.approx(4.0), date(2026, 3, 2): pytest.approx(6.0)}


def test_day_boundary_follows_the_given_timezone() -> None:
    tz = timezone(timedelta(hours=9))
    seg = PriceSegment(ts(2026, 3, 1, 14), ts(2026, 3, 1, 16), 1.0)  # 23:00-01:00 in UTC+9
    assert split_by_day(seg, now=0, tz=tz) == {
        date(2026, 3, 1): pytest.approx(1.0),
        date(2026, 3, 2): pytest.approx(1.0),
    }


def test_monthly_totals_split_at_month_end() -> None:
    s = CostSession("x", [PriceSegment(ts(2026, 1, 31, 12), ts(2026, 2, 1, 12), 1.0)])
    assert monthly_totals([s], now=0, tz=UTC) == {(2026, 1): pytest.approx(12.0), (2026, 2): pytest.approx(12.0)}
    assert sum(daily_totals([s], now=0, tz=UTC).values()) == pytest.approx(24.0)


@pytest.mark.parametrize(
    ("spent", "budget", "level"),
    [(10, None, "none"), (10, 100, "ok"), (80, 100, "warning"), (100, 100, "exceeded"), (150, 100, "exceeded")],
)
def test_budget_levels(spent: float, budget: float | None, level: str) -> None:
    assert budget_status(spent, budget).level == level


def test_hours_to_budget() -> None:
    assert hours_to_budget(60, 100, 4.0) == pytest.approx(10.0)
    assert hours_to_budget(120, 100, 4.0) == 0.0
    assert hours_to_budget(0, 100, 0.0) is None


def test_history_round_trip_and_csv(tmp_path: Path) -> None:
    hist = SessionHistory(tmp_path / "s.jsonl")
    s = CostSession("h1")
    s.open(ts(2026, 3, 1, 10), 2.0, "full")
    s.close(ts(2026, 3, 1, 11))
    hist.append(s)
    with hist.path.open("a") as f:
        f.write("{not json\n")  # a damaged line is skipped, the rest survives
    loaded = hist.load()
    assert len(loaded) == 1 and loaded[0].cost(0) == pytest.approx(2.0)
    text = sessions_csv(loaded, now=0, tz=UTC)
    assert text.splitlines()[0] == "host,start,stop,slice_profile,price_per_hour,cost"
    assert "h1,2026-03-01T10:00:00+00:00,2026-03-01T11:00:00+00:00,full,2.0000,2.0000" in text
