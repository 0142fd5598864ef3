"""A stored password is offered once per connection: a server that asks again gets "authentication
failed" (exit 3), not thousands of retries ending in a timeout (issue 13)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import asyncssh
import pytest

from gpuws.core.models import AuthMethod, HostProfile, SecretKind
from gpuws.core.secrets import KeyringUnavailable, SecretStore
from gpuws.remote.auth import AuthFailed
from gpuws.remote.connection import ConnectionState, HostConnection

REPO = Path(__file__).resolve().parents[2]


class _AlwaysAsking(asyncssh.SSHServer):
    """Keyboard-interactive only; every answer is wrong and answered with another "Password:"."""

    attempts = 0

    def begin_auth(self, username: str) -> bool:
        return True

    def kbdint_auth_supported(self) -> bool:
        return True

    def get_kbdint_challenge(self, username: str, lang: str, submethods: str) -> tuple[str, str, str, list]:  # type: ignore[type-arg]
        return "", "", "", [("Password: ", False)]

    def validate_kbdint_response(self, username: str, responses: Sequence[str]) -> tuple[str, str, str, list]:  # type: ignore[type-arg]
        type(self).attempts += 1
        return "", "", "", [("Password: ", False)]  # ask again, forever


async def test_wrong_stored_password_is_offered_once_then_auth_failed() -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    acceptor = await asyncssh.create_server(_AlwaysAsking, "127.0.0.1", 0, server_host_keys=[key])
    port = acceptor.sockets[0].getsockname()[1]
    states: list[ConnectionState] = []
    try:
        profile = HostProfile(name="pw", host="127.0.0.1", port=port, user="alice", auth=AuthMethod.PASSWORD)
        conn = HostConnection(profile, password="wrong", known_host_key=key.export_public_key().decode(),
                              connect_timeout=20, on_state=lambda s, _d: states.append(s))
        with pytest.raises(AuthFailed, match="authentication failed"):
            await conn.connect()
    finally:
        acceptor.close()
    assert _AlwaysAsking.attempts == 1
    assert states[-1] is ConnectionState.AUTH_FAILED


def test_unknown_keyring_backend_is_the_no_usable_keyring_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring.core

    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "nosuch.module.Keyring")
    # keyring loads its backend once per process; start from scratch as a new gpuws process does.
    monkeypatch.setattr(keyring.core, "_keyring_backend", None)
    with pytest.raises(KeyringUnavailable, match="no usable keyring"):
        SecretStore().get("gpu1", SecretKind.PASSWORD)


def test_unknown_keyring_backend_in_the_cli_is_one_line(isolated_home: Path) -> None:
    env = {**os.environ, "HOME": str(isolated_home), "PYTHONPATH": str(REPO),
           "PYTHON_KEYRING_BACKEND": "keyring.backends.nosuch.Keyring"}
    done = subprocess.run([sys.executable, "-m", "gpuws", "secret", "clear", "gpu1", "--kind", "password"],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert "no usable keyring" in done.stderr
