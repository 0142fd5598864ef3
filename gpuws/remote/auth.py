"""Turn a profile's auth method into asyncssh connect options, with secrets from the keyring.

Each method is explicit: a profile that says "key" authenticates with that key file only (no
agent, no password), so a wrong key fails as a wrong key rather than quietly succeeding through
whatever else the machine happens to have.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncssh

from gpuws.core.errors import GpuwsError
from gpuws.core.files import LocalFileRefused, is_regular_file, read_regular_file
from gpuws.core.models import AuthMethod, HostProfile, SecretKind

if TYPE_CHECKING:
    from gpuws.core.secrets import SecretStore

# (title, instructions, [(prompt, echo)]) -> answers, or None to give up.
KbdintPrompt = Callable[[str, str, Sequence[tuple[str, bool]]], Awaitable[Sequence[str] | None]]


class AuthFailed(GpuwsError):
    """The host refused every credential we offered (or we had none to offer)."""


def _secret_store(secrets: SecretStore | None) -> SecretStore:
    if secrets is not None:
        return secrets
    from gpuws.core.secrets import SecretStore  # imported late: keyring is slow to load

    return SecretStore()


MAX_KEY_FILE_BYTES = 1024 * 1024  # a private key is a few KiB; an 8 kbit RSA key in PEM under 7 KiB


async def _stored_secret(profile: HostProfile, secrets: SecretStore | None, kind: SecretKind) -> str | None:
    """The profile's stored secret; a keyring that cannot be used means the login cannot happen,
    so it is an authentication failure (exit status 3), with the keyring's own reason and fix."""
    try:
        return await asyncio.to_thread(_secret_store(secrets).get, profile.name, kind)
    except GpuwsError as exc:
        raise AuthFailed(f"cannot log in to {profile.name}: {exc}") from None


async def _client_keys(profile: HostProfile, secrets: SecretStore | None) -> list[asyncssh.SSHKey]:
    """The profile's key, then its further identity files in order (as ssh tries every
    IdentityFile); a further one that is missing is skipped, as ssh skips it."""
    keys: list[asyncssh.SSHKey] = []
    if profile.key_path or not profile.identity_files:  # key auth without a key: _load_key says so
        keys.append(await _load_key(profile, secrets, profile.key_path))
    for extra in profile.identity_files:
        if is_regular_file(Path(extra).expanduser()):
            keys.append(await _load_key(profile, secrets, extra))
    return keys


async def _load_key(profile: HostProfile, secrets: SecretStore | None, key_path: str | None) -> asyncssh.SSHKey:
    if not key_path:
        raise AuthFailed(f"profile {profile.name} uses key auth but has no key file")
    path = Path(key_path).expanduser()
    try:
        # The one local file reader: a FIFO or a device named as the key never blocks or floods.
        data = await asyncio.to_thread(read_regular_file, path, MAX_KEY_FILE_BYTES, what="key file")
    except FileNotFoundError:
        raise AuthFailed(f"cannot read key file {path}: no such file") from None
    except LocalFileRefused as exc:
        raise AuthFailed(str(exc)) from None

    def read(passphrase: str | None) -> asyncssh.SSHKey:
        return asyncssh.import_private_key(data, passphrase)

    try:
        return await asyncio.to_thread(read, None)
    except OSError as exc:
        raise AuthFailed(f"cannot read key file {path}: {exc.strerror}") from None
    except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:
        if "passphrase" not in str(exc).lower():
            raise AuthFailed(f"key file {path} is not a private key asyncssh can read") from None
    # Encrypted: its passphrase lives in the keyring, never in the profile.
    passphrase = await _stored_secret(profile, secrets, SecretKind.PASSPHRASE)
    if passphrase is None:
        raise AuthFailed(
            f"key file {path} is encrypted; store its passphrase with "
            f"`gpuws secret set {profile.name} --kind passphrase`"
        )
    try:
        return await asyncio.to_thread(read, passphrase)
    except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError):
        raise AuthFailed(f"the stored passphrase does not unlock key file {path}") from None


async def connect_options(
    profile: HostProfile, *, secrets: SecretStore | None = None, password: str | None = None
) -> dict[str, Any]:
    """asyncssh.connect keyword arguments for this profile's auth method."""
    method = AuthMethod(profile.auth)
    if method is AuthMethod.AGENT:
        # As `ssh` does: the agent, plus the default identities or the profile's key file.
        options: dict[str, Any] = {"preferred_auth": "publickey"}
        if profile.key_path:
            options["client_keys"] = await _client_keys(profile, secrets)
        elif profile.identity_files:  # imported ones missing then: those that exist now, as ssh would
            keys = await _client_keys(profile, secrets)
            if keys:
                options["client_keys"] = keys
        return options
    if method is AuthMethod.KEY:
        return {"client_keys": await _client_keys(profile, secrets), "agent_path": None,
                "preferred_auth": "publickey"}
    if method is AuthMethod.PASSWORD:
        if password is None:
            password = await _stored_secret(profile, secrets, SecretKind.PASSWORD)
        if password is None:
            raise AuthFailed(
                f"no password stored for {profile.name}; run `gpuws secret set {profile.name} --kind password`"
            )
        return {"password": password, "client_keys": None, "agent_path": None,
                "preferred_auth": "password,keyboard-interactive"}
    # Keyboard-interactive: answered by the prompt callback (a TTY or a GUI dialog).
    options = {"client_keys": None, "agent_path": None, "preferred_auth": "keyboard-interactive"}
    if password is not None:
        options["password"] = password
    return options
