"""Provider tokens: the one lookup both the resize and the power services use."""

from __future__ import annotations

import asyncio

from gpuws.core.errors import GpuwsError
from gpuws.core.models import SecretKind


def provider_token(profile_name: str) -> str | None:
    """The provider API token of `profile_name` from the keyring, or None.

    None (no token, or no usable keyring) means the provider CLI uses its own login; the token
    itself never reaches a log or an exception.
    """
    from gpuws.core.secrets import SecretStore

    try:
        return SecretStore().get(profile_name, SecretKind.TOKEN)
    except GpuwsError:
        return None


async def provider_token_async(profile_name: str) -> str | None:
    """`provider_token` off the event loop (the keyring may block on D-Bus)."""
    return await asyncio.to_thread(provider_token, profile_name)
