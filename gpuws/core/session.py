"""Session bookkeeping around `gpuws.core.cost`: open sessions on disk, cost reports, idle inputs.

The window opens a cost session when a host connects and closes it when it disconnects; the
open ones live in `data_dir()/sessions-open.json` (so `gpuws cost` in a terminal sees the cost
climbing while the window runs) and finished ones go to the session history
(`SessionHistory`, JSON lines). Budgets are per calendar month: `HostProfile.budget` is compared
with the host's spending this month, as cloud billing does.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from filelock import FileLock

from gpuws.core.cost import (
    BudgetStatus,
    CostSession,
    PriceSegment,
    SessionHistory,
    budget_status,
    daily_totals,
    hours_to_budget,
    monthly_totals,
)
from gpuws.core.idle import GpuActivity
from gpuws.core.models import HostProfile
from gpuws.core.money import currency_of, default_currency
from gpuws.core.paths import data_dir


class SessionLedger:
    """Open cost sessions (one per host) on disk, and the history they end up in."""

    def __init__(self, path: Path | None = None, history: SessionHistory | None = None) -> None:
        self.path = path or data_dir() / "sessions-open.json"
        self.history = history or SessionHistory(self.path.with_name("sessions.jsonl"))
        self._lock = FileLock(str(self.path.with_name(self.path.name + ".lock")), timeout=10)

    def running(self) -> dict[str, CostSession]:
        """The open sessions by host name (a damaged file reads as none open)."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            return {
                str(host): CostSession(str(host), [PriceSegment(**s) for s in segments])
                for host, segments in raw.items()
            }
        except (OSError, ValueError, TypeError, AttributeError):
            return {}

    def _write(self, sessions: dict[str, CostSession]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {host: [asdict(s) for s in session.segments] for host, session in sessions.items()}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".sessions-open.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, self.path)

    def begin(self, profile: HostProfile, t: float) -> CostSession:
        """Open a session for the host at its current price (kept if one is already open)."""
        with self._lock:
            sessions = self.running()
            session = sessions.get(profile.name)
            if session is None or not session.running:
                session = CostSession(profile.name)
                session.open(t, profile.price_per_hour or 0.0, profile.slice_profile)
                sessions[profile.name] = session
                self._write(sessions)
            return session

    def reprice(self, profile: HostProfile, t: float) -> None:
        """The host now costs `profile.price_per_hour` (a resize): a new price segment from `t`."""
        with self._lock:
            sessions = self.running()
            session = sessions.get(profile.name)
            if session is None:
                return
            last = session.segments[-1]
            price = profile.price_per_hour or 0.0
            if (last.price_per_hour, last.slice_profile) != (price, profile.slice_profile):
                session.change_price(t, price, profile.slice_profile)
                self._write(sessions)

    def end(self, host: str, t: float) -> CostSession | None:
        """Close the host's session and append it to the history; returns it (None if none open)."""
        with self._lock:
            sessions = self.running()
            session = sessions.pop(host, None)
            if session is None:
                return None
            session.close(t)
            self.history.append(session)
            self._write(sessions)
            return session

    def all_sessions(self) -> list[CostSession]:
        """History plus the open sessions."""
        return [*self.history.load(), *self.running().values()]


@dataclass(frozen=True)
class HostCost:
    """What one host costs: now, today, this month, against its budget."""

    host: str
    price_per_hour: float | None
    slice_profile: str | None
    running: float | None  # the open session's cost so far; None when no session is open
    session_start: float | None
    daily: float  # today (local time)
    monthly: float  # this calendar month
    budget: BudgetStatus
    hours_left: float | None  # at the current price, before the budget is reached
    currency: str = "USD"  # every figure above is in this currency (the profile's, else the locale's)
    daily_budget: BudgetStatus | None = None  # today's spending against the daily limit, when one is set
    stop_at_budget: bool = False  # the profile asks to stop the instance when a budget is used up

    def worst_budget(self) -> BudgetStatus:
        """The budget (daily or monthly) closest to being used up."""
        order = {"exceeded": 3, "warning": 2, "ok": 1, "none": 0}
        candidates = [self.budget, *([self.daily_budget] if self.daily_budget is not None else [])]
        return max(candidates, key=lambda b: (order.get(b.level, 0), b.fraction or 0.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "price_per_hour": self.price_per_hour,
            "slice_profile": self.slice_profile,
            "running": _money(self.running),
            "session_start": datetime.fromtimestamp(self.session_start).isoformat(timespec="seconds")
            if self.session_start is not None else None,
            "daily": _money(self.daily),
            "monthly": _money(self.monthly),
            "currency": self.currency,
            "daily_budget": None if self.daily_budget is None else {
                "limit": self.daily_budget.budget,
                "spent": _money(self.daily_budget.spent),
                "level": self.daily_budget.level,
                "message": self.daily_budget.message,
                "currency": self.currency,
            },
            "budget": {
                "limit": self.budget.budget,
                "spent": _money(self.budget.spent),
                "level": self.budget.level,
                "message": self.budget.message,
                "hours_left": round(self.hours_left, 2) if self.hours_left is not None else None,
                "currency": self.currency,  # every amount names its currency, also nested ones
            },
        }


def _money(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


def host_cost(
    profile: HostProfile,
    sessions: Iterable[CostSession],
    now: float,
    *,
    tz: tzinfo | None = None,
    warn_fraction: float = 0.8,
) -> HostCost:
    """The cost figures of one host from all its sessions (finished and open)."""
    mine = [s for s in sessions if s.host == profile.name]
    today = datetime.fromtimestamp(now, tz)
    daily = daily_totals(mine, now, tz).get(today.date(), 0.0)
    monthly = monthly_totals(mine, now, tz).get((today.year, today.month), 0.0)
    open_sessions = [s for s in mine if s.running]
    running = sum(s.cost(now) for s in open_sessions) if open_sessions else None
    start = min((s.start for s in open_sessions if s.start is not None), default=None)
    currency = currency_of(profile.currency)
    status = budget_status(monthly, profile.budget, warn_fraction, currency=currency, period="monthly")
    daily_status = (budget_status(daily, profile.budget_daily, warn_fraction, currency=currency, period="daily")
                    if profile.budget_daily is not None else None)
    price = profile.price_per_hour
    left = hours_to_budget(monthly, profile.budget, price) if profile.budget is not None and price else None
    if profile.budget_daily is not None and price:
        day_left = hours_to_budget(daily, profile.budget_daily, price)
        left = day_left if left is None or (day_left is not None and day_left < left) else left
    return HostCost(profile.name, price, profile.slice_profile, running, start, daily, monthly, status, left,
                    currency, daily_status, profile.budget_stop)


def cost_report(
    profiles: Sequence[HostProfile], sessions: Sequence[CostSession], now: float, *, tz: tzinfo | None = None
) -> list[HostCost]:
    """`host_cost` for each profile, in the profiles' order."""
    return [host_cost(p, sessions, now, tz=tz) for p in profiles]


def cost_totals(report: Sequence[HostCost]) -> dict[str, tuple[float, float]]:
    """(daily, monthly) per currency, in the order the currencies first appear; never summed across
    currencies. With no hosts: the locale's currency at zero, so a total always names one."""
    totals: dict[str, tuple[float, float]] = {}
    for cost in report:
        daily, monthly = totals.get(cost.currency, (0.0, 0.0))
        totals[cost.currency] = (daily + cost.daily, monthly + cost.monthly)
    return totals or {default_currency(): (0.0, 0.0)}


def budget_warning(cost: HostCost) -> str | None:
    """The line to show when a host is near (80 %) or past a budget, daily or monthly (None when all is well)."""
    budget = cost.worst_budget()
    level = budget.level
    if level == "exceeded":
        stop = "; stopping the instance as asked" if cost.stop_at_budget else ""
        return f"{cost.host}: budget exceeded — {budget.message}{stop}"
    if level == "warning":
        left = f"; about {cost.hours_left:.1f} h left at the current price" if cost.hours_left is not None else ""
        return f"{cost.host}: nearing its budget — {budget.message}{left}"
    return None


def gpu_activity(sample: Any) -> GpuActivity:
    """The idle detector's view of a telemetry sample (anything with util/power attributes)."""
    return GpuActivity(
        util_gpu_pct=getattr(sample, "util_gpu_pct", None),
        power_w=getattr(sample, "power_w", None),
        power_limit_w=getattr(sample, "power_limit_w", None),
    )
