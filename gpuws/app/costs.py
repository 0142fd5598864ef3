"""The cost ledger and the idle policy, as the `Workspace` keeps them. Qt-free.

`CostBook` writes the session ledger (`gpuws.core.session.SessionLedger`, the file `gpuws cost`
reads) on one worker thread of its own, so the caller (the GUI thread) never waits on the file
lock and the writes land in the order they were asked for. `IdlePolicy` holds each host's "stop
when idle" choice and its idle detector; the Workspace feeds it fresh telemetry and acts on what
it says.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuws.core.idle import GpuActivity, IdleDetector, IdleEvent
from gpuws.core.models import HostProfile
from gpuws.core.session import HostCost, SessionLedger, host_cost

log = logging.getLogger(__name__)

Written = Callable[[str, "BaseException | None"], None]  # (host, the error or None), on the writer thread


class CostBook:
    """The ledger of cost sessions, written off the caller's thread and in order.

    `begin`, `reprice` and `end` return at once; the write runs on the book's one writer thread
    (FIFO, so a begin and the end after it never swap). `on_written(host, error)` is called on
    that thread after each write.
    """

    def __init__(self, ledger: SessionLedger | None = None, *, on_written: Written | None = None) -> None:
        self._ledger = ledger
        self._ledger_made = threading.Lock()
        self.on_written = on_written
        self._writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuws-ledger")
        self._pending: set[concurrent.futures.Future[None]] = set()
        self._closed = False

    @property
    def ledger(self) -> SessionLedger:
        """The ledger (made on first use: its default path creates the data directory)."""
        with self._ledger_made:
            if self._ledger is None:
                self._ledger = SessionLedger()
            return self._ledger

    # -- writing (returns at once) -----------------------------------------------------------------

    def begin(self, profile: HostProfile, t: float) -> concurrent.futures.Future[None]:
        """Open the host's session at `t` (kept if one is open; repriced if its price is stale)."""
        def write(ledger: SessionLedger) -> None:
            ledger.begin(profile, t)
            ledger.reprice(profile, t)  # an open session left from before may carry an old price

        return self._queue(profile.name, write)

    def reprice(self, profile: HostProfile, t: float) -> concurrent.futures.Future[None]:
        """The host costs `profile.price_per_hour` from `t` on (a resize)."""
        return self._queue(profile.name, lambda ledger: ledger.reprice(profile, t))

    def end(self, host: str, t: float) -> concurrent.futures.Future[None]:
        """Close the host's open session at `t` (nothing if none is open)."""
        return self._queue(host, lambda ledger: ledger.end(host, t))

    def _queue(self, host: str, write: Callable[[SessionLedger], object]) -> concurrent.futures.Future[None]:
        def run() -> None:
            error: BaseException | None = None
            try:
                write(self.ledger)
            except Exception as exc:  # the ledger file: OSError, a lock timeout
                log.warning("cost ledger write for %s failed: %s", host, exc)
                error = exc
            if self.on_written is not None:
                try:
                    self.on_written(host, error)
                except Exception:
                    log.exception("cost ledger listener failed")

        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        if self._closed:
            return done
        try:
            future = self._writer.submit(run)
        except RuntimeError:  # the interpreter is exiting: its executors take no more work
            log.warning("cost ledger write for %s dropped: the process is exiting", host)
            return done
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return future

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the writes asked for so far; False if some are still running after `timeout`."""
        _done, waiting = concurrent.futures.wait(list(self._pending), timeout=timeout)
        return not waiting

    def close(self, hosts: Sequence[str], t: float, timeout: float = 3.0) -> None:
        """At exit: end the open sessions of `hosts` at `t` (no billing while gpuws is closed),
        after the writes already queued, and wait for them at most `timeout` seconds."""
        for host in hosts:
            self.end(host, t)
        self.flush(timeout)
        self._closed = True
        self._writer.shutdown(wait=False)

    # -- reading (disk: off the GUI thread where it matters) ----------------------------------------

    def host_cost(self, profile: HostProfile, now: float) -> HostCost:
        """The host's cost now, today, this month, against its budget."""
        return host_cost(profile, self.ledger.all_sessions(), now)


@dataclass(frozen=True)
class IdleSettings:
    """One host's idle policy: warn after `minutes` idle; with `stop`, stop the instance too
    (running `pre_stop` on the host first, when given)."""

    stop: bool = False
    minutes: float = 30.0
    pre_stop: str = ""


class IdlePolicy:
    """Per host: its idle settings, its idle detector and the warning it last raised."""

    def __init__(self) -> None:
        self._settings: dict[str, IdleSettings] = {}
        self._detectors: dict[str, IdleDetector] = {}
        self.warnings: dict[str, str] = {}

    def settings(self, host: str) -> IdleSettings:
        return self._settings.get(host, IdleSettings())

    def configure(self, host: str, settings: IdleSettings) -> None:
        self._settings[host] = settings

    def idle(self, host: str) -> bool:
        """Whether the host is in an idle stretch now (not necessarily long enough to act)."""
        detector = self._detectors.get(host)
        return detector is not None and detector.idle_since is not None

    def feed(self, profile: HostProfile, t: float, gpus: Sequence[GpuActivity], in_use: bool) -> IdleEvent | None:
        """One telemetry moment of `profile`'s host; the event when it has been idle long enough."""
        minutes = self.settings(profile.name).minutes
        detector = self._detectors.get(profile.name)
        if detector is None or detector.minutes != minutes:
            detector = IdleDetector(profile.name, minutes=minutes, util_pct=profile.alerts.idle_util_pct,
                                    price_per_hour=profile.price_per_hour)
            self._detectors[profile.name] = detector
        detector.price_per_hour = profile.price_per_hour  # a resize changed it: idle money at the new price
        event = detector.update(t, gpus, in_use=in_use)
        if detector.idle_since is None:
            self.warnings.pop(profile.name, None)  # busy again: the warning is over
        if event is not None:
            self.warnings[profile.name] = event.message
        return event

    def forget(self, host: str) -> None:
        self._detectors.pop(host, None)
        self.warnings.pop(host, None)
