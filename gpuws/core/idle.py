"""Idle-stop detection: the GPUs do nothing, nobody is using the host, and money is burning.

A host is idle when every GPU's utilisation is under `util_pct` and its power draw under
`power_fraction` of its limit (utilisation alone misses a job that is loading data), and no
interactive SSH session or tunnel is in use. After `minutes` of that, one `IdleEvent` fires with
the money spent idle; it re-arms when the host is busy again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuws.core.cost import SECONDS_PER_HOUR


@dataclass(frozen=True)
class GpuActivity:
    """The part of a telemetry sample idle detection needs; None = not reported."""

    util_gpu_pct: float | None
    power_w: float | None
    power_limit_w: float | None


@dataclass(frozen=True)
class IdleEvent:
    host: str
    idle_since: float
    at: float
    money_spent_idle: float

    @property
    def idle_minutes(self) -> float:
        return (self.at - self.idle_since) / 60.0

    @property
    def message(self) -> str:
        return (
            f"{self.host}: GPUs idle and no session in use for {self.idle_minutes:.0f} min "
            f"— {self.money_spent_idle:.2f} spent idle"
        )


class IdleDetector:
    """Feeds on samples for one host; says when it has been idle long enough to act."""

    def __init__(
        self,
        host: str,
        *,
        minutes: float = 30.0,
        util_pct: float = 5.0,
        power_fraction: float = 0.25,
        price_per_hour: float | None = None,
    ) -> None:
        self.host = host
        self.minutes = minutes
        self.util_pct = util_pct
        self.power_fraction = power_fraction
        self.price_per_hour = price_per_hour
        self.idle_since: float | None = None
        self._fired = False

    def gpu_is_idle(self, gpu: GpuActivity) -> bool:
        # Unknown utilisation never counts as idle: we only stop what we know is unused.
        if gpu.util_gpu_pct is None or gpu.util_gpu_pct >= self.util_pct:
            return False
        if gpu.power_w is not None and gpu.power_limit_w:
            return gpu.power_w < self.power_fraction * gpu.power_limit_w
        return True

    def update(self, t: float, gpus: Sequence[GpuActivity], *, in_use: bool) -> IdleEvent | None:
        """Feed one moment; returns an event once per idle stretch when it crosses `minutes`."""
        idle = bool(gpus) and not in_use and all(self.gpu_is_idle(g) for g in gpus)
        if not idle:
            self.idle_since = None
            self._fired = False
            return None
        if self.idle_since is None:
            self.idle_since = t
        if not self._fired and t - self.idle_since >= self.minutes * 60.0:
            self._fired = True
            return IdleEvent(self.host, self.idle_since, t, self.money_spent(t))
        return None

    def money_spent(self, t: float) -> float:
        if self.idle_since is None or not self.price_per_hour:
            return 0.0
        return (t - self.idle_since) / SECONDS_PER_HOUR * self.price_per_hour
