"""What a session costs: price segments, daily/monthly totals, budgets, and session history.

A session is a run of time on one host; its price can change mid-session (a resize to another
slice), so a session is a list of `PriceSegment`s. Totals split segments at local-day and
local-month boundaries, so a session running over midnight counts in both days.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path

from gpuws.core.money import currency_of, money
from gpuws.core.paths import data_dir

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class PriceSegment:
    """`price_per_hour` applied from `start` until `end` (unix seconds; end None = still running)."""

    start: float
    end: float | None
    price_per_hour: float
    slice_profile: str | None = None

    def cost(self, now: float) -> float:
        end = self.end if self.end is not None else now
        return max(0.0, end - self.start) / SECONDS_PER_HOUR * self.price_per_hour


@dataclass
class CostSession:
    """One session on one host: when it ran, on which slices, at which prices."""

    host: str
    segments: list[PriceSegment] = field(default_factory=list)

    @property
    def start(self) -> float | None:
        return self.segments[0].start if self.segments else None

    @property
    def end(self) -> float | None:
        return self.segments[-1].end if self.segments else None

    @property
    def running(self) -> bool:
        return bool(self.segments) and self.segments[-1].end is None

    def open(self, t: float, price_per_hour: float, slice_profile: str | None = None) -> None:
        """Start the session (or start a new price segment after a slice change)."""
        if self.running:
            self.close(t)
        self.segments.append(PriceSegment(t, None, price_per_hour, slice_profile))

    def change_price(self, t: float, price_per_hour: float, slice_profile: str | None = None) -> None:
        """The host was resized: the old price applies until `t`, the new one after."""
        self.open(t, price_per_hour, slice_profile)

    def close(self, t: float) -> None:
        if self.running:
            last = self.segments[-1]
            self.segments[-1] = PriceSegment(last.start, max(t, last.start), last.price_per_hour, last.slice_profile)

    def cost(self, now: float) -> float:
        return sum(s.cost(now) for s in self.segments)


def _day_start(t: float, tz: tzinfo | None) -> datetime:
    d = datetime.fromtimestamp(t, tz).date()
    return datetime(d.year, d.month, d.day, tzinfo=tz) if tz else datetime(d.year, d.month, d.day)


def split_by_day(segment: PriceSegment, now: float, tz: tzinfo | None = None) -> dict[date, float]:
    """The segment's cost per local calendar day (`tz` None = this machine's local time)."""
    out: dict[date, float] = defaultdict(float)
    t = segment.start
    end = segment.end if segment.end is not None else now
    while t < end:
        next_day = (_day_start(t, tz) + timedelta(days=1)).timestamp()
        piece_end = min(end, next_day)
        out[datetime.fromtimestamp(t, tz).date()] += (piece_end - t) / SECONDS_PER_HOUR * segment.price_per_hour
        t = piece_end
    return dict(out)


def daily_totals(sessions: Iterable[CostSession], now: float, tz: tzinfo | None = None) -> dict[date, float]:
    totals: dict[date, float] = defaultdict(float)
    for session in sessions:
        for segment in session.segments:
            for day, amount in split_by_day(segment, now, tz).items():
                totals[day] += amount
    return dict(sorted(totals.items()))


def monthly_totals(
    sessions: Iterable[CostSession], now: float, tz: tzinfo | None = None
) -> dict[tuple[int, int], float]:
    totals: dict[tuple[int, int], float] = defaultdict(float)
    for day, amount in daily_totals(sessions, now, tz).items():
        totals[(day.year, day.month)] += amount
    return dict(sorted(totals.items()))


@dataclass(frozen=True)
class BudgetStatus:
    """Where a host stands against its budget."""

    spent: float
    budget: float | None
    warn_fraction: float = 0.8
    currency: str = ""  # "" : the locale's
    period: str = ""  # "daily", "monthly" or "" (unnamed)

    @property
    def level(self) -> str:
        """ "none" (no budget), "ok", "warning" (past warn_fraction) or "exceeded"."""
        if self.budget is None:
            return "none"
        if self.spent >= self.budget:
            return "exceeded"
        if self.spent >= self.warn_fraction * self.budget:
            return "warning"
        return "ok"

    @property
    def fraction(self) -> float | None:
        """Spent / budget (None without a budget)."""
        if self.budget is None:
            return None
        return self.spent / self.budget if self.budget else 1.0

    @property
    def message(self) -> str:
        currency = currency_of(self.currency or None)
        spent = money(self.spent, currency)
        if self.budget is None:
            return f"spent {spent}, no budget set"
        pct = 100.0 * (self.fraction or 0.0)
        what = f"{self.period} budget" if self.period else "budget"
        return f"spent {spent} of {money(self.budget, currency)} {what} ({pct:.0f}%)"


def budget_status(spent: float, budget: float | None, warn_fraction: float = 0.8, *, currency: str = "",
                  period: str = "") -> BudgetStatus:
    return BudgetStatus(spent, budget, warn_fraction, currency, period)


def hours_to_budget(spent: float, budget: float, price_per_hour: float) -> float | None:
    """Hours left at the current price before the budget is reached (None if free)."""
    if price_per_hour <= 0:
        return None
    return max(0.0, budget - spent) / price_per_hour


class SessionHistory:
    """Session history as JSON lines in the data dir (append-only, one session per line)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or data_dir() / "sessions.jsonl"

    def append(self, session: CostSession) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"host": session.host, "segments": [asdict(s) for s in session.segments]})
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    def load(self) -> list[CostSession]:
        """All recorded sessions; a damaged line is skipped, never fatal."""
        if not self.path.exists():
            return []
        sessions = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                raw = json.loads(line)
                segments = [PriceSegment(**s) for s in raw["segments"]]
                sessions.append(CostSession(str(raw["host"]), segments))
            except (ValueError, KeyError, TypeError):
                continue
        return sessions


def sessions_csv(sessions: Sequence[CostSession], now: float, tz: tzinfo | None = None) -> str:
    """Session history as CSV: one row per price segment (start, stop, profile, cost)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["host", "start", "stop", "slice_profile", "price_per_hour", "cost"])
    for session in sessions:
        for s in session.segments:
            writer.writerow(
                [
                    session.host,
                    datetime.fromtimestamp(s.start, tz).isoformat(timespec="seconds"),
                    datetime.fromtimestamp(s.end, tz).isoformat(timespec="seconds") if s.end is not None else "",
                    s.slice_profile or "",
                    f"{s.price_per_hour:.4f}",
                    f"{s.cost(now):.4f}",
                ]
            )
    return buf.getvalue()
