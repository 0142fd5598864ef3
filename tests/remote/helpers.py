"""Helpers for the SSH layer's tests against the real sshd (tests.support.sshd)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from gpuws.core.models import AuthMethod, HostProfile
from tests.support.sshd import SshdServer


def key_profile(server: SshdServer, name: str = "gpu1", **changes: object) -> HostProfile:
    """A key-auth profile for a tests.support.sshd.SshdServer."""
    fields: dict[str, object] = {
        "name": name, "host": "127.0.0.1", "port": server.port, "user": server.user,
        "auth": AuthMethod.KEY, "key_path": str(server.client_key),
    }
    fields.update(changes)
    return HostProfile(**fields)


def trust(server: SshdServer, home: Path) -> Path:
    """Record the server's host key in ~/.ssh/known_hosts, as `ssh` would have."""
    path = home / ".ssh" / "known_hosts"
    with path.open("a") as handle:
        handle.write(server.known_hosts_line())
    return path


def ssh_keygen_fingerprint(public_key_file: Path) -> str:
    """The SHA256 fingerprint as OpenSSH's own tool prints it."""
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(public_key_file)],
                         capture_output=True, text=True, check=True).stdout
    return out.split()[1]


def remote_processes(pattern: str) -> list[str]:
    """Live processes whose command line matches `pattern` (zombies have none, so never match)."""
    out = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


def wait_gone(pattern: str, timeout: float = 5.0) -> list[str]:
    """The processes matching `pattern` still alive after up to `timeout` s (a killed process group
    takes a moment to go on a busy machine); [] once they are all gone."""
    deadline = time.monotonic() + timeout
    while (left := remote_processes(pattern)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
