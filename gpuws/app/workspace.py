"""The one truth about the hosts the app works with. Qt-free.

A `Workspace` owns, per host name: the current connection and its `ConnectionState`, the last
inventory, the telemetry feed (one `TelemetryService` for all hosts), the tunnels, the cost
ledger (`costs`: a session opens when the host is connected and closes when it is not, or at
exit) and the idle policy (`idle`: warn, and stop the instance if asked, after N idle minutes).
A host's life is the Workspace's: `connect`, `reconnect`, `retry_now`, `probe`, `close(name)`,
`open_tunnel` / `close_tunnel`, `start` / `stop` take a host name; the connecting itself (attempts,
backoff that never gives up while the host is open, host-key questions, reasons in words from the
error table) is done by each host's `HostLink` (`gpuws.app.hosts`), whose reports the Workspace
takes in (`attach`). `check_stale` turns a connected host that sends no samples "stale". Front ends
are views: they ask through these verbs, report what only they know (`price_changed` after a
resize they ran), and subscribe once to hear about every change (`subscribe`).

Following the connection is done here, once: when a host's connection is replaced (Host >
Reconnect, a profile edit) its telemetry stream restarts on the new one and its tunnels are
rebound to it; when the inventory changes (a verified resize) the stream restarts so the devices
are enumerated anew; a closed host's stream stops.

Threads: every method is called on one thread, the owner's (the GUI thread in the window, the
event loop in a script); listeners are called on that thread. Coroutines (the telemetry streams,
an instance stop) run through the `spawn` function given at construction (the window passes
`AsyncBridge.run_async`), ledger writes on the ledger's own writer thread; what they report comes
back to the owner's thread through `post` (the window passes `AsyncBridge.post`; without one,
listeners hear about those two on the thread that finished the work). So the Workspace itself
never touches an event loop or Qt.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from gpuws.app.costs import CostBook, IdlePolicy
from gpuws.app.hosts import Post, Spawn
from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.core.session import gpu_activity
from gpuws.core.states import ConnectionState
from gpuws.core.tunnels import TunnelState

# Types only below: a command's Workspace (`gpuws cp`) never streams or benches, and importing the
# telemetry service (nvidia-smi parsers, the agent's wire format) was a tenth of its start-up.
if TYPE_CHECKING:
    from gpuws.app.cloud import InstanceResized, Reach, Reached
    from gpuws.app.hosts import HostLink, RetryPace
    from gpuws.app.resize import LayoutRun, MigApplied
    from gpuws.app.telemetry import TelemetryService
    from gpuws.app.tunnels import TunnelRequest
    from gpuws.core.bench.results import BenchRun
    from gpuws.core.idle import IdleEvent
    from gpuws.core.inventory import Inventory
    from gpuws.core.processes import GpuProcess
    from gpuws.core.resize.audit import AuditLog
    from gpuws.core.resize.journal import JournalEntry
    from gpuws.core.resize.migparted import GpuTarget
    from gpuws.core.resize.plan import Plan
    from gpuws.core.runner import CommandRunner
    from gpuws.core.session import HostCost, SessionLedger
    from gpuws.remote.bench import EventCallback
    from gpuws.remote.connection import HostConnection
    from gpuws.remote.provider_ops import PowerResult
    from gpuws.remote.resize import ProgressCallback
    from gpuws.remote.tunnels import Tunnel

log = logging.getLogger(__name__)

LIVE_STATES = frozenset({ConnectionState.CONNECTED, ConnectionState.NO_DRIVER})
# A cost session ends in these; a drop (RECONNECTING) or a key prompt keeps it running, as the
# instance keeps running (and billing) through them.
ENDED_STATES = frozenset({ConnectionState.DISCONNECTED, ConnectionState.UNREACHABLE,
                          ConnectionState.AUTH_FAILED, ConnectionState.HOST_KEY_CHANGED})
FRESH_TELEMETRY_S = 30.0  # older samples say nothing about whether a host is idle now
STALE_INTERVALS = 3  # a connected host with no sample for this many sample intervals is "stale"
_POWER_VERB = {"start": "Starting", "stop": "Stopping"}


def device_keys(inventory: Inventory) -> set[str]:
    """The telemetry keys of an inventory's devices: "0" for GPU 0, "0/mig1" for its MIG device 1."""
    from gpuws.core.telemetry.sample import gpu_key

    return {gpu_key(gpu.index, None) for gpu in inventory.gpus} | {
        gpu_key(gpu.index, device.index) for gpu in inventory.gpus for device in gpu.mig_devices}


class Connection(Protocol):
    """What the Workspace needs of a connection (a `HostConnection`, or a local stand-in)."""

    @property
    def runner(self) -> CommandRunner:
        """Runs commands on the host (a new runner after each reconnect)."""
        ...


class Rebindable(Protocol):
    """A tunnel: it forwards over whatever connection it is given (`gpuws.remote.tunnels.Tunnel`)."""

    @property
    def connection(self) -> object:
        """The connection it forwards over now (compared by identity only)."""
        ...

    def rebind(self, connection: Any) -> None:
        """Forward over `connection` from now on."""

    def sync_state(self) -> object:
        """Update its state from its connection's ("waiting for the SSH connection" while down)."""
        ...

    async def close(self) -> None:
        """Stop forwarding for good."""


class ShownTunnel(Protocol):
    """What a tunnel row shows of a tunnel (`gpuws.remote.tunnels.Tunnel`): its own state and error."""

    @property
    def state(self) -> TunnelState:
        """Where the tunnel itself stands (it knows nothing of a frozen host)."""
        ...

    @property
    def last_error(self) -> str:
        """Why it is waiting or failed ("" when nothing is wrong)."""
        ...


_TunnelT = TypeVar("_TunnelT", bound=Rebindable)


def _service(tunnel: object) -> tuple[str, int] | None:
    """The host-side address a tunnel forwards to (None for one that does not say)."""
    spec = getattr(tunnel, "spec", None)
    host, port = getattr(spec, "remote_host", None), getattr(spec, "remote_port", None)
    return (host, port) if isinstance(host, str) and isinstance(port, int) else None


TUNNEL_HOST_STALE = "no answer (host stale)"
# The Workspace follows a dropped host back in these; a tunnel it was not told about the host of
# (DISCONNECTED: opened over a connection of the caller's) shows the tunnel's own state.
_HOST_DOWN_STATES = frozenset({ConnectionState.RECONNECTING, ConnectionState.UNREACHABLE,
                               ConnectionState.CONNECTING})
TUNNEL_HOST_DOWN = "waiting for the host"


class Change(StrEnum):
    """What changed about a host (the listener's first argument)."""

    STATE = "state"
    CONNECTION = "connection"
    INVENTORY = "inventory"
    TUNNELS = "tunnels"
    REMOVED = "removed"
    COST = "cost"  # a ledger write for the host landed (read `costs` again)
    IDLE = "idle"  # the host's idle warning appeared or cleared (`idle.warnings`)
    POWER = "power"  # an instance start/stop began or ended (`HostRecord.power_status`)
    PRICE = "price"  # the host's price or slice changed (read `HostRecord.profile`)


Listener = Callable[[Change, str], None]  # (what changed, host name)
# How a tunnel's server is found or started again when its host comes back (as on first open):
# (the host's connection, the tunnel) -> what was done, in words ("" when nothing was needed).
Reopen = Callable[["Connection", Rebindable], Awaitable[str]]


@dataclass
class HostRecord:
    """Everything the Workspace knows about one host (read it; change it through the Workspace)."""

    profile: HostProfile
    state: ConnectionState = ConnectionState.DISCONNECTED
    detail: str = ""
    connection: Connection | None = None
    inventory: Inventory | None = None
    tunnels: list[Rebindable] = field(default_factory=list)
    metering: bool = False  # a cost session is open for it (begun by this Workspace)
    priced: tuple[float | None, str | None] | None = None  # (price, slice) the open session was last given
    power_status: str = ""  # the last instance start/stop's progress or result, one line
    cost_error: str = ""  # the last ledger write's failure ("" when it worked)
    link: HostLink | None = None  # who connects it and keeps it connected (gpuws.app.hosts)
    stale_s: float | None = None  # connected but no sample for this long (None: fresh, or not streaming)

    @property
    def live(self) -> bool:
        """Connected (with or without a driver) over a known connection."""
        return self.state in LIVE_STATES and self.connection is not None

    @property
    def status_text(self) -> str:
        """The state in words as every view shows it: "Stale (no data for 12 s)" over "Connected"."""
        if self.state is ConnectionState.CONNECTED and self.stale_s is not None:
            return f"Stale (no data for {self.stale_s:.0f} s)"
        return self.state.value.replace("_", " ").capitalize()

    @property
    def shown_state(self) -> tuple[ConnectionState, str]:
        """The one state the sidebar, the header and the tray show, from this one place: the state
        whose colour they take and the words when they say more than its label ("" otherwise).
        A stale host takes RECONNECTING's colour with "Stale (no data for N s)", never Connected's."""
        if self.state is ConnectionState.CONNECTED and self.stale_s is not None:
            return ConnectionState.RECONNECTING, self.status_text
        return self.state, ""


class Workspace:
    """Sessions by host name, with their connection state, telemetry feeds, tunnels, cost
    ledger and idle policy."""

    def __init__(
        self,
        spawn: Spawn,
        *,
        telemetry: TelemetryService | None = None,
        ledger: SessionLedger | None = None,
        post: Post | None = None,
        clock: Callable[[], float] = time.time,
        pace: RetryPace | None = None,
        stream: bool = True,
    ) -> None:
        self._spawn = spawn
        self._stream = stream  # feed telemetry while connected (a script that only copies a file does not)
        self._post: Post = post if post is not None else (lambda func: func())
        self._clock = clock
        self._telemetry = telemetry  # see `telemetry`
        self.costs = CostBook(ledger, on_written=self._ledger_written)
        self.idle = IdlePolicy()
        self._hosts: dict[str, HostRecord] = {}
        self._listeners: list[Listener] = []
        self._feeds: dict[str, tuple[concurrent.futures.Future[None], Connection]] = {}
        self._budget_stopped: set[str] = set()  # stopped at 100 % of a budget (once each)
        self._unlink: dict[str, Callable[[], None]] = {}
        self._down: set[str] = set()  # streamed, then dropped: its unreachable alert follows the reason
        self._streaming_since: dict[str, float] = {}  # when the current feed began (stale before a sample)
        self._reopen: dict[int, Reopen] = {}  # id(tunnel) -> how its server is found or started again
        self.pace: RetryPace | None = pace  # how links made here keep trying (None: the default)
        if telemetry is None and stream:  # the window's is made now; a command's on first use (a copy: never)
            self._telemetry = self._new_telemetry()

    @property
    def telemetry(self) -> TelemetryService:
        """The telemetry feed of every host (one service; made on first use, with every host's
        thresholds and price)."""
        if self._telemetry is None:
            self._telemetry = self._new_telemetry()
        return self._telemetry

    def _new_telemetry(self) -> TelemetryService:
        from gpuws.app.telemetry import TelemetryService

        service = TelemetryService()
        for record in self._hosts.values():
            service.configure(record.profile)
        return service

    @property
    def spawn(self) -> Spawn:
        """How this Workspace runs coroutines (on its owner's event loop)."""
        return self._spawn

    @property
    def post(self) -> Post:
        """How work comes back to the owner's thread."""
        return self._post

    # -- reading --------------------------------------------------------------------------------

    def hosts(self) -> list[str]:
        """The names of the hosts it knows, sorted."""
        return sorted(self._hosts)

    def host(self, name: str) -> HostRecord | None:
        """Host `name`'s record (connection, state, inventory, tunnels), or None when unknown."""
        return self._hosts.get(name)

    def state(self, name: str) -> ConnectionState:
        """Host `name`'s connection state (DISCONNECTED when unknown)."""
        record = self._hosts.get(name)
        return record.state if record is not None else ConnectionState.DISCONNECTED

    def streaming(self, name: str) -> bool:
        """Whether a telemetry task runs for `name` over its current connection."""
        feed = self._feeds.get(name)
        record = self._hosts.get(name)
        return (feed is not None and not feed[0].done() and record is not None
                and feed[1] is record.connection)

    # -- listening ------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(change, host)` on every change; returns the function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _notify(self, change: Change, host: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(change, host)
            except Exception:  # one broken view must not stop the others
                log.exception("workspace listener failed")

    # -- what the front ends report ---------------------------------------------------------------

    def add_host(self, profile: HostProfile) -> HostRecord:
        """Track `profile`'s host (an edited profile replaces the old one of that name)."""
        record = self._hosts.get(profile.name)
        if record is None:
            record = self._hosts[profile.name] = HostRecord(profile)
        else:
            record.profile = profile
        self._reprice(record)
        if self._telemetry is not None:  # else configured with every host when it is made
            self._telemetry.configure(profile)
        return record

    def remove_host(self, name: str) -> None:
        """Forget `name`: its stream stops, its cost session ends."""
        self._stop_feed(name)
        if (unlink := self._unlink.pop(name, None)) is not None:
            unlink()
        record = self._hosts.pop(name, None)
        if record is not None and record.metering:
            self.costs.end(name, self._clock())
        self.idle.forget(name)
        self._notify(Change.REMOVED, name)

    def connection_changed(self, name: str, connection: Connection | None) -> None:
        """`name` now talks through `connection` (None: closed). Tunnels and the feed follow it."""
        record = self._record(name)
        if record.connection is connection:
            return
        record.connection = connection
        if connection is not None:
            for tunnel in record.tunnels:
                tunnel.rebind(connection)
        self._follow(record)
        self._notify(Change.CONNECTION, name)

    def state_changed(self, name: str, state: ConnectionState, detail: str = "") -> None:
        """The connection of `name` is in `state` now (CONNECTED only once probed)."""
        record = self._record(name)
        back = state is ConnectionState.CONNECTED and record.state in _HOST_DOWN_STATES
        record.state, record.detail = state, detail
        if state is not ConnectionState.CONNECTED:
            record.stale_s = None  # only a connected host is stale; the state itself says the rest
        self._follow(record)
        self._meter(record)
        for tunnel in record.tunnels:
            tunnel.sync_state()  # "waiting for the SSH connection" while it is down, "listening" after
        if back and record.connection is not None:
            for tunnel in record.tunnels:  # "open" again only once the host side answers
                self._bring_back(name, record.connection, tunnel)
        self._notify(Change.STATE, name)

    def _bring_back(self, name: str, connection: Connection, tunnel: Rebindable) -> None:
        """The host came back: check the tunnel's host side answers, and where gpuws started its
        server (Jupyter, TensorBoard, the desktop) find or start it again, as on first open; the
        row says what was done (`note`), or why it failed."""
        reopen = self._reopen.get(id(tunnel))

        async def go() -> None:
            """Check (or reopen) on the loop; what it did reaches the row on the owner's thread."""
            note = ""
            try:
                if reopen is not None:
                    note = await reopen(connection, tunnel)
                else:
                    probe = getattr(tunnel, "probe", None)
                    if probe is not None:
                        await probe()
            except Exception as exc:  # the tunnel's own state says why (failed: nothing listening)
                log.info("tunnel to %s not back: %s", name, exc)
            def done() -> None:
                """Say what was done with the tunnel's state (its row reads `note`)."""
                if note and hasattr(tunnel, "note"):
                    tunnel.note = note
                self._notify(Change.TUNNELS, name)

            self._post(done)

        self._spawn(go())

    def price_changed(self, profile: HostProfile) -> None:
        """The host's hourly price (or slice) changed, e.g. by a verified resize that already saved
        the profile: the running cost session gets a new price segment, once, and every view hears
        PRICE in this same call (the advice strip, the Session tab, the alerts' idle cost)."""
        self.add_host(profile)  # reprices only what differs: a later report of the same profile writes nothing
        self._notify(Change.PRICE, profile.name)

    def inventory_changed(self, name: str, inventory: Inventory) -> None:
        """A (re-)probe read the host's GPUs: a changed layout restarts the feed."""
        record = self._record(name)
        changed = record.inventory is not None and record.inventory != inventory
        if changed and record.inventory is not None:
            # A device the new layout lacks clears its alerts (and lines) now, not when a sample
            # that will never come says so.
            gone = device_keys(record.inventory) - device_keys(inventory)
            if gone:
                self._spawn(self.telemetry.devices_gone(name, gone, self._clock()))
        record.inventory = inventory
        if changed and self.streaming(name):
            self._stop_feed(name)
        self._follow(record)
        self._notify(Change.INVENTORY, name)

    def add_tunnel(self, name: str, tunnel: _TunnelT, *, reopen: Reopen | None = None) -> _TunnelT:
        """Keep `tunnel` with its host: it is rebound whenever the host's connection is replaced.

        One tunnel per service on the host: when one to the same host-side address is kept and
        alive, `tunnel` is closed and the kept one returned (a desktop started again, or reused,
        has one tunnel, however often Start is clicked); a dead one (failed, closed) is replaced.
        `reopen` finds or starts its server again when the host comes back (`bring_back`)."""
        record = self._record(name)
        service = _service(tunnel)
        for kept in list(record.tunnels):
            if kept is tunnel:
                return tunnel
            if service is None or _service(kept) != service:
                continue
            if str(getattr(kept, "state", "")) in (TunnelState.FAILED, TunnelState.CLOSED):
                record.tunnels.remove(kept)
                self._spawn(kept.close())
                continue
            self._spawn(tunnel.close())
            if reopen is not None:
                self._reopen[id(kept)] = reopen
            return cast(_TunnelT, kept)  # a tunnel to the same service, kept through here: the same kind
        record.tunnels.append(tunnel)
        if reopen is not None:
            self._reopen[id(tunnel)] = reopen
        if record.connection is not None and tunnel.connection is not record.connection:
            tunnel.rebind(record.connection)
        self._notify(Change.TUNNELS, name)
        return tunnel

    def remove_tunnel(self, name: str, tunnel: Rebindable) -> None:
        """Forget one of the host's tunnels (it is not closed here)."""
        record = self._record(name)
        self._reopen.pop(id(tunnel), None)
        if tunnel in record.tunnels:
            record.tunnels.remove(tunnel)
            self._notify(Change.TUNNELS, name)

    # -- a host's life: the verbs (gpuws.app.hosts does the work) ----------------------------------

    def attach(self, link: HostLink) -> None:
        """Let `link` connect its host for this Workspace: everything it learns (connection, state,
        inventory) is taken from it here, so feeds, tunnels, cost and views follow. Idempotent."""
        record = self.add_host(link.profile)
        if record.link is link:
            return
        if self._unlink.get(link.name) is not None:
            self._unlink.pop(link.name)()
        record.link = link
        self._unlink[link.name] = link.subscribe(lambda: self._from_link(link))
        self._from_link(link)

    def link(self, name: str) -> HostLink:
        """The host's link, made on first use (the CLI's way in: the window attaches its own)."""
        record = self._record(name)
        if record.link is None:
            from gpuws.app.hosts import HostLink

            self.attach(HostLink(record.profile, self._spawn, self._post, pace=self.pace))
        assert record.link is not None
        return record.link

    def connect(self, name: str, *, accept_new: bool = False, known_host_key: str | None = None) -> None:
        """Connect `name` and probe it, then keep it connected until `close(name)`."""
        self.link(name).connect(accept_new=accept_new, known_host_key=known_host_key)

    def reconnect(self, name: str) -> None:
        """A new connection replaces the current one (Host > Reconnect)."""
        self.link(name).connect()

    def retry_now(self, name: str) -> None:
        """Try to reach the host at once instead of at the next slow-paced try."""
        self.link(name).retry_now()

    def probe(self, name: str) -> None:
        """Read the connected host's inventory again (its layout changed); views hear INVENTORY."""
        self.link(name).reprobe()

    def _from_link(self, link: HostLink) -> None:
        record = self._hosts.get(link.name)
        if record is None or record.link is not link:
            return
        # The connection object is kept through drops and slow retries (tunnels stay bound to it);
        # only a new connect or a close replaces it.
        self.connection_changed(link.name, link.connection)
        if (record.state, record.detail) != (link.state, link.detail):
            self.state_changed(link.name, link.state, link.detail)
        if link.inventory is not None and link.inventory is not record.inventory:
            self.inventory_changed(link.name, link.inventory)

    def open_tunnel(self, name: str, request: TunnelRequest, *,
                    connection: Connection | None = None) -> concurrent.futures.Future[Tunnel]:
        """Open a tunnel to the host (`gpuws.app.tunnels.open_tunnel`) over its live connection (or
        `connection`) and keep it with the host, rebound on reconnects. The future is settled on
        the owner's thread: the tunnel (kept here by then; listeners heard TUNNELS), or the error."""
        from gpuws.app.tunnels import open_tunnel
        from gpuws.remote.connection import NotConnected

        record = self._record(name)
        if connection is None:
            connection = record.connection if record.live else None
        if connection is None:
            raise NotConnected(f"{name} is not connected")
        result: concurrent.futures.Future[Tunnel] = concurrent.futures.Future()

        async def go() -> None:
            try:
                tunnel = await open_tunnel(connection, request)
            except Exception as exc:
                self._post(lambda error=exc: result.set_exception(error))  # type: ignore[misc]
                return

            async def reopen(conn: Connection, shown: Rebindable) -> str:
                """Find or start the tunnel's server again, as `request` did on first open."""
                from gpuws.app.tunnels import bring_back

                return await bring_back(cast("HostConnection", conn), cast("Tunnel", shown), request)

            def keep() -> None:
                result.set_result(self.add_tunnel(name, tunnel, reopen=reopen) if name in self._hosts else tunnel)

            self._post(keep)

        self._spawn(go())
        return result

    def close_tunnel(self, name: str, tunnel: Rebindable) -> concurrent.futures.Future[None]:
        """Close one of the host's tunnels and forget it."""
        self.remove_tunnel(name, tunnel)

        async def go() -> None:
            await tunnel.close()

        return self._spawn(go())

    def tunnel_text(self, name: str, tunnel: ShownTunnel) -> str:
        """What a tunnel row says: the tunnel's own state, unless its host says otherwise. A tunnel
        that reached its service says "open" only while data flows: a stale host (frozen, no
        sample for three intervals) shows "no answer (host stale)", a host that is down or
        reconnecting "waiting for the host"; "open" again the moment samples arrive."""
        state, error = tunnel.state, tunnel.last_error
        record = self._hosts.get(name)
        if record is not None and state in (TunnelState.OPEN, TunnelState.LISTENING, TunnelState.WAITING):
            if record.state in _HOST_DOWN_STATES:
                # Said once for every tunnel (the host's own line says why); the tunnel's connection
                # may not have noticed the drop yet.
                return TUNNEL_HOST_DOWN
            if record.stale_s is not None and state is not TunnelState.WAITING:
                return TUNNEL_HOST_STALE
        note = getattr(tunnel, "note", "") if state is TunnelState.OPEN else ""
        return str(state) + (f" — {error}" if error else f" — {note}" if note else "")

    # -- work on a host: thin verbs over the one implementation of each --------------------------

    def runner(self, name: str, runner: CommandRunner | None = None) -> CommandRunner:
        """The runner of `name`'s live connection (or `runner`, a caller's own); NotConnected when
        the host is not connected."""
        from gpuws.remote.connection import NotConnected

        record = self._record(name)
        if runner is not None:
            return runner
        if record.live and record.connection is not None:
            return record.connection.runner
        raise NotConnected(f"{name} is not connected")

    def bench(self, name: str, mode: str = "quick", *, runner: CommandRunner | None = None,
              expected: Mapping[str, object] | None = None, on_event: EventCallback | None = None,
              timeout: float | None = None, extra_args: tuple[str, ...] = (),
              python: str = "python3") -> Coroutine[object, object, BenchRun]:
        """Benchmark host `name` (`gpuws.app.bench.run_benchmark` over its runner, taken now, on
        the owner's thread): returns the run's coroutine for the caller to await on the owner's
        event loop, so it can cancel it (the runner then stops the remote job). Keep the finished
        run with `gpuws.app.bench.keep_run`. NotConnected at once when the host is not connected."""
        from gpuws.app.bench import run_benchmark

        return run_benchmark(self.runner(name, runner), mode, host=name, expected=expected, on_event=on_event,
                             timeout=timeout, extra_args=extra_args, python=python)

    def stop_process(self, name: str, process: GpuProcess, signal_name: str = "TERM", *,
                     runner: CommandRunner | None = None) -> Coroutine[object, object, bool]:
        """Send a GPU process on host `name` SIGTERM (or SIGKILL) after checking it is still the
        same program (`gpuws.remote.processes.stop_process`): returns the coroutine, True once the
        process is gone, False while it still runs; ProcessError when it cannot be signalled."""
        from gpuws.remote.processes import stop_process

        return stop_process(self.runner(name, runner), process, signal_name)

    # -- GPU layout: every path ends in app/resize's after-verify step, then in `layout_changed` --

    def resize(self, name: str, plan: Plan, *, stop_processes: bool, progress: ProgressCallback | None = None,
               audit: AuditLog | None = None, target_text: str | None = None, via: str = "resize",
               runner: CommandRunner | None = None) -> Coroutine[object, object, MigApplied]:
        """Apply the MIG `plan` the user confirmed on host `name` (`gpuws.app.resize.apply_mig`:
        re-plan check, run, verify or roll back, after-verify); the returned coroutine is the
        caller's to await on the owner's loop. NotConnected at once when the host is not connected."""
        from gpuws.app.resize import apply_mig

        return apply_mig(self.runner(name, runner), self._record(name).profile, plan, stop_processes=stop_processes,
                         progress=progress, audit=audit, target_text=target_text, via=via,
                         on_changed=self._layout_hook(name))

    def apply_mig_config(self, name: str, config: str, targets: list[GpuTarget], *, stop_processes: bool,
                         progress: ProgressCallback | None = None, audit: AuditLog | None = None,
                         runner: CommandRunner | None = None) -> Coroutine[object, object, LayoutRun]:
        """Apply a mig-parted config's `targets` on host `name` (`gpuws.app.resize.apply_mig_config`),
        each changed GPU through the after-verify step."""
        from gpuws.app.resize import apply_mig_config

        return apply_mig_config(self.runner(name, runner), self._record(name).profile, config, targets,
                                stop_processes=stop_processes, progress=progress, audit=audit,
                                on_changed=self._layout_hook(name))

    def recover(self, name: str, entry: JournalEntry, *, audit: AuditLog,
                progress: ProgressCallback | None = None, stop_processes: bool = False,
                runner: CommandRunner | None = None) -> Coroutine[object, object, LayoutRun]:
        """Finish the interrupted layout change `entry` on host `name` (`gpuws.app.resize.recover_mig`),
        the GPUs a killed `mig-parted apply` had still to do included."""
        from gpuws.app.resize import recover_mig

        return recover_mig(self.runner(name, runner), self._record(name).profile, entry, progress=progress,
                           audit=audit, stop_processes=stop_processes, on_changed=self._layout_hook(name))

    def resize_instance(self, name: str, target: str, *, progress: ProgressCallback | None = None,
                        audit: AuditLog | None = None, via: str = "resize", reach: Reach | None = None,
                        connection_options: Mapping[str, object] | None = None,
                        ) -> Coroutine[object, object, InstanceResized]:
        """Change host `name`'s instance type to `target` through its provider (`gpuws.app.cloud`:
        stop, modify, start, the address read back, SSH, probe, the GPU verified, or the old type
        back); the new type, price and address reach every view in one `layout_changed`.
        `reach` (default: `wait_for_ssh` with `connection_options`) waits for the started host."""
        from gpuws.app.cloud import resize_instance

        profile = self._record(name).profile
        return self._then_reach(name, resize_instance(
            profile, target, reach=reach or self._reach(connection_options), progress=progress, audit=audit,
            via=via, on_changed=self._layout_hook(name)))

    def recover_instance(self, name: str, entry: JournalEntry, *, audit: AuditLog | None = None,
                         progress: ProgressCallback | None = None, reach: Reach | None = None,
                         connection_options: Mapping[str, object] | None = None,
                         ) -> Coroutine[object, object, InstanceResized]:
        """Finish the interrupted instance type change `entry` on host `name` (`gpuws.app.cloud.
        recover_instance`: complete the target, or the previous type back), as `resize_instance`."""
        from gpuws.app.cloud import recover_instance

        profile = self._record(name).profile
        return self._then_reach(name, recover_instance(
            profile, entry, reach=reach or self._reach(connection_options), progress=progress, audit=audit,
            on_changed=self._layout_hook(name)))

    @staticmethod
    def _reach(connection_options: Mapping[str, object] | None) -> Reach:
        from gpuws.app.cloud import wait_for_ssh

        def reach(profile: HostProfile) -> Coroutine[object, object, Reached]:
            """Wait for SSH at the address read back, then probe."""
            return wait_for_ssh(profile, connection_options=connection_options)

        return reach

    async def _then_reach(self, name: str, work: Coroutine[object, object, InstanceResized]) -> InstanceResized:
        """Run an instance change, then let an open host that the stop dropped try again at once."""
        try:
            return await work
        finally:
            self._post(lambda: self._retry_if_down(name))

    def _retry_if_down(self, name: str) -> None:
        record = self._hosts.get(name)
        if record is not None and record.link is not None and record.link.open and not record.live:
            record.link.retry_now()

    def layout_changed(self, profile: HostProfile) -> None:
        """A verified layout change saved `profile` (slice and price; a cloud host's type and the
        address it has now): every view hears the new price in this one event, and a re-probe of a
        linked host refreshes the inventory, which clears the alerts of devices that are gone and
        restarts the stream on the new ones. A new address makes an open host connect there."""
        record = self._hosts.get(profile.name)
        moved = record is not None and (record.profile.host, record.profile.port) != (profile.host, profile.port)
        self.price_changed(profile)
        if record is not None and record.link is not None and moved:
            record.link.profile = profile
            if record.link.open:
                record.link.connect()  # the old address is gone: a new connection, tunnels rebound
            return
        # A command's Workspace (no telemetry of its own) has nothing to refresh: it prints and exits.
        if self._stream and record is not None and record.link is not None:
            self.probe(profile.name)

    def _layout_hook(self, name: str) -> Callable[[HostProfile], None]:
        """The after-verify hook of a layout change run on the loop thread: `layout_changed` on the
        owner's thread."""
        def changed(profile: HostProfile) -> None:
            """Hand the saved profile to the owner's thread."""
            self._post(lambda: self.layout_changed(profile))

        return changed

    # -- staleness --------------------------------------------------------------------------------

    def check_stale(self, now: float | None = None) -> list[str]:
        """Mark each connected host with no sample for `STALE_INTERVALS` sample intervals as stale
        (`HostRecord.stale_s`, `status_text`), and fresh again once samples arrive; listeners hear
        STATE. Returns the stale hosts. Call it about once a second (the window's clock): it also
        ticks each link's countdown ("trying again in 42 s"), so every countdown shown counts."""
        now = self._clock() if now is None else now
        for record in list(self._hosts.values()):
            if record.link is not None:
                record.link.tick()
        store = self.telemetry.store
        limit = STALE_INTERVALS / max(self.telemetry.hz, 1e-6)
        stale: list[str] = []
        for name, record in list(self._hosts.items()):
            age: float | None = None
            if record.state is ConnectionState.CONNECTED and self.streaming(name):
                last = store.status(name).last_t
                began = self._streaming_since.get(name)
                # A stream that began after the last sample (a reconnect) is as old as it is, never
                # as old as the sample before the drop: "Stale (no data for 56 s)" beside a new one.
                known = [t for t in (last, began) if t is not None]
                since = max(known) if known else None
                if since is not None and now - since > limit:
                    age = now - since
            shown = None if record.stale_s is None else round(record.stale_s)
            record.stale_s = age
            if age is not None:
                stale.append(name)
                if record.stale_s is not None and shown is None:
                    store.mark_offline(name, now)  # the readouts grey out: the last values are not now
            if (None if age is None else round(age)) != shown:
                self._notify(Change.STATE, name)
        return stale

    def shutdown(self) -> None:
        """Stop every feed (the app is closing)."""
        for name in list(self._feeds):
            self._stop_feed(name)

    def close(self, name: str | None = None, timeout: float = 3.0) -> concurrent.futures.Future[None] | None:
        """Close host `name` for good (its connection; its feed stops, its cost session ends);
        returns the close's future. Without a name, at exit: stop every feed and end every open
        cost session (no billing while gpuws is closed), waiting at most `timeout` s for the ledger."""
        if name is not None:
            record = self._record(name)
            if record.link is not None:
                return record.link.close()
            self.connection_changed(name, None)
            self.state_changed(name, ConnectionState.DISCONNECTED)
            return None
        self.shutdown()
        metered = [name for name, record in self._hosts.items() if record.metering]
        for name in metered:
            self._hosts[name].metering = False
        self.costs.close(metered, self._clock(), timeout)
        return None

    # -- cost -------------------------------------------------------------------------------------

    def _meter(self, record: HostRecord) -> None:
        """Cost runs while the host is connected: a session begins on connect and ends on close."""
        name = record.profile.name
        if record.state in LIVE_STATES and not record.metering:
            record.metering = True
            record.priced = (record.profile.price_per_hour, record.profile.slice_profile)
            self.costs.begin(record.profile, self._clock())
        elif record.state in ENDED_STATES and record.metering:
            record.metering = False
            self.costs.end(name, self._clock())

    def _reprice(self, record: HostRecord) -> None:
        # Compared with what the session was given, not with the record's old profile: the
        # window's resize changes the profile object in place before it reports the new price.
        priced = (record.profile.price_per_hour, record.profile.slice_profile)
        if record.metering and record.priced != priced:
            record.priced = priced
            self.costs.reprice(record.profile, self._clock())  # the running session costs this from now

    def _ledger_written(self, host: str, error: BaseException | None) -> None:
        # The ledger's writer thread: hop to the owner's before touching records or listeners.
        def deliver() -> None:
            record = self._hosts.get(host)
            if record is not None:
                record.cost_error = str(error) if error is not None else ""
            self._notify(Change.COST, host)

        self._post(deliver)

    def cost_report(self, profiles: Sequence[HostProfile], now: float) -> dict[str, HostCost]:
        """Each host's cost figures, read from the ledger on disk (call it off the GUI thread)."""
        from gpuws.core.session import host_cost

        history = self.costs.ledger.all_sessions()
        return {p.name: host_cost(p, history, now) for p in profiles}

    def enforce_budget(self, cost: HostCost) -> bool:
        """Stop the host's instance when its profile asks to at 100 % of a budget and the host is
        connected: once per host (the user may start it again on purpose). True when a stop was
        asked for now."""
        record = self._hosts.get(cost.host)
        # Only a metered host (connected: its instance runs and bills) is stopped.
        if (record is None or not record.metering or not cost.stop_at_budget
                or cost.worst_budget().level != "exceeded" or cost.host in self._budget_stopped):
            return False
        self._budget_stopped.add(cost.host)
        self._try_power(record, "stop")
        return True

    def budget_changed(self, name: str) -> None:
        """The host's budgets were edited: a budget stop may happen again."""
        self._budget_stopped.discard(name)

    # -- idle policy and instance power -------------------------------------------------------------

    def check_idle(self, now: float | None = None) -> list[IdleEvent]:
        """Feed each connected host's fresh telemetry to the idle policy; for a host idle past its
        minutes, return the warning and stop its instance if its settings ask to."""
        now = self._clock() if now is None else now
        events: list[IdleEvent] = []
        store = self.telemetry.store
        for name, record in list(self._hosts.items()):
            if record.state is not ConnectionState.CONNECTED:
                continue
            latest = store.latest(name)
            # Only fresh telemetry counts: a stream that stopped must never look like an idle host.
            if not latest or not store.status(name).online or any(
                    now - sample.t >= FRESH_TELEMETRY_S for sample in latest.values()):
                continue
            before = self.idle.warnings.get(name)
            in_use = any(bool(getattr(t, "in_use", False)) for t in record.tunnels)
            event = self.idle.feed(record.profile, now, [gpu_activity(s) for s in latest.values()], in_use)
            if event is not None:
                events.append(event)
                if self.idle.settings(name).stop:
                    self._try_power(record, "stop")
            if self.idle.warnings.get(name) != before:
                self._notify(Change.IDLE, name)
        return events

    def run_power(self, name: str, action: str, *, pre_stop: Sequence[str] | None = None,
                  host_runner: CommandRunner | None = None,
                  progress: Callable[[str], None] | None = None) -> Coroutine[object, object, PowerResult]:
        """Start or stop host `name`'s instance through its provider, as a coroutine for the caller's
        loop (`gpuws start`/`stop`; `power` runs it for the window). A start where the provider can
        describe the instance reads its address back, and a new one is saved and reaches every view
        (`layout_changed`, which connects an open host there). GpuwsError at once for what has no
        provider command."""
        from gpuws.app.cloud import can_describe, start_instance
        from gpuws.app.power import power, power_plan

        profile = self._record(name).profile
        power_plan(profile, action)
        if action == "start" and can_describe(profile):
            return start_instance(profile, progress=progress, on_changed=self._layout_hook(name))
        return power(profile, action, pre_stop=pre_stop, host_runner=host_runner, progress=progress)

    def power(self, name: str, action: str, *, pre_stop: str | None = None) -> concurrent.futures.Future[None]:
        """Start or stop the host's instance through its provider (`run_power`); for a stop,
        `pre_stop` (default: the host's idle setting) runs on the host first. Refuses at once
        (GpuwsError) what has no provider command or a pre-stop line that cannot be split;
        progress and the result land in `power_status` (Change.POWER)."""
        from gpuws.app.power import parse_pre_stop

        record = self._record(name)
        text = self.idle.settings(name).pre_stop if pre_stop is None else pre_stop
        argv = parse_pre_stop(text.strip()) if action == "stop" else None
        connection = record.connection
        host_runner = connection.runner if connection is not None else None
        work = self.run_power(name, action, pre_stop=argv, host_runner=host_runner)
        self._set_power_status(name, f"{_POWER_VERB.get(action, action)} {name}…")

        async def go() -> None:
            try:
                result = await work
                status = f"{name}: {action} done" if result.ok else (result.error or f"{name}: {action} failed")
                if result.ok and result.address_after and result.address_after != result.address_before:
                    status += f"; its address is now {result.address_after}"
            except GpuwsError as exc:
                status = str(exc)
            self._post(lambda: self._set_power_status(name, status))

        return self._spawn(go())

    def start(self, name: str) -> concurrent.futures.Future[None]:
        """Start the host's instance through its provider (see `power`)."""
        return self.power(name, "start")

    def stop(self, name: str, *, pre_stop: str | None = None) -> concurrent.futures.Future[None]:
        """Stop the host's instance through its provider, `pre_stop` first (see `power`)."""
        return self.power(name, "stop", pre_stop=pre_stop)

    def _try_power(self, record: HostRecord, action: str) -> None:
        try:
            self.power(record.profile.name, action)
        except GpuwsError as exc:  # no provider command, a bad pre-stop line: say so where it shows
            self._set_power_status(record.profile.name, str(exc))

    def _set_power_status(self, name: str, status: str) -> None:
        record = self._hosts.get(name)
        if record is not None:
            record.power_status = status
            self._notify(Change.POWER, name)

    # -- following the connection -----------------------------------------------------------------

    def _record(self, name: str) -> HostRecord:
        record = self._hosts.get(name)
        if record is None:
            raise KeyError(f"host {name!r} is not in the workspace")
        return record

    def _follow(self, record: HostRecord) -> None:
        """Stream while the host is live, over its current connection; stop when it is closed."""
        name = record.profile.name
        feed = self._feeds.get(name)
        if feed is not None and (feed[1] is not record.connection or record.connection is None):
            self._stop_feed(name)  # replaced or closed: the old task streams over a dead connection
            feed = None
        if record.state is not ConnectionState.CONNECTED:
            # Dropped, closed, or waiting for the host: the stream stops here (the gap shows, the
            # unreachable alert says why in words) and starts afresh the moment the host is back.
            streamed = name in self._feeds or name in self._down
            self._stop_feed(name)
            if streamed and record.state not in (ConnectionState.DISCONNECTED, ConnectionState.CONNECTING):
                # The alert says why in words, and keeps saying the latest reason while it is down.
                self._down.add(name)
                why = record.link.error.reason if record.link is not None and record.link.error else ""
                self._spawn(self.telemetry.host_down(name, self._clock(), why or "connection lost"))
            else:
                self._down.discard(name)
            return
        self._down.discard(name)
        if self._stream and record.live and (feed is None or feed[0].done()):
            connection = record.connection
            assert connection is not None

            def runner() -> CommandRunner:
                return connection.runner

            future = self._spawn(self.telemetry.watch(record.profile, runner))
            self._feeds[name] = (future, connection)
            self._streaming_since[name] = self._clock()

    def _stop_feed(self, name: str) -> None:
        feed = self._feeds.pop(name, None)
        if feed is not None:
            feed[0].cancel()
