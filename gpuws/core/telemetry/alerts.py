"""Alerts from telemetry: OOM risk, throttling, ECC errors, unreachable host, idle GPU (and its cost).

An alert fires once when its condition starts and clears once when it ends. Hysteresis keeps a
value hovering at a threshold from flapping: memory clears only `MEM_CLEAR_MARGIN_PCT` below the
threshold, throttling must persist `THROTTLE_FIRE_AFTER_S` to fire and be gone
`CLEAR_AFTER_S` to clear, an idle GPU must stay busy `CLEAR_AFTER_S` to clear.

The idle alert's cost is the GPU's share of the profile's hourly price (price / number of GPUs
on the host) times the hours it has been idle, counted from the start of the idle stretch.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from gpuws.core.models import AlertThresholds
from gpuws.core.telemetry.sample import GpuSample
from gpuws.core.telemetry.throttle import POWER_REASONS, THERMAL_REASONS

MEM_CLEAR_MARGIN_PCT: Final = 5.0
IDLE_CLEAR_MARGIN_PCT: Final = 5.0
THROTTLE_FIRE_AFTER_S: Final = 5.0
CLEAR_AFTER_S: Final = 30.0
ECC_QUIET_CLEAR_S: Final = 600.0
TEMP_CLEAR_MARGIN_C: Final = 5.0


class AlertKind(StrEnum):
    OOM_RISK = "oom_risk"
    THERMAL_THROTTLE = "thermal_throttle"
    POWER_THROTTLE = "power_throttle"
    ECC_ERRORS = "ecc_errors"
    HOST_UNREACHABLE = "host_unreachable"
    IDLE_GPU = "idle_gpu"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass
class Alert:
    """One alert from the moment it fired; `cleared_at` is set when its condition ended."""

    id: int
    host: str
    gpu: str | None  # device key ("0", "0/mig1"); None for host-wide alerts
    kind: AlertKind
    severity: Severity
    message: str
    started_at: float
    cleared_at: float | None = None
    cost: float | None = None  # idle GPU: money burnt so far, in the profile's currency

    @property
    def active(self) -> bool:
        return self.cleared_at is None


@dataclass(frozen=True)
class AlertEvent:
    """A change to an alert: it fired or it cleared."""

    alert: Alert
    fired: bool  # False: cleared


class AlertLog:
    """History of alerts (newest last), bounded; safe to read from another thread."""

    def __init__(self, max_entries: int = 1000) -> None:
        self._entries: deque[Alert] = deque(maxlen=max_entries)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[AlertEvent], None]] = []

    def subscribe(self, listener: Callable[[AlertEvent], None]) -> None:
        """Call `listener` (on the evaluating thread) for every alert fired or cleared."""
        self._listeners.append(listener)

    def record(self, event: AlertEvent) -> None:
        with self._lock:
            if event.fired:
                self._entries.append(event.alert)
        for listener in list(self._listeners):
            listener(event)

    def entries(self) -> list[Alert]:
        with self._lock:
            return list(self._entries)

    def active(self) -> list[Alert]:
        return [a for a in self.entries() if a.active]


@dataclass
class _Condition:
    """Tracks one (host, device, kind) condition through its hysteresis."""

    since: float | None = None  # when the condition started being true
    ok_since: float | None = None  # when it started being false while the alert is active
    alert: Alert | None = None


@dataclass
class _HostRules:
    thresholds: AlertThresholds = field(default_factory=AlertThresholds)
    price_per_hour: float | None = None


class AlertEngine:
    """Evaluates samples against each host's thresholds and records events in an `AlertLog`."""

    def __init__(self, log: AlertLog | None = None) -> None:
        self.log = log if log is not None else AlertLog()
        self._rules: dict[str, _HostRules] = {}
        self._conditions: dict[tuple[str, str | None, AlertKind], _Condition] = {}
        self._ecc_counts: dict[tuple[str, str], tuple[int | None, int | None]] = {}
        self._ecc_increase: dict[tuple[str, str], float] = {}
        self._ids = itertools.count(1)

    def configure(self, host: str, thresholds: AlertThresholds, price_per_hour: float | None) -> None:
        """Set (or change) a host's thresholds and hourly price, from its profile."""
        self._rules[host] = _HostRules(thresholds, price_per_hour)

    def evaluate(self, host: str, samples: Iterable[GpuSample]) -> list[AlertEvent]:
        """Check one batch of a host; returns the alerts that fired or cleared."""
        rules = self._rules.get(host) or _HostRules()
        batch = list(samples)
        gpu_count = max(1, sum(1 for s in batch if s.mig is None))
        events = self.host_reachable(host, batch[0].t) if batch else []
        for s in batch:
            events += self._check_memory(host, s, rules.thresholds)
            events += self._check_throttle(host, s, rules.thresholds)
            events += self._check_ecc(host, s)
            events += self._check_idle(host, s, rules, gpu_count)
        return events

    def host_unreachable(self, host: str, t: float, reason: str = "") -> list[AlertEvent]:
        """The host dropped or cannot be reached."""
        message = f"{host} is unreachable" + (f": {reason}" if reason else "")
        return self._set(host, None, AlertKind.HOST_UNREACHABLE, True, t, message=message,
                         severity=Severity.CRITICAL)

    def host_reachable(self, host: str, t: float) -> list[AlertEvent]:
        """Samples arrive again: clear the unreachable alert at once."""
        return self._set(host, None, AlertKind.HOST_UNREACHABLE, False, t, clear_after=0.0)

    # --- rules ------------------------------------------------------------------------------

    def _check_memory(self, host: str, s: GpuSample, th: AlertThresholds) -> list[AlertEvent]:
        pct = s.mem_used_pct
        if pct is None:
            return []
        cond = self._cond(host, s.key, AlertKind.OOM_RISK)
        limit = th.mem_used_pct
        on = pct > limit if cond.alert is None else pct >= limit - MEM_CLEAR_MARGIN_PCT
        return self._set(host, s.key, AlertKind.OOM_RISK, on, s.t, clear_after=0.0, severity=Severity.WARNING,
                         message=f"{host} GPU {s.key}: memory {pct:.0f}% used (over {limit:g}%): risk of out-of-memory")

    def _check_throttle(self, host: str, s: GpuSample, th: AlertThresholds) -> list[AlertEvent]:
        reasons = set(s.throttle_reasons or ())
        thermal = sorted(reasons & THERMAL_REASONS)
        hot = False
        if th.temp_c is not None and s.temp_c is not None:
            active = self._cond(host, s.key, AlertKind.THERMAL_THROTTLE).alert is not None
            hot = s.temp_c >= (th.temp_c - TEMP_CLEAR_MARGIN_C if active else th.temp_c)
        what = ", ".join(thermal) if thermal else f"temperature {s.temp_c} C"
        events = self._set(host, s.key, AlertKind.THERMAL_THROTTLE, bool(thermal) or hot, s.t,
                           fire_after=THROTTLE_FIRE_AFTER_S, severity=Severity.WARNING,
                           message=f"{host} GPU {s.key}: thermal throttling ({what})")
        power = sorted(reasons & POWER_REASONS)
        events += self._set(host, s.key, AlertKind.POWER_THROTTLE, bool(power), s.t,
                            fire_after=THROTTLE_FIRE_AFTER_S, severity=Severity.INFO,
                            message=f"{host} GPU {s.key}: power throttling ({', '.join(power)})")
        return events

    def _check_ecc(self, host: str, s: GpuSample) -> list[AlertEvent]:
        counts = (s.ecc_errors_corrected, s.ecc_errors_uncorrected)
        if counts == (None, None):
            return []
        key = (host, s.key)
        previous = self._ecc_counts.get(key)
        self._ecc_counts[key] = counts
        grew_u = previous is not None and _grew(previous[1], counts[1])
        if previous is not None and (grew_u or _grew(previous[0], counts[0])):
            self._ecc_increase[key] = s.t
        last = self._ecc_increase.get(key)
        on = last is not None and s.t - last < ECC_QUIET_CLEAR_S
        return self._set(host, s.key, AlertKind.ECC_ERRORS, on, s.t, clear_after=0.0,
                         severity=Severity.CRITICAL if grew_u else Severity.WARNING,
                         message=f"{host} GPU {s.key}: ECC errors rising "
                         f"(corrected {counts[0]}, uncorrected {counts[1]})")

    def _check_idle(self, host: str, s: GpuSample, rules: _HostRules, gpu_count: int) -> list[AlertEvent]:
        util = s.util_gpu_pct
        if util is None or s.mig is not None:
            return []  # "not supported" is not idle
        th = rules.thresholds
        cond = self._cond(host, s.key, AlertKind.IDLE_GPU)
        on = util < th.idle_util_pct if cond.alert is None else util < th.idle_util_pct + IDLE_CLEAR_MARGIN_PCT
        idle_s = s.t - cond.since if on and cond.since is not None else 0.0
        cost = idle_cost(rules.price_per_hour, idle_s, gpu_count)
        money = f", burning {cost:.2f} so far" if cost is not None else ""
        message = (f"{host} GPU {s.key}: idle (under {th.idle_util_pct:g}% busy) "
                   f"for {idle_s / 60:.0f} min{money}")
        return self._set(host, s.key, AlertKind.IDLE_GPU, on, s.t, fire_after=th.idle_minutes * 60.0,
                         severity=Severity.INFO, message=message, cost=cost)

    # --- hysteresis core --------------------------------------------------------------------

    def _cond(self, host: str, gpu: str | None, kind: AlertKind) -> _Condition:
        return self._conditions.setdefault((host, gpu, kind), _Condition())

    def _set(
        self,
        host: str,
        gpu: str | None,
        kind: AlertKind,
        on: bool,
        t: float,
        *,
        fire_after: float = 0.0,
        clear_after: float = CLEAR_AFTER_S,
        severity: Severity = Severity.WARNING,
        message: str = "",
        cost: float | None = None,
    ) -> list[AlertEvent]:
        cond = self._cond(host, gpu, kind)
        if on:
            cond.ok_since = None
            if cond.since is None:
                cond.since = t
            if cond.alert is None and t - cond.since >= fire_after:
                cond.alert = Alert(next(self._ids), host, gpu, kind, severity, message, cond.since, cost=cost)
                event = AlertEvent(cond.alert, fired=True)
                self.log.record(event)
                return [event]
            if cond.alert is not None:  # still on: keep the text (and the idle cost) current
                cond.alert.message = message or cond.alert.message
                cond.alert.cost = cost if cost is not None else cond.alert.cost
            return []
        if cond.alert is None:
            cond.since = None
            return []
        if cond.ok_since is None:
            cond.ok_since = t
        if t - cond.ok_since < clear_after:
            return []
        alert = cond.alert
        alert.cleared_at = t
        self._conditions[(host, gpu, kind)] = _Condition()
        event = AlertEvent(alert, fired=False)
        self.log.record(event)
        return [event]


def idle_cost(price_per_hour: float | None, idle_seconds: float, gpu_count: int = 1) -> float | None:
    """Money an idle GPU burns: its share of the hourly price times the idle hours."""
    if price_per_hour is None:
        return None
    return price_per_hour / max(1, gpu_count) * idle_seconds / 3600.0


def _grew(before: int | None, now: int | None) -> bool:
    return before is not None and now is not None and now > before
