"""Local port forwards over a `HostConnection` that survive reconnects.

Why not asyncssh's `forward_local_port`: its listener belongs to one SSH connection and dies with
it, so after a reconnect the browser tab would point at a closed port. Here the local listener
belongs to the `Tunnel` and outlives the connection: each accepted client opens a direct-tcpip
channel on whatever connection is live *now* (waiting out a reconnect in progress), so the same
URL keeps working when the link comes back. Counting open channels also tells idle-stop whether
the tunnel is in use.

A tunnel never loops into itself: when the host is this machine (a loopback address, as the demo
host is), the remote port's own number is never used as the local one. "open" is said only once a
connection through the tunnel reached a listener on the host (a probe or a client); until then it is
"listening". Accepting is our own loop, so accept errors (EMFILE...) are counted and logged at most
once per ACCEPT_LOG_INTERVAL_S, never one traceback each, and at most MAX_CLIENTS connections are
forwarded at once: descriptors stay bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import asyncssh

from gpuws.core.errors import GpuwsError
from gpuws.core.tunnels import (
    LOOPBACK,
    LocalPortBusy,
    RemoteServiceDown,
    TunnelError,
    TunnelLoop,
    TunnelSpec,
    TunnelState,
    is_address_in_use,
    redact_url,
    tunnel_url,
)

if TYPE_CHECKING:
    from gpuws.remote.connection import HostConnection

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_CLIENTS = 256  # connections forwarded at once; more are closed at once (counted in `rejected`)
ACCEPT_LOG_INTERVAL_S = 30.0
ACCEPT_RETRY_S = 0.5  # after an accept error (out of descriptors), before trying again


TunnelCallback = Callable[["Tunnel", TunnelState, str], None]


class Tunnel:
    """127.0.0.1:`local_port` here forwarded to `spec.remote_host`:`spec.remote_port` on the host."""

    def __init__(
        self,
        connection: HostConnection,
        spec: TunnelSpec,
        *,
        token: str | None = None,
        on_state: TunnelCallback | None = None,
        reconnect_wait: float = 60.0,
    ) -> None:
        self.connection = connection
        self.spec = spec
        self._token = token  # Jupyter's, only ever put in `url` (never logged)
        self._on_state = on_state
        self._reconnect_wait = reconnect_wait
        self._listener: socket.socket | None = None
        self._accepter: asyncio.Task[None] | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._reached = False  # a connection through the tunnel reached a listener on the host
        self.accept_errors = 0  # failed accepts (e.g. out of descriptors), logged rate-limited
        self.rejected = 0  # connections closed at once because MAX_CLIENTS were being forwarded
        self._last_accept_log = float("-inf")
        self.local_port: int | None = None
        self.state = TunnelState.CLOSED
        self.last_error = ""
        self.active_channels = 0
        self.last_activity: float | None = None  # time.time() of the last byte either way
        self.note = ""  # what gpuws did for it, said with its state ("Jupyter started again after ...")

    # -- public ---------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """What to open (with the Jupyter token): give it to a browser, never to a log."""
        if self.local_port is None:
            raise TunnelError("the tunnel is not open")
        return tunnel_url(self.spec, self.local_port, token=self._token)

    @property
    def has_token(self) -> bool:
        """True when the URL carries a login token (Jupyter's): only then do labels mention one."""
        return bool(self._token)

    @property
    def display_url(self) -> str:
        """The URL with the token masked, for logs and labels."""
        return redact_url(self.url)

    @property
    def remote_label(self) -> str:
        """HOST:PORT of the service as the user thinks of it."""
        host = self.spec.remote_host
        if host in _LOOPBACK_NAMES:
            host = self.connection.profile.host
        return f"{host}:{self.spec.remote_port}"

    @property
    def in_use(self) -> bool:
        """True while a client (browser, viewer) has a channel open through the tunnel."""
        return self.active_channels > 0

    def rebind(self, connection: HostConnection) -> None:
        """Forward through `connection` from now on (the host's connection was replaced, as by
        Host > Reconnect); the local port stays the same, so open URLs keep working."""
        self.connection = connection
        self.sync_state()

    def set_token(self, token: str | None) -> None:
        """Use `token` in the URL from now on (a Jupyter found or started again has its own)."""
        self._token = token

    def retarget(self, remote_port: int, token: str | None) -> None:
        """Forward to `remote_port` on the host from now on, keeping the local port (open URLs and
        viewers keep working): a server found or started again after the host came back."""
        self.spec = dataclasses.replace(self.spec, remote_port=remote_port)
        self._token = token
        self._reached = False

    def sync_state(self) -> TunnelState:
        """Follow the connection's state (call it from the connection's state callback). Back
        from waiting, it is "listening" until its host side answers again (a probe, or a client
        that reaches it): the service may have gone with the host."""
        if self._listener is not None:
            if self._connection_live():
                if self.state is TunnelState.WAITING:
                    self._reached = False
                self._set_state(TunnelState.OPEN if self._reached else TunnelState.LISTENING, "")
            else:
                self._set_state(TunnelState.WAITING, "waiting for the SSH connection to come back")
        return self.state

    async def open(self) -> int:
        """Start listening on the local port; returns it. Raises LocalPortBusy if it is taken."""
        if self._listener is not None and self.local_port is not None:
            return self.local_port
        loops_back = self._loops_back()
        if loops_back and self.spec.local_port == self.spec.remote_port:
            raise TunnelLoop(self.spec.remote_port)
        last_busy: OSError | None = None
        for port in self.spec.local_port_candidates(loops_back=loops_back):
            try:
                self._listener = _listen(port)
            except OSError as exc:
                if not is_address_in_use(exc):
                    raise TunnelError(f"cannot listen on local port {port}: {exc.strerror or exc}") from None
                last_busy = exc
                continue
            self.local_port = int(self._listener.getsockname()[1])
            break
        if self._listener is None or self.local_port is None:
            # Only an explicit --local can end up here: without one, port 0 always binds.
            raise LocalPortBusy(self.spec.local_port or 0) from last_busy
        self._accepter = asyncio.get_running_loop().create_task(self._accept_loop(self._listener))
        log.info("tunnel %s -> %s listening", self.local_port, self.remote_label)
        self._set_state(TunnelState.LISTENING if self._connection_live() else TunnelState.WAITING, "")
        return self.local_port

    def _loops_back(self) -> bool:
        """True when the host is this machine, so the remote port's number here is the destination."""
        profile = self.connection.profile
        return (profile.host in _LOOPBACK_NAMES and not getattr(profile, "jump", None)
                and self.spec.remote_host in _LOOPBACK_NAMES)

    async def _accept_loop(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, _address = await loop.sock_accept(listener)
            except OSError as exc:
                self.accept_errors += 1
                self._log_accept_problem(f"cannot accept a connection ({exc.strerror or exc})")
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            if len(self._clients) >= MAX_CLIENTS:
                self.rejected += 1
                client.close()
                self._log_accept_problem(f"{MAX_CLIENTS} connections are being forwarded; closed a new one")
                continue
            try:
                reader, writer = await asyncio.open_connection(sock=client)
            except OSError:
                client.close()
                continue
            task = loop.create_task(self._serve_client(reader, writer))
            self._clients.add(task)
            task.add_done_callback(self._clients.discard)

    def _log_accept_problem(self, what: str) -> None:
        now = time.monotonic()
        if now - self._last_accept_log >= ACCEPT_LOG_INTERVAL_S:
            self._last_accept_log = now
            log.warning("tunnel %s: %s (%d accept errors, %d refused so far)", self.local_port, what,
                        self.accept_errors, self.rejected)

    async def probe(self, timeout: float = 10.0) -> None:
        """Check a service answers on the host side; raises RemoteServiceDown if nothing listens."""
        ssh = await self.connection.ssh(timeout)
        try:
            _reader, writer = await asyncio.wait_for(
                ssh.open_connection(self.spec.remote_host, self.spec.remote_port, encoding=None), timeout
            )
        except asyncssh.ChannelOpenError as exc:
            error = self._channel_error(exc)
            if self._listener is not None:
                self._set_state(TunnelState.FAILED, str(error))
            raise error from None
        except TimeoutError:
            raise TunnelError(f"no answer from {self.remote_label} within {timeout:g} s") from None
        writer.close()
        self._reached_listener()

    async def wait_ready(self, timeout: float = 30.0, interval: float = 0.5) -> None:
        """Probe until the service answers (a server just started needs a moment)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                await self.probe(timeout=max(1.0, deadline - time.monotonic()))
                return
            except RemoteServiceDown:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(interval)

    async def close(self) -> None:
        """Stop listening and drop every forwarded connection."""
        listener, self._listener = self._listener, None
        accepter, self._accepter = self._accepter, None
        if accepter is not None:
            accepter.cancel()
            await asyncio.gather(accepter, return_exceptions=True)
        if listener is not None:
            listener.close()
        for task in list(self._clients):
            task.cancel()
        await asyncio.gather(*self._clients, return_exceptions=True)
        self._set_state(TunnelState.CLOSED, "")

    async def __aenter__(self) -> Tunnel:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- forwarding -----------------------------------------------------------------------------

    def _connection_live(self) -> bool:
        return str(self.connection.state) in ("connected", "no_driver")

    def _channel_error(self, exc: asyncssh.ChannelOpenError) -> TunnelError:
        if exc.code == asyncssh.OPEN_CONNECT_FAILED:
            host = self.spec.remote_host
            shown = self.connection.profile.host if host in _LOOPBACK_NAMES else host
            return RemoteServiceDown(shown, self.spec.remote_port)
        if exc.code == asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED:
            return TunnelError(f"the host refuses port forwarding (AllowTcpForwarding): {exc.reason}")
        return TunnelError(f"cannot open a channel to {self.remote_label}: {exc.reason}")

    async def _serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._forward(reader, writer)
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._connection_live():
            self._set_state(TunnelState.WAITING, "waiting for the SSH connection to come back")
        try:
            ssh = await self.connection.ssh(self._reconnect_wait)
            chan_reader, chan_writer = await ssh.open_connection(
                self.spec.remote_host, self.spec.remote_port, encoding=None
            )
        except asyncssh.ChannelOpenError as exc:
            self._set_state(TunnelState.FAILED, str(self._channel_error(exc)))
            return
        except (GpuwsError, asyncssh.Error, OSError) as exc:
            self._set_state(TunnelState.WAITING, str(exc) or type(exc).__name__)
            return
        self._reached_listener()
        self.active_channels += 1
        try:
            await asyncio.gather(self._pump(reader, chan_writer), self._pump(chan_reader, writer))
        finally:
            self.active_channels -= 1
            chan_writer.close()

    async def _pump(
        self, source: asyncio.StreamReader | asyncssh.SSHReader[bytes],
        sink: asyncio.StreamWriter | asyncssh.SSHWriter[bytes],
    ) -> None:
        try:
            while data := await source.read(_CHUNK):
                self.last_activity = time.time()
                sink.write(data)
                await sink.drain()
            if sink.can_write_eof():
                sink.write_eof()
        except (OSError, asyncssh.Error, asyncssh.BreakReceived):
            # One side went away (browser tab closed, link dropped): just end this connection.
            sink.close()

    def _reached_listener(self) -> None:
        self._reached = True
        self._set_state(TunnelState.OPEN, "")

    def _set_state(self, state: TunnelState, detail: str) -> None:
        if (state, detail) == (self.state, self.last_error):
            return
        self.state, self.last_error = state, detail
        if self._on_state is not None:
            try:
                self._on_state(self, state, detail)
            except Exception:  # a broken listener must not break the tunnel
                log.exception("tunnel state callback failed")


def _listen(port: int) -> socket.socket:
    """A non-blocking listening socket on 127.0.0.1:`port` (0: any free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio.start_server does on POSIX
        sock.bind((LOOPBACK, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
