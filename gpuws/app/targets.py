"""Open a connection by profile name, with the built-in demo host as the fallback for "demo".

Every CLI command that connects goes through `open_target` (or `open_host`): the host is opened on
a `Workspace` owned by the command's event loop, through the same `HostLink` as in the window.
`gpuws.app.demo` starts the demo.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypedDict

from gpuws.app.demo import DEMO_NAME, RunningDemo, start_demo
from gpuws.app.hosts import HostLink, RetryPace
from gpuws.app.workspace import HostRecord, Workspace
from gpuws.core.models import HostProfile
from gpuws.remote.connection import HostConnection

if TYPE_CHECKING:
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.secrets import SecretStore

__all__ = ["DEMO_NAME", "host_workspace", "open_host", "open_target", "reconnect_and_probe"]

# A script retries a dropped host at once, then every few seconds (its own timeout ends it).
SCRIPT_PACE = RetryPace(fast=3, fast_delay_s=1.0, slow_s=5.0)


class _DemoCredentials(TypedDict, total=False):
    """What only the demo host's link is given: its throwaway password and its host key."""

    password: str
    known_host_key: str


def _find_profile(name: str, profiles: ProfileStore) -> HostProfile | None:
    return next((p for p in profiles.load() if p.name == name), None)


@contextlib.asynccontextmanager
async def open_target(
    name: str,
    *,
    accept_new: bool = False,
    profiles: ProfileStore | None = None,
    secrets: SecretStore | None = None,
    probe: bool = False,
    pace: RetryPace | None = None,
    **connection_options: object,
) -> AsyncIterator[HostConnection]:
    """A connected `HostConnection` for profile NAME, closed (and the demo stopped) on exit.

    The host is opened on a `Workspace` owned by the running event loop, through the same
    `HostLink` the window uses (one connect-and-probe): a first connect that fails raises its
    error; once connected, a drop is retried by the link (fast, then at `pace`) until the exit.
    `probe` reads the inventory too (`workspace.host(name).inventory`, via `open_host`).
    `connection_options` go to `HostConnection` (on_state, confirm_host_key, kbdint_prompt...).
    Raises ProfileNotFound for an unknown name other than "demo", or the connection's error.
    """
    async with open_host(name, accept_new=accept_new, profiles=profiles, secrets=secrets, probe=probe, pace=pace,
                         **connection_options) as (_workspace, record):
        connection: HostConnection = record.connection  # type: ignore[assignment]
        yield connection


@contextlib.asynccontextmanager
async def open_host(
    name: str,
    *,
    accept_new: bool = False,
    profiles: ProfileStore | None = None,
    secrets: SecretStore | None = None,
    probe: bool = True,
    pace: RetryPace | None = None,
    **connection_options: object,
) -> AsyncIterator[tuple[Workspace, HostRecord]]:
    """Profile NAME (or the demo) opened on a Workspace owned by the running loop: the Workspace
    and the host's record (connection, state, inventory), once connected."""
    if profiles is None:
        from gpuws.core.profiles import ProfileStore

        profiles = ProfileStore()
    profile = _find_profile(name, profiles)
    demo: RunningDemo | None = None
    credentials: _DemoCredentials = {}
    if profile is None:
        if name != DEMO_NAME:
            from gpuws.core.profiles import ProfileNotFound

            raise ProfileNotFound(name)
        demo = await start_demo()
        profile = demo.profile
        credentials = {"password": demo.password, "known_host_key": demo.known_host_key}
    else:
        connection_options = {"secrets": secrets, "profiles": profiles, **connection_options}
    loop = asyncio.get_running_loop()

    def post(func: Callable[[], None]) -> None:
        loop.call_soon(func)

    # A command reads what it needs itself (`gpuws watch` its own stream): no telemetry feed here.
    workspace = Workspace(lambda coro: asyncio.run_coroutine_threadsafe(coro, loop), post=post, stream=False)
    link = HostLink(profile, workspace.spawn, workspace.post, probe=probe, fail_first=True,
                    pace=pace or SCRIPT_PACE, connection_options=connection_options, **credentials)
    try:
        workspace.attach(link)
        workspace.connect(profile.name, accept_new=accept_new)
        await link.ready()
        record = workspace.host(profile.name)
        assert record is not None
        yield workspace, record
    finally:
        closing = workspace.close(profile.name)
        if closing is not None:
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(closing)
        workspace.close(timeout=5.0)
        if demo is not None:
            await demo.stop()


@contextlib.asynccontextmanager
async def host_workspace(name: str, *, profiles: ProfileStore | None = None) -> AsyncIterator[Workspace]:
    """Saved profile NAME on a Workspace owned by the running loop, not connected: the way in for
    work on the host's instance through its provider (`gpuws resize NAME type:T`, `start`, `stop`),
    which reaches the host itself when it runs. ProfileNotFound for an unknown name."""
    if profiles is None:
        from gpuws.core.profiles import ProfileStore

        profiles = ProfileStore()
    profile = _find_profile(name, profiles)
    if profile is None:
        from gpuws.core.profiles import ProfileNotFound

        raise ProfileNotFound(name)
    loop = asyncio.get_running_loop()

    def post(func: Callable[[], None]) -> None:
        """Back to the command's loop (the Workspace's owner)."""
        loop.call_soon(func)

    workspace = Workspace(lambda coro: asyncio.run_coroutine_threadsafe(coro, loop), post=post, stream=False)
    workspace.add_host(profile)
    try:
        yield workspace
    finally:
        workspace.close(timeout=5.0)


async def reconnect_and_probe(profile_name: str, **connection_options: Any) -> str:
    """After a provider resize: wait for SSH on the (restarted) instance and say what GPUs it has."""
    async with open_host(profile_name, **connection_options) as (_workspace, record):
        inventory = record.inventory
    return ", ".join(g.name for g in inventory.gpus) if inventory is not None and inventory.gpus else "no GPU"
