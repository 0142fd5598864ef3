"""Keeps telemetry flowing for every watched host into one store, with alerts. Never Qt.

Per host, `TelemetryService.watch` runs a `TelemetryStream` on the asyncio loop thread, ingests
each batch into the shared `TelemetryStore` and evaluates the host's alert thresholds. When the
stream ends (the connection dropped, the sampler died) the host is marked offline in the store,
so the plots show a gap, an unreachable alert fires, and the stream is restarted once the
connection is back (`HostConnection` reconnects by itself; its runner waits for it).

The GUI reads the store on its own frame timer; the only thing pushed out of here per event is an
alert change (through `AlertLog.subscribe`), never a sample.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.core.runner import CommandRunner, raise_if_cancelling
from gpuws.core.telemetry.alerts import AlertEngine, AlertLog
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.remote.telemetry import TelemetryError, TelemetryStream, TelemetryStreamEnded, describe_source

log = logging.getLogger(__name__)

RETRY_MIN_S: Final = 1.0
RETRY_MAX_S: Final = 15.0

StreamFactory = Callable[..., TelemetryStream]


@dataclass
class HostFeed:
    """What the service knows about one watched host's stream (read by the UI; plain values)."""

    source: str | None = None  # "nvml" / "nvidia-smi" once streaming
    source_text: str = "starting"  # for people: "NVML agent", "nvidia-smi (no python3)"
    simulated: bool = False
    problem: str = ""  # why the stream is not running, "" while it is


class TelemetryService:
    """One store and one alert engine for all hosts; one streaming task per watched host."""

    def __init__(
        self,
        store: TelemetryStore | None = None,
        alerts: AlertEngine | None = None,
        *,
        hz: float = 1.0,
        stream_factory: StreamFactory = TelemetryStream,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store if store is not None else TelemetryStore()
        self.alerts = alerts if alerts is not None else AlertEngine()
        self.hz = hz
        self._stream_factory = stream_factory
        self._clock = clock
        # Written on the loop thread, read on the GUI thread: each value is replaced whole.
        self._feeds: dict[str, HostFeed] = {}

    @property
    def alert_log(self) -> AlertLog:
        return self.alerts.log

    def feed(self, host: str) -> HostFeed | None:
        """The stream state of `host` (a snapshot), or None when it is not watched."""
        feed = self._feeds.get(host)
        return None if feed is None else HostFeed(feed.source, feed.source_text, feed.simulated, feed.problem)

    def configure(self, profile: HostProfile) -> None:
        """Use the profile's alert thresholds and hourly price for its host."""
        self.alerts.configure(profile.name, profile.alerts, profile.price_per_hour, profile.currency or "")

    async def watch(self, profile: HostProfile, runner: CommandRunner | Callable[[], CommandRunner]) -> None:
        """Stream `profile`'s host until cancelled, restarting after drops. Never raises GpuwsError.

        `runner` may be a callable returning the current runner (a connection's `.runner`).
        """
        host = profile.name
        self.configure(profile)
        self.store.set_rate(host, self.hz)
        self._feeds[host] = HostFeed(simulated=profile.simulated)
        delay = RETRY_MIN_S
        try:
            while True:
                current = runner() if callable(runner) else runner
                got_data = await self._stream_once(host, current, profile.simulated)
                raise_if_cancelling()
                delay = RETRY_MIN_S if got_data else min(RETRY_MAX_S, delay * 2)
                await asyncio.sleep(delay)
        finally:
            # Unwatched (cancelled) or the app is closing: the line stops here, not across the pause.
            self.store.mark_offline(host, self._clock())
            self._feeds.pop(host, None)

    async def host_down(self, host: str, t: float, reason: str) -> None:
        """The host is not reachable now (its Workspace says why, in words): break its lines and
        raise its unreachable alert. A coroutine, so it runs on the loop with the streams."""
        self.store.mark_offline(host, t)
        self.alerts.host_unreachable(host, t, reason)

    async def devices_gone(self, host: str, keys: set[str], t: float) -> None:
        """A new layout removed these devices: their lines and alerts go at once."""
        self.store.drop_devices(host, keys & set(self.store.device_keys(host)))
        self.alerts.devices_gone(host, keys, t)

    async def _stream_once(self, host: str, runner: CommandRunner, simulated: bool) -> bool:
        """Run one stream until it ends; returns whether any batch arrived."""
        got_data = False
        stream = self._stream_factory(runner, hz=self.hz, simulated=True if simulated else None)
        try:
            async with stream:
                async for batch in stream:
                    if not got_data:
                        got_data = True
                        self._feeds[host] = HostFeed(stream.source, describe_source(stream), batch.simulated)
                        # A new stream enumerates the devices afresh: MIG devices of an old layout go.
                        stale = set(self.store.device_keys(host)) - {s.key for s in batch.samples}
                        if stale:
                            self.store.drop_devices(host, stale)
                    self.store.ingest(host, batch)
                    self.alerts.evaluate(host, batch.samples)
            reason = "the telemetry stream ended"
        except TelemetryStreamEnded as exc:
            reason = str(exc)
        except (TelemetryError, GpuwsError) as exc:
            reason = str(exc)
        except (OSError, EOFError, Exception) as exc:  # asyncssh channel errors and the like
            log.debug("telemetry stream of %s failed", host, exc_info=True)
            reason = f"{type(exc).__name__}: {exc}"[:200]
        now = self._clock()
        self.store.mark_offline(host, now)
        self.alerts.host_unreachable(host, now, reason)
        previous = self._feeds.get(host) or HostFeed()
        self._feeds[host] = HostFeed(previous.source, previous.source_text, previous.simulated, reason)
        return got_data


def runner_of(connection: Any) -> Callable[[], CommandRunner]:
    """The current runner of a `HostConnection` (looked up afresh on every restart)."""

    def current() -> CommandRunner:
        runner: CommandRunner = connection.runner
        return runner

    return current
