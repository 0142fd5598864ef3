"""One SSH connection per host: auth, host keys, jump hosts, keepalives and reconnects.

A `HostConnection` owns one asyncssh connection (channels are multiplexed over it) plus the
connections to its jump hosts, if any. After a drop it reconnects by itself with exponential
backoff and jitter, reporting each step through `on_state(state, detail)`; a drop is a state the
UI shows, never an exception thrown at it. Failures that retrying cannot fix (authentication,
host keys) stop the retries at once. Everything is plain asyncio, so many hosts connect at once
without blocking each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import asyncssh
from asyncssh.public_key import get_default_certificate_algs, get_default_public_key_algs

from gpuws.core.errors import GpuwsError
from gpuws.core.jumps import JumpChainError, jump_hops
from gpuws.core.models import HostProfile
from gpuws.core.states import ConnectionState, Countdown, Detail
from gpuws.remote.auth import AuthFailed, KbdintPrompt, connect_options
from gpuws.remote.ciphers import encryption_options
from gpuws.remote.error_states import error_state
from gpuws.remote.hostkeys import (
    OPENSSH_CERT_ALGORITHMS,
    OPENSSH_KEY_ALGORITHMS,
    HostCertificateInvalid,
    HostKeyChanged,
    HostKeyRevoked,
    HostKeyStatus,
    KnownHostEntry,
    KnownHosts,
    UnknownHostKey,
    check_or_raise,
    fingerprint,
    host_token,
    key_type_label,
    parse_public_key,
)
from gpuws.remote.wire import coalesce_writes, lean_packets

if TYPE_CHECKING:
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.secrets import SecretStore
    from gpuws.remote.ssh_runner import SshRunner

__all__ = [
    "AuthFailed",
    "ConnectionState",
    "HostConnection",
    "HostKeyQuestion",
    "HostUnreachable",
    "JumpHostError",
    "NotConnected",
    "ReconnectPolicy",
]

log = logging.getLogger(__name__)


class HostUnreachable(GpuwsError):
    """No SSH session could be set up: refused, timed out, name unknown, handshake failed.

    `port` and `timeout` say where and how long it was tried; `__cause__` is the OS or SSH error
    (the app's error table words the reason from these, never from the message)."""

    def __init__(self, message: str, *, port: int | None = None, timeout: float | None = None) -> None:
        super().__init__(message)
        self.port = port
        self.timeout = timeout


class NotConnected(GpuwsError):
    """A command was asked for while the host is not connected (and not about to be)."""


class JumpHostError(GpuwsError):
    """The jump host chain is unusable: a loop, or a profile that does not exist."""


@dataclass(frozen=True)
class HostKeyQuestion:
    """What to show a user asked to trust a host key seen for the first time."""

    host: str
    port: int
    key_type: str
    fingerprint: str

    def __str__(self) -> str:
        return (
            f"The authenticity of host {host_token(self.host, self.port)} can't be established.\n"
            f"{self.key_type} key fingerprint is {self.fingerprint}."
        )


ConfirmHostKey = Callable[[HostKeyQuestion], Awaitable[bool] | bool]
StateCallback = Callable[[ConnectionState, Detail], None]


@dataclass(frozen=True)
class ReconnectPolicy:
    """Backoff after a drop: base * 2**n seconds, capped, with random jitter; then give up."""

    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retries: int = 10
    jitter: float = 0.3  # fraction of each delay that is random, so many hosts do not retry in step

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number `attempt` (1-based)."""
        delay = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return float(delay * (1 - self.jitter) + random.uniform(0, delay * self.jitter))


# What the server may offer, best first, as OpenSSH orders them (certificates, then plain keys);
# known key types go in front.
_HOST_KEY_ALGS = [a for a in (*OPENSSH_CERT_ALGORITHMS, *OPENSSH_KEY_ALGORITHMS)
                  if a.encode() in (*get_default_certificate_algs(), *get_default_public_key_algs())]
_HOST_KEY_ALGS += [a.decode() for a in get_default_public_key_algs() if a.decode() not in _HOST_KEY_ALGS]
_FATAL = (AuthFailed, UnknownHostKey, HostKeyChanged, HostKeyRevoked, HostCertificateInvalid, JumpHostError)


class _HostKeyGate:
    """The host key decision for one hop; asyncssh asks it synchronously during key exchange."""

    def __init__(self, known: KnownHosts, host: str, port: int, trusted: Sequence[asyncssh.SSHKey],
                 accept_new: bool) -> None:
        self.known, self.host, self.port = known, host, port
        self.trusted = list(trusted)
        self.accept_new = accept_new
        self.error: GpuwsError | None = None
        self.unknown_key: asyncssh.SSHKey | None = None
        self.trusted_ca: KnownHostEntry | None = None  # set once a host certificate's CA is trusted

    def checks_certificates_as_plain_keys(self) -> bool:
        """Whether a host certificate is checked as its plain key: no @cert-authority line covers
        the host, so (as ssh: "No matching CA found. Retry with plain key") its key must be in
        known_hosts like any plain host key."""
        return not any(e.marker == "cert-authority" for e in self.known.entries_for(self.host, self.port))

    def verify_ca(self, ca_key: asyncssh.SSHKey) -> bool:
        """Whether a host certificate's signing CA is trusted for this host (asyncssh then checks
        the certificate's principals and validity)."""
        result = self.known.check_ca(self.host, self.port, ca_key)
        if result.status is HostKeyStatus.REVOKED:
            assert result.entry is not None
            self.error = HostKeyRevoked(self.host, self.port, ca_key, result.entry)
            return False
        if result.status is HostKeyStatus.TRUSTED:
            self.trusted_ca = result.entry
            return True
        self.error = HostCertificateInvalid(
            f"host certificate of {host_token(self.host, self.port)} is signed by CA {fingerprint(ca_key)}, "
            "which no @cert-authority line trusts for this host; refusing to connect"
        )
        return False

    def not_verified(self, label: str) -> GpuwsError:
        """Why asyncssh refused the host key when our own checks did not say."""
        if self.error is not None:
            return self.error
        if self.trusted_ca is not None:
            # asyncssh refused after we trusted the CA: principals or validity are wrong.
            return HostCertificateInvalid(
                f"host certificate of {label} is signed by a trusted CA ({self.trusted_ca.location}) but "
                "is not valid for this host now (principals or validity); refusing to connect"
            )
        revoked = self.known.revoked_keys(self.host, self.port)
        if revoked:
            places = ", ".join(e.location for e in revoked)
            # asyncssh refused it before our gate: a plain key or a certificate's key (it does not say).
            return HostCertificateInvalid(
                f"host key of {label} (or the key of its certificate) is marked @revoked ({places}); "
                "refusing to connect"
            )
        return HostUnreachable(f"host key of {label} not verified")

    def verify(self, key: asyncssh.SSHKey) -> bool:
        try:
            result = check_or_raise(self.known, self.host, self.port, key, self.trusted)
        except GpuwsError as exc:
            self.error = exc
            return False
        if result.status is HostKeyStatus.TRUSTED:
            return True
        if self.accept_new:  # OpenSSH's StrictHostKeyChecking=accept-new: new keys only
            self.known.record(self.host, self.port, key)
            log.info("recorded new host key %s for %s", fingerprint(key), host_token(self.host, self.port))
            return True
        self.unknown_key = key
        self.error = UnknownHostKey(self.host, self.port, key)
        return False


_validate_host_certificate = asyncssh.SSHClientConnection._validate_openssh_host_certificate


def _validate_host_certificate_as_ssh_does(conn: Any, host: str, addr: str, port: int, cert: Any) -> asyncssh.SSHKey:
    """asyncssh's host certificate check, with OpenSSH's fallback for our connections: when no
    @cert-authority line covers the host, the certificate's own key is checked as a plain host key
    (revoked, recorded, changed or unknown), so offering certificate algorithms first, as ssh
    does, never refuses a host whose plain key is recorded."""
    owner = getattr(conn, "_owner", None)
    if not isinstance(owner, _Client) or not owner.gate.checks_certificates_as_plain_keys():
        return _validate_host_certificate(conn, host, addr, port, cert)
    if cert.key in conn._revoked_host_keys or cert.signing_key in conn._revoked_host_keys:
        raise ValueError("Host key is revoked")
    if not owner.validate_host_public_key(host, addr, port, cert.key):
        raise ValueError("Host key is not trusted")
    return cast(asyncssh.SSHKey, cert.key)


# asyncssh has no hook for this fallback; the override only changes connections whose owner is
# our _Client (tests/remote/test_hostkeys_openssh.py checks it against a real sshd).
asyncssh.SSHClientConnection._validate_openssh_host_certificate = _validate_host_certificate_as_ssh_does  # type: ignore[method-assign,assignment]


class _Client(asyncssh.SSHClient):
    def __init__(self, gate: _HostKeyGate, kbdint: KbdintPrompt | None, password: str | None,
                 label: str) -> None:
        self.gate = gate
        self._kbdint = kbdint
        self._password = password
        self._password_offered = False  # the stored password is offered once per connection
        self._label = label

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self.gate.verify(key)

    def validate_host_ca_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self.gate.verify_ca(key)

    def kbdint_auth_requested(self) -> str | None:
        return "" if self._kbdint is not None or self._password is not None else None

    async def kbdint_challenge_received(
        self, name: str, instructions: str, lang: str, prompts: Sequence[tuple[str, bool]]
    ) -> Sequence[str] | None:
        if not prompts:
            return []  # an empty challenge only carries a message
        if self._password is not None and len(prompts) == 1 and "pass" in prompts[0][0].lower():
            if self._password_offered:
                # A second "Password:" means the stored one was wrong: answering again would retry
                # it as fast as the server asks (thousands of times) until a timeout hides the cause.
                return None
            self._password_offered = True
            return [self._password]
        if self._kbdint is None:
            return None
        title = f"{name or 'Login'} for {self._label}"
        return await self._kbdint(title, instructions, list(prompts))


class HostConnection:
    """A live, self-healing SSH connection to the host of one profile."""

    def __init__(
        self,
        profile: HostProfile,
        *,
        secrets: SecretStore | None = None,
        profiles: ProfileStore | None = None,
        known_host_key: str | asyncssh.SSHKey | None = None,
        password: str | None = None,
        accept_new: bool = False,
        on_state: StateCallback | None = None,
        confirm_host_key: ConfirmHostKey | None = None,
        kbdint_prompt: KbdintPrompt | None = None,
        known_hosts: KnownHosts | None = None,
        connect_timeout: float = 15.0,
        keepalive_interval: float = 15.0,
        reconnect: ReconnectPolicy | None = None,
    ) -> None:
        self.profile = profile
        self._secrets = secrets
        self._profiles = profiles
        self._trusted = [parse_public_key(known_host_key) if isinstance(known_host_key, str)
                         else known_host_key] if known_host_key is not None else []
        self._password = password
        self._accept_new = accept_new
        self._on_state = on_state
        self._confirm = confirm_host_key
        self._kbdint = kbdint_prompt
        self._known = known_hosts if known_hosts is not None else KnownHosts()
        self._connect_timeout = connect_timeout
        self._keepalive_interval = keepalive_interval
        self._policy = reconnect or ReconnectPolicy()
        self._state = ConnectionState.DISCONNECTED
        self._detail: Detail = ""
        self._failure: GpuwsError | None = None
        self._changed = asyncio.Event()
        self._conns: list[asyncssh.SSHClientConnection] = []  # jump hosts first, target last
        self._watcher: asyncio.Task[None] | None = None
        self._closing = False
        self._runner: SshRunner | None = None

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def detail(self) -> str:
        """The last state's explanation (an error message, or the retry in progress, counting down)."""
        return str(self._detail)

    @property
    def failure(self) -> GpuwsError | None:
        """Why reconnecting stopped for good (authentication, a host key): retrying cannot fix it.
        None while connected or still retrying, or when the last loss was only unreachability."""
        return self._failure

    @property
    def label(self) -> str:
        user = self.profile.user or getpass.getuser()
        return f"{user}@{host_token(self.profile.host, self.profile.port)}"

    def _set_state(self, state: ConnectionState, detail: Detail = "") -> None:
        self._state, self._detail = state, detail
        self._changed.set()
        self._changed = asyncio.Event()
        if self._on_state is not None:
            try:
                self._on_state(state, detail)
            except Exception:  # a broken listener must not break the connection
                log.exception("on_state callback failed")

    def note_no_driver(self, detail: str) -> None:
        """Record that the host is reachable but has no NVIDIA driver (set by the probe's caller)."""
        if self._conns:
            self._set_state(ConnectionState.NO_DRIVER, detail)

    # -- public API ----------------------------------------------------------------------------

    @property
    def runner(self) -> SshRunner:
        """A `CommandRunner` over this connection (it waits out a reconnect in progress)."""
        if self._runner is None:
            from gpuws.remote.ssh_runner import SshRunner

            self._runner = SshRunner(self)
        return self._runner

    async def connect(self) -> None:
        """Connect (through the jump hosts, if any); raises a GpuwsError saying why not."""
        self._closing = False
        self._failure = None
        self._set_state(ConnectionState.CONNECTING, self.label)
        try:
            await self._open()
        except GpuwsError as exc:
            if isinstance(exc, _FATAL):  # a reconnect by the app that met a refused login or key
                self._failure = exc
            self._set_state(error_state(exc), str(exc))
            raise
        self._set_state(ConnectionState.CONNECTED, self.label)

    async def close(self) -> None:
        """Close for good: no reconnect after this."""
        self._closing = True
        if self._watcher is not None and self._watcher is not asyncio.current_task():
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        self._watcher = None
        await self._close_conns()
        self._set_state(ConnectionState.DISCONNECTED, "closed")

    async def __aenter__(self) -> HostConnection:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def ssh(self, timeout: float | None = None) -> asyncssh.SSHClientConnection:
        """The live asyncssh connection, waiting (up to `timeout`) for a reconnect in progress."""
        async def usable() -> asyncssh.SSHClientConnection:
            while True:
                live = self._state in (ConnectionState.CONNECTED, ConnectionState.NO_DRIVER)
                if live and self._conns and not self._conns[-1].is_closed():
                    return self._conns[-1]
                if live:  # just dropped: the watcher is about to switch to RECONNECTING
                    await asyncio.sleep(0.01)
                    continue
                if self._state not in (ConnectionState.CONNECTING, ConnectionState.RECONNECTING):
                    raise NotConnected(f"not connected to {self.profile.name} ({self._state}: {self._detail})")
                await self._changed.wait()

        try:
            return await asyncio.wait_for(usable(), timeout)
        except TimeoutError:
            raise NotConnected(f"{self.profile.name} did not reconnect within {timeout:g} s") from None

    # -- connecting ----------------------------------------------------------------------------

    def _chain(self) -> list[HostProfile]:
        """The hops to the target, jump hosts first (profiles or `user@host:port` addresses, as
        `ssh -J` takes them); refuses loops and unknown jump profiles."""
        if not self.profile.jump:
            return [self.profile]
        if self._profiles is None:
            from gpuws.core.profiles import ProfileStore

            self._profiles = ProfileStore()
        try:
            return [*jump_hops(self.profile, self._profiles.get), self.profile]
        except JumpChainError as exc:
            raise JumpHostError(str(exc)) from None

    async def _open(self) -> None:
        await self._close_conns()
        conns: list[asyncssh.SSHClientConnection] = []
        try:
            for hop in self._chain():
                tunnel = conns[-1] if conns else None
                conns.append(await self._open_hop(hop, tunnel, is_target=hop is self.profile))
        except BaseException:
            for conn in reversed(conns):
                conn.close()
            raise
        self._conns = conns
        self._watcher = asyncio.get_running_loop().create_task(self._watch(conns[-1]))

    async def _open_hop(self, hop: HostProfile, tunnel: asyncssh.SSHClientConnection | None,
                        *, is_target: bool) -> asyncssh.SSHClientConnection:
        trusted = self._trusted if is_target else []
        password = self._password if is_target else None
        gate = _HostKeyGate(self._known, hop.host, hop.port, trusted, self._accept_new)
        try:
            return await self._connect_hop(hop, tunnel, gate, password)
        except UnknownHostKey:
            if self._confirm is None or gate.unknown_key is None:
                raise
            key = gate.unknown_key
            question = HostKeyQuestion(hop.host, hop.port, key_type_label(key), fingerprint(key))
            answer = self._confirm(question)
            if inspect.isawaitable(answer):
                answer = await answer
            if not answer:
                raise
            # Trust it from now on, then connect again; the key is checked afresh on that try.
            self._known.record(hop.host, hop.port, key)
            gate = _HostKeyGate(self._known, hop.host, hop.port, trusted, accept_new=False)
            return await self._connect_hop(hop, tunnel, gate, password)

    async def _connect_hop(self, hop: HostProfile, tunnel: asyncssh.SSHClientConnection | None,
                           gate: _HostKeyGate, password: str | None) -> asyncssh.SSHClientConnection:
        user = hop.user or getpass.getuser()
        label = f"{user}@{host_token(hop.host, hop.port)}"
        auth = await connect_options(hop, secrets=self._secrets, password=password)
        # OpenSSH's order with the host's recorded types (and their certificate algorithms) first;
        # a certificate no CA line covers is checked as its plain key, as ssh does.
        known_algs = self._known.preferred_algorithms(hop.host, hop.port)
        host_key_algs = known_algs + [a for a in _HOST_KEY_ALGS if a not in known_algs]
        # @revoked keys go to asyncssh too: a certificate's own key is only visible to it.
        revoked = [e.key for e in self._known.revoked_keys(hop.host, hop.port)]
        options: dict[str, Any] = {
            "port": hop.port,
            "username": user,
            "tunnel": tunnel,
            "config": None,  # the profile is the configuration; ~/.ssh/config is imported, not read
            "known_hosts": ([], [], revoked),  # nothing pre-trusted: every key goes to our gate
            "server_host_key_algs": host_key_algs,
            "connect_timeout": self._connect_timeout,
            "login_timeout": self._connect_timeout,
            "keepalive_interval": self._keepalive_interval,
            "keepalive_count_max": 3,
            **encryption_options(),  # AES-GCM first: cheaper per packet (gpuws.remote.ciphers)
            **auth,
        }
        kbdint_password = auth.get("password")
        try:
            conn, _ = await asyncssh.create_connection(
                lambda: _Client(gate, self._kbdint, kbdint_password, label), hop.host, **options
            )
        except asyncssh.HostKeyNotVerifiable:
            raise gate.not_verified(label) from None
        except asyncssh.PermissionDenied:
            methods = str(auth.get("preferred_auth", "publickey"))
            raise AuthFailed(f"authentication failed for {label} (tried {methods})") from None
        except TimeoutError as exc:
            raise HostUnreachable(f"cannot reach {label}: timed out after {self._connect_timeout:g} s",
                                  port=hop.port, timeout=self._connect_timeout) from exc
        except asyncssh.Error as exc:
            raise HostUnreachable(f"SSH session with {label} failed: {exc.reason}", port=hop.port) from exc
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise HostUnreachable(f"cannot reach {label}: {reason}", port=hop.port) from exc
        coalesce_writes(conn)  # one send per loop turn, not two per packet (gpuws.remote.wire)
        lean_packets(conn)  # no MSG_IGNORE per packet, no per-packet debug formatting (gpuws.remote.wire)
        return conn

    async def _close_conns(self) -> None:
        conns, self._conns = self._conns, []
        for conn in reversed(conns):
            conn.close()
        for conn in reversed(conns):
            with contextlib.suppress(Exception):
                await conn.wait_closed()

    # -- reconnecting --------------------------------------------------------------------------

    async def _watch(self, conn: asyncssh.SSHClientConnection) -> None:
        with contextlib.suppress(Exception):
            await conn.wait_closed()
        if self._closing:
            return
        # This task stays `self._watcher` while it reconnects, so close() can cancel it.
        await self._close_conns()
        await self._reconnect()

    async def _reconnect(self) -> None:
        for attempt in range(1, self._policy.max_retries + 1):
            delay = self._policy.delay(attempt)
            self._set_state(ConnectionState.RECONNECTING, Countdown.after_delay(  # counts down as it is read
                f"connection lost; retry {attempt}/{self._policy.max_retries} in ", delay))
            await asyncio.sleep(delay)
            if self._closing:
                return
            try:
                await self._open()
            except _FATAL as exc:  # retrying cannot fix these
                self._failure = exc
                self._set_state(error_state(exc), str(exc))
                return
            except GpuwsError as exc:
                log.info("reconnect %d to %s failed: %s", attempt, self.label, exc)
                continue
            self._set_state(ConnectionState.CONNECTED, f"{self.label} (reconnected)")
            return
        self._set_state(ConnectionState.UNREACHABLE,
                        f"gave up reconnecting to {self.label} after {self._policy.max_retries} attempts")
