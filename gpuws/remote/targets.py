"""Open a connection by profile name, with the built-in demo host as the fallback for "demo".

`open_target("demo")` with no saved profile of that name starts the simulated GPU host
in-process (its state persists under `data_dir()/"demo-host"`, so MIG layouts survive runs) and
connects to it with the password and host key it announces; nothing is written to known_hosts.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from gpuws.core.models import HostProfile
from gpuws.core.paths import data_dir
from gpuws.remote.connection import HostConnection

if TYPE_CHECKING:
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.secrets import SecretStore

DEMO_NAME = "demo"


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

    from gpuws.sim.server import DemoHost, demo_profile

    demo = DemoHost(state_dir=data_dir() / "demo-host")
    info = await demo.start()
    try:
        connection = HostConnection(demo_profile(info), password=info.password,
                                    known_host_key=info.known_hosts_line, **connection_options)
        async with connection:
            yield connection
    finally:
        await demo.stop()
