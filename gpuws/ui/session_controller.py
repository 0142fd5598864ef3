"""One controller per host: connect, probe, and report state changes to the GUI as Qt signals.

The controller lives on the GUI thread. The connection and probe run on the loop thread through
`AsyncBridge`; the connection's state callback (called on the loop thread) is re-posted to the GUI
thread before anything reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from gpuws.core.errors import GpuwsError
from gpuws.core.inventory import Inventory
from gpuws.core.models import HostProfile
from gpuws.remote.connection import ConnectionState
from gpuws.ui.bridge import AsyncBridge

log = logging.getLogger(__name__)

# The states the GUI treats as "stopped, needs the user".
FAILED_STATES = frozenset({ConnectionState.AUTH_FAILED, ConnectionState.HOST_KEY_CHANGED,
                           ConnectionState.HOST_KEY_UNKNOWN, ConnectionState.UNREACHABLE, ConnectionState.NO_DRIVER})

ConnectionFactory = Callable[..., Any]


class HostSession(QObject):
    """The live state of one host in the window: connection state, inventory, last problem."""

    state_changed = Signal(str, str)  # (ConnectionState, a str enum; one-line detail or "")
    inventory_changed = Signal(object)  # Inventory | None
    host_key_unknown = Signal(object)  # the UnknownHostKey error (fingerprint, host, ...)
    host_key_changed = Signal(object)  # the HostKeyChanged error (old/new fingerprints, file:line)

    def __init__(
        self,
        profile: HostProfile,
        bridge: AsyncBridge,
        *,
        password: str | None = None,
        known_host_key: str | None = None,
        connection_factory: ConnectionFactory | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.profile = profile
        self._bridge = bridge
        # In-memory credentials (the demo host); saved hosts read theirs from the keyring.
        self._password = password
        self._known_host_key = known_host_key
        self._factory = connection_factory
        self._connection: Any = None
        self._attempt = 0  # results of an older connect() are ignored
        self._probing = False
        self.state = ConnectionState.DISCONNECTED
        self.detail = ""
        self.inventory: Inventory | None = None
        self.host_key_error: BaseException | None = None
        # async (title, instructions, [(prompt, echo)]) -> answers | None; set by the window.
        self.kbdint_prompt: Callable[..., Any] | None = None

    @property
    def bridge(self) -> AsyncBridge:
        """The bridge this session runs its remote work through (tabs use it for theirs)."""
        return self._bridge

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def simulated_password(self) -> str | None:
        """The demo host's throwaway password (shown so its ssh command works); None for real hosts."""
        return self._password if self.profile.simulated else None

    @property
    def connection(self) -> Any:
        """The connected `HostConnection` (its `.runner` runs commands), or None."""
        return self._connection if self.state == ConnectionState.CONNECTED else None

    def connect_host(self, *, accept_new: bool = False, known_host_key: str | None = None) -> None:
        """(Re)connect and probe. `accept_new` trusts and remembers an unknown key;
        `known_host_key` trusts one key for this session only."""
        if known_host_key is not None:
            self._known_host_key = known_host_key
        self._attempt += 1
        attempt = self._attempt
        old = self._connection
        self._connection = None
        self.host_key_error = None
        self._probing = True
        self._set_state(ConnectionState.CONNECTING, "")
        try:
            connection = self._make_connection(accept_new, attempt)
        except GpuwsError as exc:
            self._set_state(ConnectionState.UNREACHABLE, str(exc))
            return
        self._connection = connection
        self._bridge.run_async(
            self._connect_and_probe(connection, old),
            lambda inv: self._on_probed(attempt, inv),
            lambda exc: self._on_failed(attempt, exc),
            owner=self,
        )

    def reprobe(self) -> None:
        """Probe the connected host again (its GPU layout changed): views follow `inventory_changed`."""
        connection = self.connection
        if connection is None:
            return
        attempt = self._attempt

        async def probe_again() -> Inventory:
            from gpuws.remote.probe import probe

            inventory: Inventory = await probe(connection.runner)
            return inventory

        def done(inventory: Inventory) -> None:
            if attempt == self._attempt and self._connection is connection:
                self.inventory = inventory
                self.inventory_changed.emit(inventory)

        self._bridge.run_async(probe_again(), done, lambda exc: log.info("re-probe failed: %s", exc), owner=self)

    # -- loop thread ----------------------------------------------------------------------------

    async def _connect_and_probe(self, connection: Any, old: Any) -> Inventory:
        from gpuws.remote.probe import probe

        if old is not None:
            try:
                await old.close()
            except Exception:  # a dead old connection must not stop the new one
                log.debug("closing the previous connection failed", exc_info=True)
        await connection.connect()
        inventory: Inventory = await probe(connection.runner)
        if not inventory.host.driver_found and hasattr(connection, "note_no_driver"):
            connection.note_no_driver("no NVIDIA driver found (nvidia-smi is missing)")
        return inventory

    def close(self) -> Any:
        """Close the connection (returns the close future, or None when there was nothing to close)."""
        self._attempt += 1
        connection, self._connection = self._connection, None
        self._set_state(ConnectionState.DISCONNECTED, "")
        if connection is None or not self._bridge.running:
            return None
        return self._bridge.run_async(connection.close())

    def _make_connection(self, accept_new: bool, attempt: int) -> Any:
        def on_state(state: ConnectionState | str, detail: str = "", *_: object) -> None:
            # Called on the loop thread: hop to the GUI thread before touching anything.
            value = ConnectionState(state)  # the connection's enum (or its value, from a stand-in)
            self._bridge.post(lambda: self._on_state(attempt, value, str(detail)), owner=self)

        factory = self._factory or _default_connection_factory()
        kwargs: dict[str, Any] = {"accept_new": accept_new, "on_state": on_state}
        if self.kbdint_prompt is not None:
            kwargs["kbdint_prompt"] = self.kbdint_prompt
        if self._password is not None:
            kwargs["password"] = self._password
        if self._known_host_key is not None:
            kwargs["known_host_key"] = self._known_host_key
        if self._factory is None and not self.profile.simulated:
            kwargs.update(_stores())
        return factory(self.profile, **kwargs)

    # -- GUI thread -----------------------------------------------------------------------------

    def _on_state(self, attempt: int, state: ConnectionState, detail: str) -> None:
        if attempt != self._attempt:
            return
        # The probe result decides between "connected" and "no_driver": don't flash green early.
        if state == ConnectionState.CONNECTED and self._probing:
            return
        # Only failures and retries carry a detail worth showing ("retry 2/10 in 1.4 s").
        self._set_state(state, detail if state in FAILED_STATES or state == ConnectionState.RECONNECTING else "")

    def _on_probed(self, attempt: int, inventory: Inventory) -> None:
        if attempt != self._attempt:
            return
        self._probing = False
        self.inventory = inventory
        self.inventory_changed.emit(inventory)
        if not inventory.host.driver_found:
            self._set_state(ConnectionState.NO_DRIVER, "No NVIDIA driver found on this host (nvidia-smi is missing).")
        else:
            self._set_state(ConnectionState.CONNECTED, "")

    def _on_failed(self, attempt: int, exc: BaseException) -> None:
        if attempt != self._attempt:
            return
        self._probing = False
        state = _state_for_error(exc, self._connection)
        detail = str(exc) if isinstance(exc, GpuwsError) else f"{type(exc).__name__}: {exc}"
        if state in (ConnectionState.HOST_KEY_UNKNOWN, ConnectionState.HOST_KEY_CHANGED):
            self.host_key_error = exc
        # Forced: the connection may have reported this state already, before the error was known.
        self._set_state(state, detail, force=True)
        if state == ConnectionState.HOST_KEY_UNKNOWN:
            self.host_key_unknown.emit(exc)
        elif state == ConnectionState.HOST_KEY_CHANGED:
            self.host_key_changed.emit(exc)

    def _set_state(self, state: ConnectionState, detail: str, *, force: bool = False) -> None:
        if (state, detail) == (self.state, self.detail) and not force:
            return
        self.state, self.detail = state, detail
        self.state_changed.emit(state, detail)


def _state_for_error(exc: BaseException, connection: Any) -> ConnectionState:
    """The state a failed connect leaves the host in, by error class (never by name or message)."""
    from gpuws.core.errors import NoNvidiaDriver
    from gpuws.core.secrets import KeyringUnavailable
    from gpuws.remote.auth import AuthFailed
    from gpuws.remote.hostkeys import HostKeyChanged, HostKeyRevoked, UnknownHostKey

    if isinstance(exc, KeyringUnavailable):
        return ConnectionState.AUTH_FAILED  # the password could not be read: not an address problem
    if isinstance(exc, UnknownHostKey):
        return ConnectionState.HOST_KEY_UNKNOWN
    if isinstance(exc, HostKeyChanged | HostKeyRevoked):
        return ConnectionState.HOST_KEY_CHANGED
    if isinstance(exc, AuthFailed):
        return ConnectionState.AUTH_FAILED
    if isinstance(exc, NoNvidiaDriver):
        return ConnectionState.NO_DRIVER
    state = getattr(connection, "state", None)
    return state if isinstance(state, ConnectionState) and state in FAILED_STATES else ConnectionState.UNREACHABLE


def _default_connection_factory() -> ConnectionFactory:
    from gpuws.remote.connection import HostConnection

    return HostConnection


def _stores() -> dict[str, Any]:
    """The keyring and profile store a saved host's connection reads (passwords, jump hosts)."""
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.secrets import SecretStore

    return {"secrets": SecretStore(), "profiles": ProfileStore()}
