"""Open a connection by profile name, with the built-in demo host as the fallback for "demo".

Every CLI command that connects goes through `open_target`; `gpuws.app.demo` starts the demo.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from gpuws.app.demo import DEMO_NAME, start_demo
from gpuws.core.models import HostProfile
from gpuws.remote.connection import HostConnection

if TYPE_CHECKING:
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.secrets import SecretStore

__all__ = ["DEMO_NAME", "open_target", "reconnect_and_probe"]


def _find_profile(name: str, profiles: ProfileStore) -> HostProfile | None:
    return next((p for p in profiles.load() if p.name == name), None)


@contextlib.asynccontextmanager
async def open_target(
    name: str,
    *,
    accept_new: bool = False,
    profiles: ProfileStore | None = None,
    secrets: SecretStore | None = None,
    **connection_options: Any,
) -> AsyncIterator[HostConnection]:
    """A connected `HostConnection` for profile NAME, closed (and the demo stopped) on exit.

    `connection_options` go to `HostConnection` (on_state, confirm_host_key, kbdint_prompt...).
    Raises ProfileNotFound for an unknown name other than "demo", or the connection's error.
    """
    if profiles is None:
        from gpuws.core.profiles import ProfileStore

        profiles = ProfileStore()
    profile = _find_profile(name, profiles)
    if profile is not None:
        connection = HostConnection(profile, secrets=secrets, profiles=profiles, accept_new=accept_new,
                                    **connection_options)
        async with connection:
            yield connection
        return
    if name != DEMO_NAME:
        from gpuws.core.profiles import ProfileNotFound

        raise ProfileNotFound(name)

    demo = await start_demo()
    try:
        connection = HostConnection(demo.profile, password=demo.password, known_host_key=demo.known_host_key,
                                    **connection_options)
        async with connection:
            yield connection
    finally:
        await demo.stop()


async def reconnect_and_probe(profile_name: str, **connection_options: Any) -> str:
    """After a provider resize: wait for SSH on the (restarted) instance and say what GPUs it has."""
    from gpuws.remote.probe import probe

    async with open_target(profile_name, **connection_options) as conn:
        inventory = await probe(conn.runner)
    return ", ".join(g.name for g in inventory.gpus) or "no GPU"
