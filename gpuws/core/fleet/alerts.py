"""Alerts on fleet data: the host alert engine, fed with fleet snapshots, per node.

Same rules and thresholds as a host's (`gpuws.core.telemetry.alerts`): OOM risk above the memory
threshold, thermal/power throttling, an idle GPU for `idle_minutes` with the money it burns. And
what only a fleet has: a GPU seen in the last hour that reports nothing now (critical), and a GPU
whose exporter publishes no throttle reasons (information: "not exported", so silence is not
taken for "no throttling"). A
fleet has one price per GPU-hour; the engine divides a host's price by its GPU count, so each
node is configured with price x GPUs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from gpuws.core.fleet.model import NOT_EXPORTED, THROTTLE, THROTTLE_RETIRED, FleetGpu, MissingGpu
from gpuws.core.models import AlertThresholds
from gpuws.core.telemetry.alerts import Alert, AlertEngine, AlertEvent, AlertKind, AlertLog, Severity


class FleetAlerts:
    """Evaluates each snapshot of one fleet; the log holds what fired and cleared."""

    def __init__(self, fleet: str, thresholds: AlertThresholds | None = None,
                 price_per_gpu_hour: float | None = None, log: AlertLog | None = None) -> None:
        self.fleet = fleet
        self.thresholds = thresholds or AlertThresholds()
        self.price_per_gpu_hour = price_per_gpu_hour
        self.engine = AlertEngine(log)
        self._configured: dict[str, int] = {}
        self._missing: set[tuple[str, str]] = set()

    def host_key(self, host: str) -> str:
        """The alert engine's host name for a node of this fleet (fleet/node, apart from host profiles)."""
        return f"{self.fleet}/{host}"

    def evaluate(self, t: float, gpus: Sequence[FleetGpu], missing: Sequence[MissingGpu] = ()) -> list[AlertEvent]:
        """Check one snapshot: its GPUs, and those that stopped reporting."""
        events: list[AlertEvent] = []
        gone = {(m.host, m.device_key): m for m in missing}
        for host, device in list(self._missing):
            if (host, device) not in gone:  # back again
                events += self.engine.condition(self.host_key(host), device, AlertKind.GPU_NOT_REPORTING, False, t,
                                                message="")
        for (host, device), m in gone.items():
            events += self.engine.condition(self.host_key(host), device, AlertKind.GPU_NOT_REPORTING, True, t,
                                            severity=Severity.CRITICAL,
                                            message=f"{self.host_key(host)} GPU {device}: {m.describe()}")
        self._missing = set(gone)
        # One alert per node (not one per GPU: a whole fleet on default counters would flood the
        # log), naming its GPUs without throttle reasons.
        blind: dict[str, list[str]] = defaultdict(list)
        for gpu in gpus:
            if gpu.gi is None and gpu.throttle_source is None:
                blind[gpu.host].append(gpu.device_key)
        for host in {g.host for g in gpus}:
            keys = blind.get(host, [])
            events += self.engine.condition(
                self.host_key(host), None, AlertKind.NOT_EXPORTED, bool(keys), t, severity=Severity.INFO,
                message=f"{self.host_key(host)} GPU {', '.join(keys)}: throttle reasons {NOT_EXPORTED} (neither "
                        f"{THROTTLE} nor {THROTTLE_RETIRED}): throttling cannot be seen")
        by_host: dict[str, list[FleetGpu]] = defaultdict(list)
        for gpu in gpus:
            by_host[gpu.host].append(gpu)
        for host, devices in by_host.items():
            key = self.host_key(host)
            whole = max(1, sum(1 for d in devices if d.gi is None))
            if self._configured.get(key) != whole:
                price = None if self.price_per_gpu_hour is None else self.price_per_gpu_hour * whole
                self.engine.configure(key, self.thresholds, price)
                self._configured[key] = whole
            events += self.engine.evaluate(key, [d.to_sample(t) for d in devices])
        return events

    def active(self) -> list[Alert]:
        return self.engine.log.active()
