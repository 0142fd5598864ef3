"""Start and stop a host's cloud instance through its provider CLI (both front ends call this)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from gpuws.app.providers import provider_token_async
from gpuws.core.errors import RefusedInput
from gpuws.core.models import HostProfile
from gpuws.core.runner import CommandRunner
from gpuws.remote.provider_ops import PowerPlan, PowerResult, ProgressLine, plan_power, run_power


def parse_pre_stop(text: str) -> list[str] | None:
    """The pre-stop command line as an argv (None when empty); RefusedInput when it cannot be split."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise RefusedInput(f"pre-stop command: {exc}") from None
    return argv or None


def power_plan(profile: HostProfile, action: str) -> PowerPlan:
    """The provider commands that would `start` or `stop` the host's instance (nothing runs)."""
    return plan_power(profile.provider, action)


async def power(
    profile: HostProfile,
    action: str,
    *,
    pre_stop: Sequence[str] | None = None,
    host_runner: CommandRunner | None = None,
    progress: ProgressLine | None = None,
) -> PowerResult:
    """Start or stop the host's instance; for a stop, `pre_stop` runs first on the host."""
    plan = power_plan(profile, action)
    token = await provider_token_async(profile.name)
    return await run_power(plan, token=token, pre_stop=pre_stop if action == "stop" else None,
                           host_runner=host_runner, progress=progress)
