"""Fewer system calls per SSH packet: an SSH connection's writes joined per event-loop turn.

asyncssh writes every packet to the socket on its own, and before each one it sends an empty
MSG_IGNORE packet (a traffic-analysis countermeasure), so a bulk transfer costs two `send` calls
per 32 KiB channel packet: on loopback the `send` calls were the largest single cost of `gpuws cp`
and of the tunnel's client -> host direction (cProfile of a 256 MiB upload: 17,535 `send` calls,
19 % of its time; 246 with this).
`coalesce_writes` puts a thin transport in front of the socket's: the packets one turn of the
event loop produces go out in one `send`, in order, at the end of that turn (no added latency
beyond it). Everything else (close, abort, flow control, extra info) is the socket transport's.

`lean_packets` cuts asyncssh's per-packet work that does not reach the wire as data:
- asyncssh sends an empty MSG_IGNORE before *every* packet once encrypting. That counters the
  chosen-plaintext attack on CBC mode (a predictable IV); with a CTR or AEAD cipher (AES-GCM,
  chacha20-poly1305: what gpuws negotiates, gpuws.remote.ciphers) it protects nothing, OpenSSH does
  not send it, and it doubles the packets encrypted and sent. Kept under a CBC cipher.
- every packet's debug line (packet type name, byte count) is formatted before asyncssh checks
  whether packet logging (its debug level 3) is on; the wrapper checks first. With debug level
  3 set (`asyncssh.set_debug_level(3)`), every packet is logged as before.
cProfile of a 128 MiB upload: 9,365 `send_packet` calls and 12,986 `_log_packet` calls without
this; see benchmarks/bench_transfer.py for the effect on the command's CPU.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from asyncssh.logging import SSHLogger
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

log = logging.getLogger(__name__)


class CoalescingTransport:
    """Write-joining front of an asyncio transport (see the module's doc)."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._parts: list[bytes] = []
        self._scheduled = False

    def write(self, data: bytes) -> None:
        """Queue `data`; it goes out with the rest of this loop turn's writes."""
        self._parts.append(data)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what is queued, now."""
        self._scheduled = False
        if not self._parts:
            return
        data = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._parts.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def write_eof(self) -> None:
        """Write what is queued, then half-close."""
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        """Write what is queued, then close."""
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        """Drop what is queued and close at once."""
        self._parts.clear()
        self._transport.abort()

    def pause_reading(self) -> None:
        """Stop reading from the socket (flow control)."""
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        """Read from the socket again."""
        self._transport.resume_reading()

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)


def _packet_logging_on() -> bool:
    """Whether asyncssh logs every packet (its debug level 3), now."""
    return _ssh_logger()._debug_level >= 3


@functools.cache
def _ssh_logger() -> type[SSHLogger]:
    # Looked up once, not by an import statement per packet (4,275 of them in a 256 MiB download).
    from asyncssh.logging import SSHLogger

    return SSHLogger


def quiet_packet_logging(handler: object) -> None:
    """Skip asyncssh's per-packet debug formatting on `handler` (a connection or a channel) while
    packet logging is off; a no-op on an asyncssh whose internals differ."""
    for name in ("log_sent_packet", "log_received_packet"):
        log_packet = getattr(handler, name, None)
        if log_packet is None or getattr(log_packet, "_gpuws", False):
            continue

        def checked(*args: object, _log: Callable[..., None] = log_packet, **kwargs: object) -> None:
            """asyncssh's packet log call, made only while packet logging is on."""
            if _packet_logging_on():
                _log(*args, **kwargs)

        checked._gpuws = True  # type: ignore[attr-defined]
        setattr(handler, name, checked)


def lean_packets(conn: object) -> None:
    """No MSG_IGNORE before each packet (unless the cipher is CBC) and no per-packet debug
    formatting while it is off, on asyncssh connection `conn` (see the module's doc)."""
    quiet_packet_logging(conn)
    send_packet = getattr(conn, "send_packet", None)
    get_extra_info = getattr(conn, "get_extra_info", None)
    if send_packet is None or get_extra_info is None or getattr(send_packet, "_gpuws", False):
        return
    from asyncssh.constants import MSG_CHANNEL_DATA, MSG_IGNORE

    fast = _FastData(conn)

    def lean_send_packet(pkttype: int, *args: bytes, handler: object = None) -> None:
        """asyncssh's `send_packet`, less its own empty MSG_IGNORE under a non-CBC cipher, and with
        channel data under AES-GCM sealed in fewer copies (`_FastData`)."""
        if pkttype == MSG_CHANNEL_DATA and fast.send(args, handler):
            return
        # asyncssh's own inserted ignore: an empty string; the cipher is looked up per packet, as
        # a re-key may change it.
        if pkttype == MSG_IGNORE and args == (_EMPTY_STRING,) and not str(
                get_extra_info("send_cipher", "") or "").endswith("-cbc"):
            return
        send_packet(pkttype, *args, handler=handler)

    lean_send_packet._gpuws = True  # type: ignore[attr-defined]
    conn.send_packet = lean_send_packet  # type: ignore[attr-defined]


_EMPTY_STRING = b"\0\0\0\0"  # an SSH string of no bytes, as asyncssh's MSG_IGNORE carries


class _Connection(Protocol):
    """The internals of an asyncssh connection that `_FastData` reads and advances (checked at start)."""

    _send_encryption: object
    _compressor: object
    _kex_complete: bool
    _auth_complete: bool
    _rekey_bytes_sent: int
    _rekey_bytes: int
    _rekey_seconds: float
    _rekey_time: float
    _send_enchdrlen: int
    _send_blocksize: int
    _send_seq: int

    def _send(self, data: bytes) -> None: ...

    def log_sent_packet(self, pkttype: int, pktid: int | None, packet: bytes) -> None:
        """asyncssh's packet log (its debug level 3)."""


class _FastData:
    """Channel data packets under AES-GCM, sealed as asyncssh seals them, in fewer copies.

    Per 32 KiB data packet (sshd's largest for session and forwarding channels, so an upload and the
    tunnel's client -> host direction send 32,768 of them per GiB) asyncssh joins the payload three
    times, builds a new `AESGCM` (its key schedule) for each packet, splits the sealed packet into
    body and tag and joins them again. Here the packet is built in one join, sealed by one `AESGCM`
    kept per key, and handed to the transport as header and sealed body (the coalescing transport
    joins a loop turn's writes anyway). Sequence number, re-key byte count and packet logging are
    kept as asyncssh keeps them. Every other case (not yet authenticated, a re-key due, compression,
    another cipher, an asyncssh whose internals differ) goes to asyncssh's own `send_packet`.
    """

    def __init__(self, conn: object) -> None:
        self._conn = conn
        try:
            from asyncssh.crypto.cipher import GCMCipher
            from asyncssh.encryption import GCMEncryption
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:  # pragma: no cover - an asyncssh without these: asyncssh's own path
            self._usable = False
            return
        self._gcm_encryption, self._gcm_cipher, self._aesgcm = GCMEncryption, GCMCipher, AESGCM
        needed = ("_send_encryption", "_compressor", "_kex_complete", "_auth_complete", "_rekey_bytes_sent",
                  "_rekey_bytes", "_rekey_seconds", "_rekey_time", "_send_enchdrlen", "_send_blocksize",
                  "_send_seq", "_send")
        self._usable = all(hasattr(conn, name) for name in needed)
        self._cipher: object = None
        self._aead: AESGCM | None = None

    def send(self, args: tuple[bytes, ...], handler: object) -> bool:
        """Send one MSG_CHANNEL_DATA packet of `args`; False (nothing sent) when asyncssh must."""
        if not self._usable:
            return False
        conn = cast(_Connection, self._conn)
        enc = conn._send_encryption
        if (type(enc) is not self._gcm_encryption or conn._compressor is not None or not conn._kex_complete
                or not conn._auth_complete or conn._rekey_bytes_sent >= conn._rekey_bytes
                or (conn._rekey_seconds and time.monotonic() >= conn._rekey_time)):
            return False
        cipher = getattr(enc, "_cipher", None)
        if type(cipher) is not self._gcm_cipher:
            return False
        if cipher is not self._cipher:  # new keys (the first packet, or after a re-key)
            self._cipher, self._aead = cipher, self._aesgcm(cipher._key)  # type: ignore[attr-defined]
        assert self._aead is not None
        size = 1 + sum(len(a) for a in args)  # the type byte and the payload
        blocksize = conn._send_blocksize
        padlen = -(conn._send_enchdrlen + size) % blocksize
        if padlen < 4:
            padlen += blocksize
        packet = b"".join((bytes((padlen, _MSG_CHANNEL_DATA)), *args, os.urandom(padlen)))
        header = len(packet).to_bytes(4, "big")
        sealed = self._aead.encrypt(cipher._iv, packet, header)  # type: ignore[attr-defined]
        cipher._update_iv()  # type: ignore[attr-defined]
        seq = conn._send_seq
        conn._send(header)
        conn._send(sealed)
        conn._send_seq = (seq + 1) & 0xFFFFFFFF
        conn._rekey_bytes_sent += len(packet)
        if _packet_logging_on():
            logged = bytes((_MSG_CHANNEL_DATA,)) + b"".join(args)
            cast(_Connection, handler or conn).log_sent_packet(_MSG_CHANNEL_DATA, seq, logged)
        return True


_MSG_CHANNEL_DATA = 94  # RFC 4254; asyncssh.constants.MSG_CHANNEL_DATA


def coalesce_writes(conn: object) -> None:
    """Put a `CoalescingTransport` in front of asyncssh connection `conn`'s socket (once; a no-op
    on an asyncssh whose internals differ)."""
    transport = getattr(conn, "_transport", None)
    if transport is None or isinstance(transport, CoalescingTransport) or not hasattr(transport, "write"):
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    conn._transport = CoalescingTransport(transport, loop)  # type: ignore[attr-defined]
