"""Alerts from telemetry: OOM risk, throttling, ECC errors, unreachable host, idle GPU (and its cost).

An alert fires once when its condition has held for its kind's minimum duration (`KindPolicy.hold_s`,
editable per kind with `AlertEngine.set_policy`) and clears once when it ends. Hysteresis keeps a
value hovering at a threshold from flapping: memory clears only `MEM_CLEAR_MARGIN_PCT` below the
threshold, throttling must be gone `CLEAR_AFTER_S` to clear, an idle GPU must stay busy
`CLEAR_AFTER_S` to clear. A condition that comes back within `KindPolicy.repeat_s` of its clear
re-opens the same alert (its `count` goes up, the event is marked `repeat`) rather than adding a
row to the log, so a flapping condition shows as one row "7" and notifies at most once per
`repeat_s`. Alerts can be acknowledged, and muted per (host, kind): a muted kind still logs but
its events are marked `muted`, so the desktop notifier stays quiet.

The idle alert's cost is the GPU's share of the profile's hourly price (price / number of GPUs
on the host) times the hours it has been idle, counted from the start of the idle stretch.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Final

from gpuws.core.models import AlertThresholds
from gpuws.core.money import currency_of, money
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
    GPU_NOT_REPORTING = "gpu_not_reporting"  # fleet: a GPU seen before reports nothing now (XID 79)
    NOT_EXPORTED = "not_exported"  # fleet: the exporter publishes no throttle reasons for a GPU


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True)
class KindPolicy:
    """How calm one kind of alert is: held `hold_s` before it fires, re-raised at most once per `repeat_s`."""

    hold_s: float
    repeat_s: float = 600.0


# Power capping comes and goes with the load (the demo host flaps every ~40 s): it must hold a
# minute before it is worth telling anyone; OOM risk and an unreachable host matter at once.
DEFAULT_POLICIES: Final[dict[AlertKind, KindPolicy]] = {
    AlertKind.OOM_RISK: KindPolicy(hold_s=0.0),
    AlertKind.THERMAL_THROTTLE: KindPolicy(hold_s=THROTTLE_FIRE_AFTER_S),
    AlertKind.POWER_THROTTLE: KindPolicy(hold_s=60.0),
    AlertKind.ECC_ERRORS: KindPolicy(hold_s=0.0),
    AlertKind.HOST_UNREACHABLE: KindPolicy(hold_s=0.0),
    AlertKind.IDLE_GPU: KindPolicy(hold_s=-1.0),  # < 0: the profile's idle minutes decide
    AlertKind.GPU_NOT_REPORTING: KindPolicy(hold_s=0.0),
    AlertKind.NOT_EXPORTED: KindPolicy(hold_s=0.0, repeat_s=86_400.0),
}


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
    currency: str = ""  # ISO code of `cost` ("EUR"); "" when unknown
    count: int = 1  # times raised: a flapping condition re-opens the same alert
    acknowledged: bool = False

    @property
    def active(self) -> bool:
        return self.cleared_at is None


@dataclass(frozen=True)
class AlertEvent:
    """A change to an alert: it fired or it cleared."""

    alert: Alert
    fired: bool  # False: cleared
    repeat: bool = False  # fired again within its kind's repeat window: the same log row
    muted: bool = False  # the user muted this kind on this host: log it, do not notify


class AlertLog:
    """History of alerts (newest last), append-only and bounded; safe to read from another thread.

    A fired alert is appended once; later events (cleared, raised again) change that entry in
    place, so a view can append rows and update them rather than rebuild.
    """

    def __init__(self, max_entries: int = 1000) -> None:
        self._entries: deque[Alert] = deque(maxlen=max_entries)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[AlertEvent], None]] = []
        self._muted: set[tuple[str, AlertKind]] = set()

    def mute(self, host: str, kind: AlertKind, muted: bool = True) -> None:
        """Mute (or unmute) notifications of `kind` on `host`; the log still records them."""
        with self._lock:
            if muted:
                self._muted.add((host, kind))
            else:
                self._muted.discard((host, kind))

    def is_muted(self, host: str, kind: AlertKind) -> bool:
        with self._lock:
            return (host, kind) in self._muted

    def muted(self) -> set[tuple[str, AlertKind]]:
        with self._lock:
            return set(self._muted)

    def acknowledge(self, alert_id: int) -> Alert | None:
        """Mark an alert as seen; returns it (None when it is no longer in the log)."""
        with self._lock:
            for alert in self._entries:
                if alert.id == alert_id:
                    alert.acknowledged = True
                    return alert
        return None

    def subscribe(self, listener: Callable[[AlertEvent], None]) -> None:
        """Call `listener` (on the evaluating thread) for every alert fired or cleared."""
        self._listeners.append(listener)

    def record(self, event: AlertEvent) -> None:
        with self._lock:
            if event.fired and not event.repeat:
                self._entries.append(event.alert)
            if (event.alert.host, event.alert.kind) in self._muted:
                event = replace(event, muted=True)
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
    last: Alert | None = None  # the alert that cleared last, re-opened if it comes back soon


@dataclass
class _HostRules:
    thresholds: AlertThresholds = field(default_factory=AlertThresholds)
    price_per_hour: float | None = None
    currency: str = ""


class AlertEngine:
    """Evaluates samples against each host's thresholds and records events in an `AlertLog`."""

    def __init__(self, log: AlertLog | None = None) -> None:
        self.log = log if log is not None else AlertLog()
        self._rules: dict[str, _HostRules] = {}
        self._conditions: dict[tuple[str, str | None, AlertKind], _Condition] = {}
        self._ecc_counts: dict[tuple[str, str], tuple[int | None, int | None]] = {}
        self._ecc_increase: dict[tuple[str, str], float] = {}
        self._ids = itertools.count(1)
        self._policies: dict[AlertKind, KindPolicy] = dict(DEFAULT_POLICIES)

    def configure(self, host: str, thresholds: AlertThresholds, price_per_hour: float | None,
                  currency: str = "") -> None:
        """Set (or change) a host's thresholds, hourly price and its currency, from its profile."""
        self._rules[host] = _HostRules(thresholds, price_per_hour, currency)

    def policy(self, kind: AlertKind) -> KindPolicy:
        return self._policies[kind]

    def set_policy(self, kind: AlertKind, *, hold_s: float | None = None, repeat_s: float | None = None) -> None:
        """Change how long `kind` must hold before it fires, and its repeat window (seconds)."""
        old = self._policies[kind]
        self._policies[kind] = KindPolicy(
            hold_s=old.hold_s if hold_s is None else max(0.0, hold_s),
            repeat_s=old.repeat_s if repeat_s is None else max(0.0, repeat_s),
        )

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

    def condition(self, host: str, gpu: str | None, kind: AlertKind, on: bool, t: float, *, message: str,
                  severity: Severity = Severity.WARNING) -> list[AlertEvent]:
        """A condition found outside the samples (a fleet's missing GPU or metric): on, or cleared at once."""
        return self._set(host, gpu, kind, on, t, clear_after=0.0, severity=severity, message=message)

    def host_reachable(self, host: str, t: float) -> list[AlertEvent]:
        """Samples arrive again: clear the unreachable alert at once."""
        return self._set(host, None, AlertKind.HOST_UNREACHABLE, False, t, clear_after=0.0)

    def devices_gone(self, host: str, keys: Iterable[str], t: float) -> list[AlertEvent]:
        """Devices of `host` that no longer exist (a resize removed them): their alerts clear at
        once and their conditions are forgotten (nothing would ever clear them otherwise)."""
        gone = set(keys)
        events: list[AlertEvent] = []
        for key in [k for k in self._conditions if k[0] == host and k[1] in gone]:
            cond = self._conditions.pop(key)
            if cond.alert is not None:
                cond.alert.cleared_at = t
                event = AlertEvent(cond.alert, fired=False)
                self.log.record(event)
                events.append(event)
        for ecc in [k for k in self._ecc_counts if k[0] == host and k[1] in gone]:
            self._ecc_counts.pop(ecc, None)
            self._ecc_increase.pop(ecc, None)
        return events

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
                           severity=Severity.WARNING,
                           message=f"{host} GPU {s.key}: thermal throttling ({what})")
        power = sorted(reasons & POWER_REASONS)
        events += self._set(host, s.key, AlertKind.POWER_THROTTLE, bool(power), s.t,
                            severity=Severity.INFO,
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
            # "Not supported" is not idle. A MIG slice's activity (GPM) is known on Hopper and later,
            # but an unused slice is usually a spare partition kept on purpose, and the idle cost
            # is priced per whole GPU: slices are not checked.
            return []
        th = rules.thresholds
        cond = self._cond(host, s.key, AlertKind.IDLE_GPU)
        on = util < th.idle_util_pct if cond.alert is None else util < th.idle_util_pct + IDLE_CLEAR_MARGIN_PCT
        idle_s = s.t - cond.since if on and cond.since is not None else 0.0
        cost = idle_cost(rules.price_per_hour, idle_s, gpu_count)
        money = f", burning {format_money(cost, rules.currency)} so far" if cost is not None else ""
        message = (f"{host} GPU {s.key}: idle (under {th.idle_util_pct:g}% busy) "
                   f"for {idle_s / 60:.0f} min{money}")
        hold = self._policies[AlertKind.IDLE_GPU].hold_s
        return self._set(host, s.key, AlertKind.IDLE_GPU, on, s.t,
                         fire_after=th.idle_minutes * 60.0 if hold < 0 else hold,
                         severity=Severity.INFO, message=message, cost=cost, currency=rules.currency)

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
        fire_after: float | None = None,
        clear_after: float = CLEAR_AFTER_S,
        severity: Severity = Severity.WARNING,
        message: str = "",
        cost: float | None = None,
        currency: str = "",
    ) -> list[AlertEvent]:
        cond = self._cond(host, gpu, kind)
        policy = self._policies[kind]
        hold = policy.hold_s if fire_after is None else fire_after
        if on:
            cond.ok_since = None
            if cond.since is None:
                cond.since = t
            if cond.alert is None and t - cond.since >= hold:
                last = cond.last
                if last is not None and last.cleared_at is not None and t - last.cleared_at < policy.repeat_s:
                    # Came back soon after it cleared: the same alert again, one row with a count.
                    last.cleared_at, last.count, last.acknowledged = None, last.count + 1, False
                    last.message, last.severity = message or last.message, severity
                    cond.alert = last
                    event = AlertEvent(last, fired=True, repeat=True)
                else:
                    cond.alert = Alert(next(self._ids), host, gpu, kind, severity, message, cond.since,
                                       cost=cost, currency=currency)
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
        self._conditions[(host, gpu, kind)] = _Condition(last=alert)
        event = AlertEvent(alert, fired=False)
        self.log.record(event)
        return [event]


def idle_cost(price_per_hour: float | None, idle_seconds: float, gpu_count: int = 1) -> float | None:
    """Money an idle GPU burns: its share of the hourly price times the idle hours."""
    if price_per_hour is None:
        return None
    return price_per_hour / max(1, gpu_count) * idle_seconds / 3600.0


def format_money(amount: float, currency: str = "") -> str:
    """'€12.30' in the host's currency (the locale's when the profile names none)."""
    return money(amount, currency_of(currency or None))


def _grew(before: int | None, now: int | None) -> bool:
    return before is not None and now is not None and now > before
