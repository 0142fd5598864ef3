"""Real VNC clients for the desktop tests: vncdotool (PyPI) in a child process for the framebuffer,
and a bare RFB 3.8 handshake for the greeting and the authentication result.

vncdotool runs Twisted's reactor, which cannot be restarted within one process, hence the child. The
password reaches the child on stdin, never in its argv.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

_CAPTURE = """
import sys
from vncdotool import api
port, path = sys.argv[1], sys.argv[2]
password = sys.stdin.readline().rstrip("\\n")
client = api.connect("127.0.0.1::" + port, password=password, timeout=30)
try:
    client.captureScreen(path)
finally:
    client.disconnect()
    api.shutdown()
"""


def capture(port: int, password: str, path: Path, timeout: float = 90) -> None:
    """Log in to the VNC server on 127.0.0.1:`port` with vncdotool and save its screen as PNG."""
    done = subprocess.run([sys.executable, "-c", _CAPTURE, str(port), str(path)], input=password + "\n",
                          capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    assert done.returncode == 0 and path.exists(), done.stderr[-2000:]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def greeting(port: int) -> bytes:
    """The server's first 12 bytes, e.g. b'RFB 003.008\\n'."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        return _recv_exact(sock, 12)


def vnc_auth(port: int, password: str) -> int:
    """RFB 3.8 with VNC authentication (type 2): the SecurityResult (0 ok, 1 failed)."""
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    from cryptography.hazmat.primitives.ciphers import Cipher, modes

    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        assert _recv_exact(sock, 12).startswith(b"RFB 003.")
        sock.sendall(b"RFB 003.008\n")
        count = _recv_exact(sock, 1)[0]
        assert count > 0, "the server refused the connection"
        types = _recv_exact(sock, count)
        assert 2 in types, f"no VNC authentication offered: {list(types)}"
        sock.sendall(bytes([2]))
        challenge = _recv_exact(sock, 16)
        key = bytes(int(f"{b:08b}"[::-1], 2) for b in password.encode()[:8].ljust(8, b"\0"))
        encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
        sock.sendall(encryptor.update(challenge) + encryptor.finalize())
        return int.from_bytes(_recv_exact(sock, 4), "big")


def listen_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp* write them) listening on TCP `port`."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].rpartition(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found
