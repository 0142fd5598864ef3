"""The window's view of one host: a thin Qt adapter over the app's `HostLink`.

The link (gpuws.app.hosts) connects, probes, keeps the host connected and classifies failures by
the one error table; this adapter only turns its reports into Qt signals on the GUI thread and
its host-key question (a typed `HostKeyRequest`) into `host_key_unknown` / `host_key_changed`.
The window's `TelemetryHub` attaches the link to the Workspace, which then owns the host's life.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from gpuws.app.hosts import FAILED_STATES, ConnectionFactory, HostKeyRequest, HostLink, RetryPace
from gpuws.core.inventory import Inventory
from gpuws.core.models import HostProfile
from gpuws.core.states import ConnectionState
from gpuws.ui.bridge import AsyncBridge

if TYPE_CHECKING:
    from gpuws.app.hosts import KbdintPrompt

__all__ = ["FAILED_STATES", "HostSession"]


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
        pace: RetryPace | None = None,
        connection_options: Mapping[str, object] | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._bridge = bridge
        self.link = HostLink(
            profile, lambda coro: bridge.run_async(coro), lambda func: bridge.post(func, owner=self),
            factory=connection_factory, password=password, known_host_key=known_host_key, pace=pace,
            connection_options=connection_options,
        )
        self.link.on_host_key = self._on_host_key
        self._shown: tuple[ConnectionState, str] = (self.link.state, self.link.detail)
        self._inventory: Inventory | None = None
        self.link.subscribe(self._on_link)

    # -- what the link knows ----------------------------------------------------------------------

    @property
    def profile(self) -> HostProfile:
        """The host's profile."""
        return self.link.profile

    @property
    def bridge(self) -> AsyncBridge:
        """The bridge this session runs its remote work through (tabs use it for theirs)."""
        return self._bridge

    @property
    def name(self) -> str:
        """The host's profile name."""
        return self.link.name

    @property
    def state(self) -> ConnectionState:
        """Where the connection stands."""
        return self.link.state

    @property
    def detail(self) -> str:
        """The state's one line (the reason in words while it is not connected)."""
        return self.link.detail

    @property
    def inventory(self) -> Inventory | None:
        """The last probe's inventory."""
        return self.link.inventory

    @property
    def host_key_error(self) -> BaseException | None:
        """The host-key error the last connect met (answered by `connect_host`)."""
        return self.link.host_key_error

    @property
    def simulated_password(self) -> str | None:
        """The demo host's throwaway password (shown so its ssh command works); None for real hosts."""
        return self.link.simulated_password

    @property
    def connection(self) -> Any:
        """The connected `HostConnection` (its `.runner` runs commands), or None."""
        return self.link.live_connection

    @property
    def kbdint_prompt(self) -> KbdintPrompt | None:
        """async (title, instructions, [(prompt, echo)]) -> answers | None; set by the window."""
        return self.link.kbdint_prompt

    @kbdint_prompt.setter
    def kbdint_prompt(self, prompt: KbdintPrompt | None) -> None:
        self.link.kbdint_prompt = prompt

    # -- verbs -----------------------------------------------------------------------------------

    def connect_host(self, *, accept_new: bool = False, known_host_key: str | None = None) -> None:
        """(Re)connect and probe. `accept_new` trusts and remembers an unknown key;
        `known_host_key` trusts one key for this session only."""
        self.link.connect(accept_new=accept_new, known_host_key=known_host_key)

    def retry_now(self) -> None:
        """Try to reach the host at once (the "Retry now" action)."""
        self.link.retry_now()

    def reprobe(self) -> None:
        """Probe the connected host again (its GPU layout changed): views follow `inventory_changed`."""
        self.link.reprobe()

    def close(self) -> concurrent.futures.Future[None] | None:
        """Close the connection (returns the close future, or None when there was nothing to close)."""
        if not self._bridge.running:
            self.link.connection = None  # the loop is gone: nothing can close it any more
        return self.link.close()

    # -- GUI thread --------------------------------------------------------------------------------

    def _on_link(self) -> None:
        if self.link.inventory is not self._inventory:
            self._inventory = self.link.inventory
            self.inventory_changed.emit(self._inventory)
        shown = (self.link.state, self.link.detail)
        if shown != self._shown or self.link.state in FAILED_STATES:
            self._shown = shown
            self.state_changed.emit(*shown)

    def _on_host_key(self, request: HostKeyRequest) -> None:
        (self.host_key_changed if request.changed else self.host_key_unknown).emit(request.error)
