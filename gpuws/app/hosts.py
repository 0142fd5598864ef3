"""One host's life, Qt-free: connect and probe, keep it connected, and say where it stands.

A `HostLink` is the one connect-and-probe of gpuws. It makes the host's connection, connects it,
reads the inventory, and then keeps the host reachable for as long as it is open: the connection
reconnects by itself a few times fast (`HostConnection`'s own backoff); when those attempts are
spent the link keeps trying at a slow pace (`RetryPace.slow_s`, once a minute by default) and
`retry_now` tries at once. It never gives up while open; only an error that waiting cannot fix
(a refused login, a changed host key) stops it, and then the front end is asked.

What a failure means comes from the one error table (`gpuws.app.errors`): the state, and the
reason in words ("connection refused on port 22"); the error class only in `details`.

A host-key question goes to the front end through the typed `on_host_key(HostKeyRequest)`
callback; it answers by connecting again (`connect(accept_new=...)` or `known_host_key=`).

Threads: public methods are called on the owner's thread; the work runs through `spawn` on the
event loop, and every report comes back through `post` on the owner's thread, where listeners
are called. Results of an older `connect()` are dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gpuws.app.errors import Classified, classify
from gpuws.core.inventory import Inventory
from gpuws.core.models import HostProfile
from gpuws.core.runner import CommandRunner
from gpuws.core.states import ConnectionState, Countdown, Detail

if TYPE_CHECKING:
    from gpuws.remote.auth import KbdintPrompt as KbdintPrompt  # re-exported for the window

log = logging.getLogger(__name__)



class LinkConnection(Protocol):
    """What a link needs of a connection (a `HostConnection`, or a stand-in such as a local runner)."""

    @property
    def runner(self) -> CommandRunner:
        """Runs commands on the host."""
        ...

    async def connect(self) -> None:
        """Connect (and authenticate); raises what went wrong."""

    async def close(self) -> None:
        """Close for good."""


@runtime_checkable
class Reconnecting(Protocol):
    """A connection that rides through drops itself and says where it stands (`HostConnection`);
    a stand-in without states never drops."""

    @property
    def state(self) -> ConnectionState:
        """Where the connection stands now."""
        ...


# What runs a coroutine on the event loop (it returns nothing) and what runs a function on the
# owner's thread soon; the Workspace and its links share them.
Spawn = Callable[[Coroutine[Any, Any, None]], "concurrent.futures.Future[None]"]
Post = Callable[[Callable[[], None]], None]
ConnectionFactory = Callable[..., LinkConnection]  # (profile, **options) -> a connection

# The states that need the user, or wait for the host: the detail line says why.
FAILED_STATES = frozenset({ConnectionState.AUTH_FAILED, ConnectionState.HOST_KEY_CHANGED,
                           ConnectionState.HOST_KEY_UNKNOWN, ConnectionState.UNREACHABLE, ConnectionState.NO_DRIVER})
NO_DRIVER_TEXT = "No NVIDIA driver found on this host (nvidia-smi is missing)."


@dataclass(frozen=True)
class RetryPace:
    """How a link keeps trying: `fast` connects first (the connection's own backoff covers drops),
    then one try every `slow_s` seconds for as long as the host is open."""

    fast: int = 3
    fast_delay_s: float = 5.0
    slow_s: float = 60.0

    def delay(self, failures: int) -> float:
        """Seconds before the next try after `failures` failed tries in a row."""
        return self.fast_delay_s if failures <= self.fast else self.slow_s


@dataclass(frozen=True)
class HostKeyRequest:
    """A question for the user: trust this host key? (`changed`: it differs from the recorded one,
    which is refused; the front end shows both fingerprints and can only explain.)"""

    host: str  # the profile name
    error: BaseException  # the UnknownHostKey / HostKeyChanged error (host, port, key, fingerprints)
    changed: bool

    @property
    def key(self) -> object | None:
        """The key the host offered (None when only accept-new can trust it)."""
        return getattr(self.error, "key", None)


class HostKeyCallback(Protocol):
    """Where a link sends a host-key question (the window shows a dialog; the CLI asks on a TTY)."""

    def __call__(self, request: HostKeyRequest) -> None: ...


class HostLink:
    """The live state of one host: its connection, state, reason, inventory; kept up while open."""

    def __init__(
        self,
        profile: HostProfile,
        spawn: Spawn,
        post: Post,
        *,
        factory: ConnectionFactory | None = None,
        password: str | None = None,
        known_host_key: str | None = None,
        pace: RetryPace | None = None,
        connection_options: Mapping[str, object] | None = None,
        probe: bool = True,
        fail_first: bool = False,
    ) -> None:
        self.profile = profile
        self._spawn = spawn
        self._post = post
        self._factory = factory
        self._password = password  # in memory (the demo host); saved hosts read the keyring
        self._known_host_key = known_host_key
        self.pace = pace or RetryPace()
        self.connection_options: dict[str, object] = dict(connection_options or {})
        self._probe = probe  # read the inventory after each connect (a command that only copies need not)
        # A script's first connect that fails ends it with the error (its exit status says why);
        # the window keeps trying instead.
        self._fail_first = fail_first
        self.failure: BaseException | None = None  # the error that stopped it for good (None: going on)
        self.on_host_key: HostKeyCallback | None = None
        self.kbdint_prompt: KbdintPrompt | None = None
        self._token = 0  # results of an older connect() are ignored
        self._task: concurrent.futures.Future[None] | None = None
        self._wake: asyncio.Event | None = None  # set on the loop: "try now"
        self._listeners: list[Callable[[], None]] = []
        self.connection: LinkConnection | None = None  # the connection object (kept through drops; None when closed)
        self.state = ConnectionState.DISCONNECTED
        self._detail: Detail = ""  # one line for people: the reason in words, and what happens next
        self.error: Classified | None = None  # the last failure, classified (class name for details)
        self.inventory: Inventory | None = None
        self.host_key_error: BaseException | None = None

    @property
    def detail(self) -> str:
        """One line for people: the reason in words and what happens next, with the seconds left
        of a wait as they are now ("trying again in 42 s")."""
        return str(self._detail)

    @property
    def counting(self) -> bool:
        """Whether the detail counts down (a view reading it again shows a new text)."""
        return isinstance(self._detail, Countdown)

    def tick(self) -> None:
        """Tell the listeners again while the detail counts down (the window's one-second clock,
        through `Workspace.check_stale`), so every countdown shown counts."""
        if self.counting:
            self._notify()

    @property
    def name(self) -> str:
        """The host's profile name."""
        return self.profile.name

    @property
    def simulated_password(self) -> str | None:
        """The demo host's throwaway password; None for real hosts."""
        return self._password if self.profile.simulated else None

    @property
    def live_connection(self) -> LinkConnection | None:
        """The connection while the host is connected (with a driver), else None."""
        return self.connection if self.state is ConnectionState.CONNECTED else None

    @property
    def open(self) -> bool:
        """Whether the user keeps this host open (a connect not followed by a close)."""
        return self.connection is not None

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener()` on the owner's thread after every change; returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # -- verbs (owner's thread) ---------------------------------------------------------------------

    def connect(self, *, accept_new: bool = False, known_host_key: str | None = None) -> None:
        """(Re)connect and probe, then keep the host connected until `close`. `accept_new` trusts
        and remembers an unknown key; `known_host_key` trusts one key for this session only."""
        if known_host_key is not None:
            self._known_host_key = known_host_key
        self._token += 1
        token = self._token
        old, old_task = self.connection, self._task
        self.connection = None
        self.host_key_error = None
        self.error = None
        self.failure = None
        self._set(ConnectionState.CONNECTING, "")
        try:
            connection = self._make_connection(accept_new, token)
        except Exception as exc:  # a profile the connection refuses (a bad jump chain...)
            self._failed(token, exc)
            return
        self.connection = connection
        self._notify()
        if old_task is not None:
            old_task.cancel()
        self._task = self._spawn(self._life(token, connection, old))

    def retry_now(self) -> None:
        """Try at once instead of waiting for the next slow-paced try."""
        if self.connection is None:
            self.connect()
            return

        async def wake() -> None:
            if self._wake is not None:
                self._wake.set()

        self._spawn(wake())

    def reprobe(self) -> None:
        """Read the connected host's inventory again (its GPU layout changed)."""
        connection = self.live_connection
        if connection is None:
            return
        token = self._token

        async def again() -> None:
            from gpuws.remote.probe import probe

            try:
                inventory = await probe(connection.runner)
            except Exception as exc:
                log.info("re-probe of %s failed: %s", self.name, exc)
                return
            self._post(lambda: self._probed_again(token, connection, inventory))

        self._spawn(again())

    def close(self) -> concurrent.futures.Future[None] | None:
        """Close the connection for good (returns the close's future, or None: nothing to close)."""
        self._token += 1
        connection, self.connection = self.connection, None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        self._set(ConnectionState.DISCONNECTED, "")
        if connection is None:
            return None
        return self._spawn(connection.close())

    # -- the loop (event loop thread) -----------------------------------------------------------------

    async def _life(self, token: int, connection: LinkConnection, old: LinkConnection | None) -> None:
        from gpuws.remote.probe import probe

        if old is not None:
            with contextlib.suppress(Exception):  # a dead old connection must not stop the new one
                await old.close()
        self._wake = asyncio.Event()
        failures = 0
        connected_once = False
        while True:
            try:
                await connection.connect()
                inventory: Inventory | None = await probe(connection.runner) if self._probe else None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                classified = classify(exc)
                if not classified.kind.retry or (self._fail_first and not connected_once):
                    self._post(lambda exc=exc: self._failed(token, exc))  # type: ignore[misc]
                    return
                failures += 1
                delay = self.pace.delay(failures)
                self._post(lambda c=classified, d=delay: self._waiting(token, c, d))  # type: ignore[misc]
                await self._pause(delay)
                continue
            failures = 0
            connected_once = True
            if inventory is not None and not inventory.host.driver_found and hasattr(connection, "note_no_driver"):
                connection.note_no_driver(NO_DRIVER_TEXT)
            self._post(lambda inv=inventory: self._probed(token, connection, inv))  # type: ignore[misc]
            if not isinstance(connection, Reconnecting):
                return  # a stand-in without states (a local runner) never drops: nothing to keep up
            # Connected: the connection rides through drops itself (its fast retries); once those are
            # spent (or a fatal error ends them) this loop takes over again.
            failure = await self._until_given_up(connection)
            if failure is not None and not classify(failure).kind.retry:
                self._post(lambda exc=failure: self._failed(token, exc))  # type: ignore[misc]
                return
            # Its fast retries are spent: one more try now (its error says why, in words), then on
            # at the slow pace.
            failures = self.pace.fast

    async def _pause(self, seconds: float) -> None:
        wake = self._wake
        assert wake is not None
        wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), seconds)

    async def _until_given_up(self, connection: Reconnecting) -> BaseException | None:
        """Wait until the connection's own reconnects stop for good; returns why (if it knows)."""
        gone = (ConnectionState.UNREACHABLE, ConnectionState.AUTH_FAILED, ConnectionState.HOST_KEY_CHANGED,
                ConnectionState.HOST_KEY_UNKNOWN, ConnectionState.DISCONNECTED)
        while connection.state not in gone:
            await asyncio.sleep(0.25)
        failure: BaseException | None = getattr(connection, "failure", None)
        return failure

    # -- reports (owner's thread) --------------------------------------------------------------------

    def _make_connection(self, accept_new: bool, token: int) -> LinkConnection:
        def on_state(state: ConnectionState | str, detail: Detail = "", *_: object) -> None:
            value = ConnectionState(state)  # the connection's enum (or its value, from a stand-in)
            kept = detail if isinstance(detail, Countdown) else str(detail)  # a countdown keeps counting
            self._post(lambda: self._on_state(token, value, kept))

        factory = self._factory or _default_factory()
        kwargs: dict[str, object] = {"accept_new": accept_new}
        if self._factory is None and not self.profile.simulated:
            kwargs.update(_stores())
        kwargs.update(self.connection_options)  # the caller's stores, prompts, policies win
        theirs = kwargs.pop("on_state", None)
        if callable(theirs):  # a script's own progress lines ("reconnecting...") too
            def both(state: ConnectionState | str, detail: Detail = "", *rest: object) -> None:
                on_state(state, detail)
                theirs(state, detail)

            kwargs["on_state"] = both
        else:
            kwargs["on_state"] = on_state
        if self.kbdint_prompt is not None:
            kwargs["kbdint_prompt"] = self.kbdint_prompt
        if self._password is not None:
            kwargs["password"] = self._password
        if self._known_host_key is not None:
            kwargs["known_host_key"] = self._known_host_key
        return factory(self.profile, **kwargs)

    async def ready(self) -> LinkConnection:
        """Wait (on the owner's event loop: a script's) until the host is connected and return
        the connection, or raise the error that stopped the link."""
        changed = asyncio.Event()
        unsubscribe = self.subscribe(changed.set)
        try:
            while True:
                if self.failure is not None:
                    raise self.failure
                if self.state in (ConnectionState.CONNECTED, ConnectionState.NO_DRIVER) and self.connection:
                    return self.connection
                if self.connection is None and self.state is ConnectionState.DISCONNECTED:
                    from gpuws.remote.connection import NotConnected

                    raise NotConnected(f"{self.name} was closed")
                changed.clear()
                await changed.wait()
        finally:
            unsubscribe()

    def _on_state(self, token: int, state: ConnectionState, detail: Detail) -> None:
        # Only the fast reconnect's steps are passed on: connects, probes and failures are this
        # link's to report (the probe decides between "connected" and "no driver").
        if token != self._token:
            return
        if state is ConnectionState.RECONNECTING:
            self._set(state, detail)
        elif state is ConnectionState.CONNECTED and self.state is ConnectionState.RECONNECTING:
            self.error = None
            self._set(state, "")

    def _probed(self, token: int, connection: LinkConnection, inventory: Inventory | None) -> None:
        if token != self._token:
            return
        self.inventory = inventory if inventory is not None else self.inventory
        self.error = None
        if inventory is None or inventory.host.driver_found:
            self._set(ConnectionState.CONNECTED, "")
        else:
            self._set(ConnectionState.NO_DRIVER, NO_DRIVER_TEXT)

    def _probed_again(self, token: int, connection: LinkConnection, inventory: Inventory) -> None:
        if token == self._token and self.connection is connection:
            self.inventory = inventory
            self._notify()

    def _waiting(self, token: int, error: Classified | None, delay: float) -> None:
        if token != self._token:
            return
        if error is not None:
            self.error = error
        reason = self.error.reason if self.error is not None else "connection lost"
        self._set(ConnectionState.UNREACHABLE,
                  Countdown.after_delay(f"{reason}; trying again in ", delay, " (or Retry now)", decimals=0))

    def _failed(self, token: int, exc: BaseException) -> None:
        if token != self._token:
            return
        self.failure = exc
        self.error = classify(exc)
        state = self.error.state
        if state in (ConnectionState.HOST_KEY_UNKNOWN, ConnectionState.HOST_KEY_CHANGED):
            self.host_key_error = exc
        # A failure needs the user: say what it was in full (the class is in `error`).
        self._set(state, str(exc) or self.error.reason, force=True)
        if self.host_key_error is not None and self.on_host_key is not None:
            self.on_host_key(HostKeyRequest(self.name, exc, state is ConnectionState.HOST_KEY_CHANGED))

    def _set(self, state: ConnectionState, detail: Detail, *, force: bool = False) -> None:
        if (state, detail) == (self.state, self._detail) and not force:
            return
        self.state, self._detail = state, detail
        self._notify()

    def _notify(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # one broken view must not stop the others
                log.exception("host link listener failed")


def _default_factory() -> ConnectionFactory:
    from gpuws.remote.connection import HostConnection

    return HostConnection


def _stores() -> dict[str, object]:
    """The keyring and profile store a saved host's connection reads (passwords, jump hosts)."""
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.secrets import SecretStore

    return {"secrets": SecretStore(), "profiles": ProfileStore()}
