"""Right-size advice for a fleet, the one place the CLI (`gpuws advise FLEET`) and the fleet view call.

`advise_fleet` reads a window of the fleet's Prometheus (`FleetSource.usage_window`), takes the
host profiles (for prices and for the host a GPU opens) and computes the advice per physical GPU
(`gpuws.core.fleet.advice`). Reading the profiles is disk work: it runs in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuws.core.advice import DEFAULT_WINDOW_S, AdvicePolicy
from gpuws.core.fleet.advice import FleetGpuAdvice, advise_fleet_window, fleet_report
from gpuws.core.jsontypes import JsonObject
from gpuws.core.models import HostProfile
from gpuws.remote.prometheus import FleetSource


@dataclass(frozen=True)
class FleetAdviceReport:
    """The advice for every GPU of one fleet over one window."""

    fleet: str
    window_s: float
    gpus: list[FleetGpuAdvice]

    def to_dict(self) -> JsonObject:
        """`gpuws advise FLEET --json`."""
        return fleet_report(self.fleet, self.window_s, self.gpus)

    @property
    def simulated(self) -> bool:
        """Whether any of its GPUs is simulated (the demo host)."""
        return any(g.simulated for g in self.gpus)


def _load_profiles() -> list[HostProfile]:
    from gpuws.core.profiles import ProfileStore

    return ProfileStore().load()


async def advise_fleet(
    source: FleetSource,
    *,
    window_s: float = DEFAULT_WINDOW_S,
    policy: AdvicePolicy | None = None,
    host_profiles: Sequence[HostProfile] | None = None,
    uuids: Mapping[str, Iterable[str]] | None = None,
    end: float | None = None,
) -> FleetAdviceReport:
    """Advice per GPU of the fleet from what its Prometheus holds over the last `window_s`.

    `host_profiles` default to the saved ones; `uuids` (profile name -> GPU UUIDs seen on it, the
    window knows them from inventories) make the match to a host exact where names differ.
    """
    window = await source.usage_window(window_s, end=end)
    profiles = list(host_profiles) if host_profiles is not None else await asyncio.to_thread(_load_profiles)
    advices = await asyncio.to_thread(
        advise_fleet_window, window, profiles, fleet_price_per_gpu_hour=source.profile.price_per_gpu_hour,
        uuids=uuids, policy=policy)
    return FleetAdviceReport(source.profile.name, window_s, advices)
