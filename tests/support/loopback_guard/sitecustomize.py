"""Loaded by every Python process a cloud test starts with this directory on PYTHONPATH (gpuws,
and the `aws` CLI it runs): a TCP or UDP connection to an address outside 127.0.0.0/8 and ::1 is
refused with an error that names it, and the refusal is written to $GPUWS_DIAL_LOG, so a test
proves that moto's public addresses (54.x) are read and never dialled. Unix sockets (D-Bus, the
keyring) pass."""

from __future__ import annotations

import ipaddress
import os
import socket

_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _check(sock: socket.socket, address: object) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
        return
    try:
        ip = ipaddress.ip_address(str(address[0]).split("%", 1)[0])
    except ValueError:
        return  # a name: resolved first, and its address is what gets dialled
    if ip.is_loopback:
        return
    log = os.environ.get("GPUWS_DIAL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} refused {ip}\n")
    raise PermissionError(13, f"test guard: refused to dial {ip} (tests dial loopback only)")


def _guarded_connect(self: socket.socket, address: object) -> None:
    _check(self, address)
    _connect(self, address)  # type: ignore[arg-type]


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    _check(self, address)
    return _connect_ex(self, address)  # type: ignore[arg-type]


socket.socket.connect = _guarded_connect  # type: ignore[method-assign,assignment]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign,assignment]
