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
from typing import TYPE_CHECKING, Protocol

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
from gpuws.remote.wire import CoalescingTransport, quiet_packet_logging

if TYPE_CHECKING:
    from gpuws.remote.connection import HostConnection

log = logging.getLogger(__name__)

# The forwarding channel's window and largest packet we accept: asyncssh's defaults (2 MiB, 32 KiB)
# cost Python's per-packet overhead every 32 KiB the host sends and stall on window adjusts.
CHANNEL_WINDOW = 8 * 1024 * 1024
CHANNEL_MAX_PACKET = 256 * 1024
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
            task = loop.create_task(self._serve_client(client))
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

    async def _serve_client(self, client: socket.socket) -> None:
        try:
            await self._forward(client)
        except asyncio.CancelledError:
            pass
        finally:
            client.close()

    async def _forward(self, client: socket.socket) -> None:
        """Join the accepted `client` to a new direct-tcpip channel, protocol to protocol: bytes go
        from one side's `data_received` straight to the other's `write`, and a side whose buffer is
        full pauses the other's reading (no stream reader, no copy per chunk, no task per direction)."""
        if not self._connection_live():
            self._set_state(TunnelState.WAITING, "waiting for the SSH connection to come back")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        local = _Pipe(self, done)
        try:
            transport, _ = await loop.connect_accepted_socket(lambda: local, sock=client)
        except OSError:
            return
        transport.pause_reading()  # until the channel is there to take the bytes
        # The host's packets (up to 256 KiB, often several per loop turn) go to the client in one send.
        local.connection_made(CoalescingTransport(transport, loop))
        try:
            ssh = await self.connection.ssh(self._reconnect_wait)
            remote = _Pipe(self, done, peer=local)
            channel, _ = await ssh.create_connection(lambda: remote,  # type: ignore[arg-type, return-value]
                                        self.spec.remote_host, self.spec.remote_port,
                                        encoding=None, window=CHANNEL_WINDOW, max_pktsize=CHANNEL_MAX_PACKET)
            quiet_packet_logging(channel)  # gpuws.remote.wire
        except asyncssh.ChannelOpenError as exc:
            self._set_state(TunnelState.FAILED, str(self._channel_error(exc)))
            transport.close()
            return
        except (GpuwsError, asyncssh.Error, OSError) as exc:
            self._set_state(TunnelState.WAITING, str(exc) or type(exc).__name__)
            transport.close()
            return
        self._reached_listener()
        self.active_channels += 1
        try:
            local.flush()
            transport.resume_reading()
            await done
        finally:
            self.active_channels -= 1
            local.close()

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


class _Sink(Protocol):
    """What a side of a forwarded connection writes to: an asyncio transport or an asyncssh channel."""

    def write(self, data: bytes) -> None:
        """Send `data`."""

    def write_eof(self) -> None:
        """Send no more."""

    def pause_reading(self) -> None:
        """Stop taking bytes in."""

    def resume_reading(self) -> None:
        """Take bytes in again."""

    def close(self) -> None:
        """End this side."""


class _Pipe(asyncio.Protocol):
    """One side of a forwarded connection (the local socket, or the SSH channel): what it receives goes
    to its peer; when the peer cannot take more, this side stops reading."""

    def __init__(self, tunnel: Tunnel, done: asyncio.Future[None], peer: _Pipe | None = None) -> None:
        self._tunnel = tunnel
        self._done = done
        self._transport: _Sink | None = None
        self._held: list[bytes] = []  # received before the peer was there
        self.eof = False
        self._peer: _Pipe | None = None
        if peer is not None:
            self._peer, peer._peer = peer, self

    def connection_made(self, transport: _Sink) -> None:  # type: ignore[override]
        """asyncio/asyncssh: the side is open."""
        self._transport = transport

    def session_started(self) -> None:
        """asyncssh: the channel is open."""

    def data_received(self, data: bytes, datatype: int | None = None) -> None:
        """Bytes from this side: to the peer."""
        self._tunnel.last_activity = time.time()
        if self._peer is None or self._peer._transport is None:
            self._held.append(data)
        else:
            self._peer._transport.write(data)

    def flush(self) -> None:
        """Hand the peer what came before it was there."""
        if self._peer is not None and self._peer._transport is not None:
            for data in self._held:
                self._peer._transport.write(data)
            self._held.clear()
            if self.eof:
                self._peer._transport.write_eof()

    def eof_received(self) -> bool:
        """This side will send no more: pass the EOF on, and stay half-open until the peer ends too."""
        self.eof = True
        if self._peer is not None and self._peer._transport is not None:
            with contextlib.suppress(OSError, asyncssh.Error):
                self._peer._transport.write_eof()
            return not self._peer.eof
        return True

    def pause_writing(self) -> None:
        """This side's buffer is full: the peer stops reading."""
        if self._peer is not None and self._peer._transport is not None:
            self._peer._transport.pause_reading()

    def resume_writing(self) -> None:
        """This side takes bytes again: the peer reads again."""
        if self._peer is not None and self._peer._transport is not None:
            self._peer._transport.resume_reading()

    def connection_lost(self, exc: BaseException | None) -> None:
        """One side went away (browser tab closed, link dropped): end the forwarded connection."""
        self.close()

    def close(self) -> None:
        """Close both sides."""
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()
        peer, self._peer = self._peer, None
        if peer is not None:
            peer._peer = None
            peer.close()
        if not self._done.done():
            self._done.set_result(None)


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
