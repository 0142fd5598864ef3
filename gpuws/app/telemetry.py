"""Keeps telemetry flowing for every watched host into one store, with alerts. Never Qt.

Per host, `TelemetryService.watch` follows the host's samples on the asyncio loop thread through
the one retry loop (`gpuws.app.feeds.follow_telemetry`, which `gpuws watch` reads too), ingests
each batch into the shared `TelemetryStore` and evaluates the host's alert thresholds. When the
stream is lost the host is marked offline in the store, so the plots show a gap, and an
unreachable alert fires; the loop restarts the stream, and the Workspace restarts the whole watch
the moment a dropped host's connection is back (it owns the connection: `gpuws.app.hosts`).

The GUI reads the store on its own frame timer; the only thing pushed out of here per event is an
alert change (through `AlertLog.subscribe`), never a sample.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.core.runner import CommandRunner
from gpuws.core.telemetry.alerts import AlertEngine, AlertLog
from gpuws.core.telemetry.sample import SampleBatch
from gpuws.remote.connection import ReconnectPolicy
from gpuws.remote.telemetry import TelemetryStream, describe_source

if TYPE_CHECKING:
    from gpuws.core.telemetry.store import TelemetryStore


@runtime_checkable
class HasRunner(Protocol):
    """A connection: its `.runner` is the current one (a new one after each reconnect)."""

    @property
    def runner(self) -> CommandRunner:
        """The runner for commands now."""
        ...


# What a feed reads its runner from: a connection, a runner, or a callable giving the current one.
RunnerSource = HasRunner | CommandRunner | Callable[[], CommandRunner]

log = logging.getLogger(__name__)

# A lost stream is retried this far apart at most (the Workspace restarts it at once on reconnect).
RETRY_POLICY: Final = ReconnectPolicy(base_delay=1.0, max_delay=15.0, jitter=0.2)

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
        retry: ReconnectPolicy = RETRY_POLICY,
    ) -> None:
        self.retry = retry
        self._store = store
        self._store_lock = threading.Lock()  # the GUI thread and the loop thread may both ask first
        self.alerts = alerts if alerts is not None else AlertEngine()
        self.hz = hz
        self._stream_factory = stream_factory
        self._clock = clock
        # Written on the loop thread, read on the GUI thread: each value is replaced whole.
        self._feeds: dict[str, HostFeed] = {}

    @property
    def store(self) -> TelemetryStore:
        """The history of every host, made on first use: a Workspace that never streams (a CLI
        command) then never imports numpy."""
        with self._store_lock:
            if self._store is None:
                from gpuws.core.telemetry.store import TelemetryStore

                self._store = TelemetryStore()
            return self._store

    @property
    def alert_log(self) -> AlertLog:
        """The log of alerts raised and cleared."""
        return self.alerts.log

    def feed(self, host: str) -> HostFeed | None:
        """The stream state of `host` (a snapshot), or None when it is not watched."""
        feed = self._feeds.get(host)
        return None if feed is None else HostFeed(feed.source, feed.source_text, feed.simulated, feed.problem)

    def configure(self, profile: HostProfile) -> None:
        """Use the profile's alert thresholds and hourly price for its host."""
        self.alerts.configure(profile.name, profile.alerts, profile.price_per_hour, profile.currency or "")

    async def watch(self, profile: HostProfile, runner: RunnerSource) -> None:
        """Stream `profile`'s host until cancelled, restarting after drops (the one retry loop,
        `gpuws.app.feeds.follow_telemetry`). Never raises GpuwsError: a failure retrying cannot fix
        ends the watch with the reason in `feed(host).problem` and an unreachable alert.

        `runner` is a connection (its `.runner` is read afresh for each stream), a runner, or a
        callable returning the current runner.
        """
        from gpuws.app.feeds import StreamBack, StreamLost, follow_telemetry

        host = profile.name
        self.configure(profile)
        self.store.set_rate(host, self.hz)
        self._feeds[host] = HostFeed(simulated=profile.simulated)
        streams: list[TelemetryStream] = []
        fresh = False

        def on_stream(stream: TelemetryStream) -> None:
            nonlocal fresh
            streams[:] = [stream]
            fresh = True

        events = follow_telemetry(_Source(runner), hz=self.hz, simulated=True if profile.simulated else None,
                                  reconnect_timeout=None, revive=False, policy=self.retry,
                                  stream_factory=self._stream_factory, clock=self._clock, on_stream=on_stream)
        try:
            async for event in events:
                if isinstance(event, StreamLost):
                    self._lost(host, event.reason)
                elif isinstance(event, StreamBack):
                    continue  # the next batch clears the gap and the unreachable alert
                else:
                    if fresh:
                        fresh = False
                        self._stream_started(host, streams[0], event)
                    self.store.ingest(host, event)
                    self.alerts.evaluate(host, event.samples)
        except GpuwsError as exc:  # retrying cannot fix it: say so where the host's telemetry shows
            self._lost(host, str(exc))
        except Exception as exc:  # a stream that broke in a way nobody foresaw: said, never raised
            log.warning("telemetry of %s stopped", host, exc_info=True)
            self._lost(host, f"{type(exc).__name__}: {exc}"[:200])
        finally:
            await events.aclose()
            # Unwatched (cancelled) or the app is closing: the line stops here, not across the pause.
            self.store.mark_offline(host, self._clock())
            self._feeds.pop(host, None)

    def _stream_started(self, host: str, stream: TelemetryStream, batch: SampleBatch) -> None:
        self._feeds[host] = HostFeed(stream.source, describe_source(stream), batch.simulated)
        # A new stream enumerates the devices afresh: MIG devices of an old layout go.
        stale = set(self.store.device_keys(host)) - {s.key for s in batch.samples}
        if stale:
            self.store.drop_devices(host, stale)

    def _lost(self, host: str, reason: str) -> None:
        now = self._clock()
        # The feed says why before the alert goes out: a view hearing the alert reads the feed.
        previous = self._feeds.get(host) or HostFeed()
        self._feeds[host] = HostFeed(previous.source, previous.source_text, previous.simulated, reason)
        self.store.mark_offline(host, now)
        self.alerts.host_unreachable(host, now, reason)

    async def host_down(self, host: str, t: float, reason: str) -> None:
        """The host is not reachable now (its Workspace says why, in words): break its lines and
        raise its unreachable alert. A coroutine, so it runs on the loop with the streams."""
        self.store.mark_offline(host, t)
        self.alerts.host_unreachable(host, t, reason)

    async def devices_gone(self, host: str, keys: set[str], t: float) -> None:
        """A new layout removed these devices: their lines and alerts go at once."""
        self.store.drop_devices(host, keys & set(self.store.device_keys(host)))
        self.alerts.devices_gone(host, keys, t)


class _Source:
    """What the retry loop reads a runner from: a connection, a runner, or a callable giving one."""

    def __init__(self, source: RunnerSource) -> None:
        self._source = source
        self.profile = getattr(source, "profile", None)

    @property
    def runner(self) -> CommandRunner:
        """The runner for the next stream (a connection's current one)."""
        source = self._source
        if callable(source):
            return source()
        return source.runner if isinstance(source, HasRunner) else source


def runner_of(connection: HasRunner) -> Callable[[], CommandRunner]:
    """The current runner of a `HostConnection` (looked up afresh on every restart)."""

    def current() -> CommandRunner:
        runner: CommandRunner = connection.runner
        return runner

    return current
