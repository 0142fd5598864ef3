"""The Resize tab's remote work: coroutines run on the loop thread through the bridge. Never Qt.

Each function takes the host's `CommandRunner` (the connection's `SshRunner`, or a LocalRunner in
tests) and returns plain data; the tab turns results into widgets on the GUI thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile, SecretKind
from gpuws.core.nvsmi.compute_apps import ComputeApp
from gpuws.core.resize.audit import AuditLog, AuditRecord, now_iso
from gpuws.core.resize.catalog import GpuModel
from gpuws.core.resize.plan import Plan
from gpuws.core.resize.provider import ProviderPlan
from gpuws.core.resize.state import GpuMigState
from gpuws.core.runner import CommandRunner
from gpuws.remote.resize import MigResizer, ProgressCallback, ProviderResult, ResizeResult, run_provider_resize


class PlanChanged(GpuwsError):
    """The GPU changed between showing the plan and applying it; nothing was changed."""


@dataclass(frozen=True)
class MigPreview:
    """Everything the tab shows before Apply: the GPU now, the exact plan, what would be stopped."""

    state: GpuMigState
    model: GpuModel
    plan: Plan
    processes: list[ComputeApp] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)  # may block the MIG mode change / GPU reset


async def read_gpus(runner: CommandRunner) -> list[GpuMigState]:
    """Every GPU of the host with its MIG mode and layout."""
    return await MigResizer(runner).read_gpus()


async def preview_mig(runner: CommandRunner, gpu_index: int, target: str) -> MigPreview:
    """Plan `target` for GPU `gpu_index` and list its compute processes (changes nothing)."""
    resizer = MigResizer(runner)
    state, model, plan = await resizer.plan(gpu_index, target)
    if plan.empty:
        return MigPreview(state, model, plan)
    processes = await resizer.compute_apps(state)
    blockers = await resizer.reset_blockers() if plan.needs_mode_change else []
    return MigPreview(state, model, plan, processes, blockers)


async def apply_mig(
    runner: CommandRunner,
    profile: HostProfile,
    shown: Plan,
    *,
    stop_processes: bool,
    progress: ProgressCallback,
    audit: AuditLog,
) -> ResizeResult:
    """Apply the plan the user confirmed, verify it (or roll back), and record it in the audit log.

    The plan is made again from the GPU's state right now: if it differs from the one the user
    read and confirmed, PlanChanged is raised before anything runs.
    """
    resizer = MigResizer(runner)
    state, _, fresh = await resizer.plan(shown.gpu_index, shown.after)
    if [s.argv for s in fresh.steps] != [s.argv for s in shown.steps]:
        raise PlanChanged(
            f"GPU {shown.gpu_index} changed since the plan was shown (it is now {fresh.before.describe()}); "
            "nothing was changed: review the new plan"
        )
    started = now_iso()
    result = await resizer.resize(shown.gpu_index, shown.after, stop_processes=stop_processes, progress=progress)
    record = AuditRecord(
        host=profile.name, gpu=state.index, backend="mig", target=shown.after.describe(),
        before=fresh.before.describe(), after=result.after.describe() if result.after else None,
        outcome=result.outcome, ok=result.ok, plan=[s.to_dict() for s in fresh.steps], log=result.log,
        started_at=started, simulated=profile.simulated,
    )
    await asyncio.to_thread(audit.append, record)
    return result


async def apply_provider(
    profile: HostProfile,
    plan: ProviderPlan,
    *,
    reconnect: Callable[[], Awaitable[str]],
    progress: ProgressCallback,
    audit: AuditLog,
) -> ProviderResult:
    """Change the instance type through the provider CLI (token from the keyring, never shown)."""
    token = await asyncio.to_thread(_provider_token, profile.name)
    started = now_iso()
    result = await run_provider_resize(plan, token=token, reconnect=reconnect, progress=progress)
    record = AuditRecord(
        host=profile.name, gpu=None, backend="provider", target=f"type:{plan.instance_type}",
        before=profile.slice_profile, after=plan.instance_type if result.ok else None,
        outcome=result.outcome, ok=result.ok, plan=plan.to_dict()["steps"], log=result.log,
        started_at=started, simulated=profile.simulated,
    )
    await asyncio.to_thread(audit.append, record)
    return result


def _provider_token(profile_name: str) -> str | None:
    """The provider token from the keyring; None without one (the CLI uses its own configuration)."""
    from gpuws.core.secrets import SecretStore

    try:
        return SecretStore().get(profile_name, SecretKind.TOKEN)
    except GpuwsError:
        return None


async def reconnect_and_probe(profile_name: str) -> str:
    """After a provider resize: wait for SSH on the (restarted) instance and say what GPUs it has."""
    from gpuws.remote.probe import probe
    from gpuws.remote.targets import open_target

    async with open_target(profile_name) as conn:
        inventory = await probe(conn.runner)
    return ", ".join(g.name for g in inventory.gpus) or "no GPU"


async def read_audit(audit: AuditLog, host: str) -> list[AuditRecord]:
    """The host's resize history, oldest first (file IO off the loop)."""
    return await asyncio.to_thread(audit.read, host)
