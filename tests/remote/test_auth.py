"""Password and keyboard-interactive auth against an in-process asyncssh server."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

import asyncssh
import pytest

from gpuws.core.models import AuthMethod, HostProfile, SecretKind
from gpuws.remote.auth import AuthFailed, connect_options
from gpuws.remote.connection import ConnectionState, HostConnection

PASSWORD = "correct horse battery staple"
OTP = "424242"


class _Server(asyncssh.SSHServer):
    """Accepts user "alice" by password, or by keyboard-interactive password + one-time code."""

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return True

    def validate_password(self, username: str, password: str) -> bool:
        return username == "alice" and password == PASSWORD

    def kbdint_auth_supported(self) -> bool:
        return True

    def get_kbdint_challenge(self, username: str, lang: str, submethods: str) -> tuple[str, str, str, list]:  # type: ignore[type-arg]
        return "Two-factor", "Enter both", "", [("Password: ", False), ("Code: ", True)]

    def validate_kbdint_response(self, username: str, responses: Sequence[str]) -> bool:
        return list(responses) == [PASSWORD, OTP]


class _FakeSecrets:
    def __init__(self, values: dict[tuple[str, SecretKind], str]) -> None:
        self.values = values

    def get(self, profile_name: str, kind: SecretKind) -> str | None:
        return self.values.get((profile_name, kind))


async def _server(tmp_path: Path) -> tuple[asyncssh.SSHAcceptor, int, str]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    acceptor = await asyncssh.create_server(_Server, "127.0.0.1", 0, server_host_keys=[key])
    port = acceptor.sockets[0].getsockname()[1]
    return acceptor, port, key.export_public_key().decode()


def _profile(port: int, auth: AuthMethod) -> HostProfile:
    return HostProfile(name="pw", host="127.0.0.1", port=port, user="alice", auth=auth)


async def test_password_from_the_keyring_store(tmp_path: Path) -> None:
    acceptor, port, host_key = await _server(tmp_path)
    try:
        secrets = _FakeSecrets({("pw", SecretKind.PASSWORD): PASSWORD})
        conn = HostConnection(_profile(port, AuthMethod.PASSWORD), secrets=secrets,  # type: ignore[arg-type]
                              known_host_key=host_key)
        await conn.connect()
        assert conn.state is ConnectionState.CONNECTED
        await conn.close()

        wrong = _FakeSecrets({("pw", SecretKind.PASSWORD): "nope"})
        conn = HostConnection(_profile(port, AuthMethod.PASSWORD), secrets=wrong,  # type: ignore[arg-type]
                              known_host_key=host_key)
        with pytest.raises(AuthFailed) as info:
            await conn.connect()
        assert "nope" not in str(info.value) and conn.state is ConnectionState.AUTH_FAILED
    finally:
        acceptor.close()
        await acceptor.wait_closed()


async def test_missing_password_says_how_to_store_it(tmp_path: Path) -> None:
    with pytest.raises(AuthFailed, match="gpuws secret set pw --kind password"):
        await connect_options(_profile(22, AuthMethod.PASSWORD), secrets=_FakeSecrets({}))  # type: ignore[arg-type]


async def test_keyboard_interactive_goes_through_the_prompt_callback(tmp_path: Path) -> None:
    acceptor, port, host_key = await _server(tmp_path)
    asked: list[tuple[str, str, list[tuple[str, bool]]]] = []

    async def prompt(title: str, instructions: str, prompts: Sequence[tuple[str, bool]]) -> list[str]:
        asked.append((title, instructions, list(prompts)))
        return [PASSWORD, OTP]

    try:
        async with HostConnection(_profile(port, AuthMethod.KEYBOARD_INTERACTIVE), known_host_key=host_key,
                                  kbdint_prompt=prompt) as conn:
            assert conn.state is ConnectionState.CONNECTED
        assert asked == [(f"Two-factor for alice@[127.0.0.1]:{port}", "Enter both",
                          [("Password: ", False), ("Code: ", True)])]

        async def give_up(*_: object) -> None:
            return None

        conn = HostConnection(_profile(port, AuthMethod.KEYBOARD_INTERACTIVE), known_host_key=host_key,
                              kbdint_prompt=give_up)
        with pytest.raises(AuthFailed):
            await conn.connect()
    finally:
        acceptor.close()
        await acceptor.wait_closed()


async def test_encrypted_key_passphrase_comes_from_the_store(tmp_path: Path) -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp_path / "enc_key"
    key.write_private_key(path, passphrase="s3cret-pass")
    profile = HostProfile(name="k", host="h", auth=AuthMethod.KEY, key_path=str(path))
    with pytest.raises(AuthFailed, match="gpuws secret set k --kind passphrase"):
        await connect_options(profile, secrets=_FakeSecrets({}))  # type: ignore[arg-type]
    with pytest.raises(AuthFailed, match="does not unlock") as info:
        await connect_options(profile, secrets=_FakeSecrets({("k", SecretKind.PASSPHRASE): "wrong"}))  # type: ignore[arg-type]
    assert "wrong" not in str(info.value)
    options = await connect_options(profile, secrets=_FakeSecrets({("k", SecretKind.PASSPHRASE): "s3cret-pass"}))  # type: ignore[arg-type]
    assert options["client_keys"][0].public_data == key.public_data
    assert options["agent_path"] is None


async def test_unreadable_key_file_is_a_clear_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_text("not a key")
    for key_path in (str(junk), str(tmp_path / "missing")):
        profile = HostProfile(name="k", host="h", auth=AuthMethod.KEY, key_path=key_path)
        with pytest.raises(AuthFailed, match="key file"):
            await connect_options(profile, secrets=_FakeSecrets({}))  # type: ignore[arg-type]


async def test_a_fifo_or_device_as_the_key_file_is_refused_not_read(tmp_path: Path) -> None:
    """Issue 28: key files go through the one local file reader (a FIFO would block for ever)."""
    fifo = tmp_path / "key-fifo"
    os.mkfifo(fifo)
    for key_path in (str(fifo), "/dev/zero"):
        profile = HostProfile(name="k", host="h", auth=AuthMethod.KEY, key_path=key_path)
        with pytest.raises(AuthFailed, match="not a regular file"):
            await asyncio.wait_for(connect_options(profile, secrets=_FakeSecrets({})), 60)  # type: ignore[arg-type]


async def test_every_identity_file_is_offered_in_order_and_a_missing_one_skipped(tmp_path: Path) -> None:
    keys = [asyncssh.generate_private_key("ssh-ed25519") for _ in range(2)]
    for number, key in enumerate(keys):
        key.write_private_key(tmp_path / f"id_{number}")
    profile = HostProfile(name="k", host="h", auth=AuthMethod.KEY, key_path=str(tmp_path / "id_0"),
                          identity_files=[str(tmp_path / "missing"), str(tmp_path / "id_1")])
    options = await connect_options(profile, secrets=_FakeSecrets({}))  # type: ignore[arg-type]
    assert [k.public_data for k in options["client_keys"]] == [k.public_data for k in keys]
