"""Fleets in the application layer: a fleet's Prometheus opened directly or through an SSH tunnel
over a host profile (`--via`), for the CLI (`open_fleet`) and the window (`FleetConnection`).

The HTTP client and the fleet model are in `gpuws.remote.prometheus`; reaching a Prometheus
through a host needs `open_target`, which is this layer's (it knows the demo host too).
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from gpuws.core.fleet.profiles import FleetProfile
from gpuws.core.models import AlertThresholds
from gpuws.remote.prometheus import (
    DEFAULT_TIMEOUT_S,
    FleetHistory,
    FleetSource,
    PrometheusClient,
    Snapshot,
    TlsOptions,
    fleet_credentials,
)

if TYPE_CHECKING:
    from gpuws.app.advice import FleetAdviceReport


@contextlib.asynccontextmanager
async def open_fleet(profile: FleetProfile, *, secrets: Any = None, accept_new: bool = False,
                     thresholds: AlertThresholds | None = None,
                     timeout: float = DEFAULT_TIMEOUT_S) -> AsyncIterator[FleetSource]:
    """A `FleetSource` for the profile, through an SSH tunnel over `via` when it has one."""
    credentials = fleet_credentials(profile, secrets)
    tls = TlsOptions(ca_file=profile.ca_file, client_cert=profile.client_cert, client_key=profile.client_key,
                     insecure=profile.insecure)
    if profile.via is None:
        async with PrometheusClient(profile.prometheus, name=profile.name, timeout=timeout, tls=tls,
                                    tenant=profile.tenant, **credentials) as client:
            yield FleetSource(profile, client, thresholds)
        return
    # SSH (asyncssh, cryptography: ~20 MiB) only for a fleet reached through a host.
    from gpuws.app.targets import open_target
    from gpuws.core.tunnels import TunnelSpec
    from gpuws.remote.tunnels import Tunnel

    url = urllib.parse.urlsplit(profile.prometheus)
    port = url.port or (443 if url.scheme == "https" else 80)
    assert url.hostname is not None  # validate_url guarantees a host
    async with open_target(profile.via, accept_new=accept_new) as connection:
        tunnel = Tunnel(connection, TunnelSpec(remote_port=port, remote_host=url.hostname))
        async with tunnel:
            local = f"{url.scheme}://127.0.0.1:{tunnel.local_port}{url.path}"
            async with PrometheusClient(local, name=profile.name, timeout=timeout, host_header=url.netloc,
                                        tls=tls, tenant=profile.tenant, **credentials) as client:
                yield FleetSource(profile, client, thresholds)


class FleetConnection:
    """A long-lived `FleetSource` for the window: opened, read and closed on the asyncio loop thread."""

    def __init__(self, profile: FleetProfile, *, secrets: Any = None,
                 thresholds: AlertThresholds | None = None) -> None:
        self.profile = profile
        self._secrets = secrets
        self._thresholds = thresholds
        self._stack: contextlib.AsyncExitStack | None = None
        self.source: FleetSource | None = None

    async def open(self) -> FleetSource:
        if self.source is None:
            stack = contextlib.AsyncExitStack()
            try:
                self.source = await stack.enter_async_context(
                    open_fleet(self.profile, secrets=self._secrets, thresholds=self._thresholds))
            except BaseException:
                await stack.aclose()
                raise
            self._stack = stack
        return self.source

    async def snapshot(self) -> Snapshot:
        return await (await self.open()).snapshot()

    async def history(self, window_s: float, points: int = 600) -> FleetHistory:
        return await (await self.open()).history(window_s, points)

    async def advice(self, window_s: float, **options: Any) -> FleetAdviceReport:
        """Right-size advice per GPU over `window_s` (`gpuws.app.advice.advise_fleet`'s options)."""
        from gpuws.app.advice import advise_fleet

        return await advise_fleet(await self.open(), window_s=window_s, **options)

    async def close(self) -> None:
        stack, self._stack, self.source = self._stack, None, None
        if stack is not None:
            await stack.aclose()
