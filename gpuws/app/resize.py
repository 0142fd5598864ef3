"""Resizing a GPU: the one implementation the CLI (`gpuws resize`) and the Resize tab both call.

A MIG resize re-plans from the GPU's state right now and refuses if the plan differs from the one
the user confirmed (`PlanChanged`), runs and verifies it (or rolls back), appends the audit record,
and records the verified slice and its price in the saved profile, so the cost meter follows it.
A provider resize changes the instance type through the provider CLI with the keyring's token.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from gpuws.app.providers import provider_token_async
from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.core.nvsmi.compute_apps import ComputeApp
from gpuws.core.resize.audit import AuditLog, AuditRecord, now_iso
from gpuws.core.resize.catalog import GpuModel
from gpuws.core.resize.plan import Plan
from gpuws.core.resize.pricing import PriceBook, price_book, profile_after_resize
from gpuws.core.resize.provider import ProviderPlan
from gpuws.core.resize.state import GpuMigState
from gpuws.core.runner import CommandRunner
from gpuws.remote.resize import (
    MigResizer,
    ProgressCallback,
    ProviderResult,
    ResizeOutcome,
    ResizeResult,
    run_provider_resize,
)


class PlanChanged(GpuwsError):
    """The GPU changed between showing the plan and applying it; nothing was changed."""


@dataclass(frozen=True)
class MigPreview:
    """Everything shown before Apply: the GPU now, the exact plan, what would be stopped, prices."""

    state: GpuMigState
    model: GpuModel
    plan: Plan
    processes: list[ComputeApp] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)  # may block the MIG mode change / GPU reset


@dataclass(frozen=True)
class MigApplied:
    """A MIG resize that ran: the remote result, prices before/after, and the profile as saved."""

    result: ResizeResult
    profile: HostProfile  # the profile after a verified resize (saved where the host has a saved profile)
    price_before: float | None
    price_after: float | None
    price_source: str
    warnings: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> ResizeOutcome:
        return self.result.kind


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


def prices_for(profile: HostProfile, model: GpuModel, gpu_count: int) -> PriceBook:
    """The price book of one GPU of `profile`'s host (overrides, profile price, or reference)."""
    return price_book(profile, model, gpu_count)


async def apply_mig(
    runner: CommandRunner,
    profile: HostProfile,
    shown: Plan,
    *,
    stop_processes: bool,
    progress: ProgressCallback | None = None,
    audit: AuditLog | None = None,
    target_text: str | None = None,
) -> MigApplied:
    """Apply the plan the user confirmed, verify it (or roll back), audit it, update the profile.

    The plan is made again from the GPU's state right now: if it differs from the one the user
    read and confirmed, PlanChanged is raised before anything runs.
    """
    audit = audit if audit is not None else AuditLog()
    resizer = MigResizer(runner)
    gpus = await resizer.read_gpus()
    state, model, fresh = await resizer.plan(shown.gpu_index, shown.after)
    if [s.argv for s in fresh.steps] != [s.argv for s in shown.steps]:
        raise PlanChanged(
            f"GPU {shown.gpu_index} changed since the plan was shown (it is now {fresh.before.describe()}); "
            "nothing was changed: review the new plan"
        )
    prices = prices_for(profile, model, len(gpus))
    before_price = prices.layout_price(fresh.before, model)
    started = now_iso()
    result = await resizer.resize(shown.gpu_index, shown.after, stop_processes=stop_processes, progress=progress)
    after = result.after if result.after is not None else (fresh.before if fresh.empty else None)
    await asyncio.to_thread(audit.append, AuditRecord(
        host=profile.name, gpu=state.index, backend="mig", target=target_text or shown.after.describe(),
        before=fresh.before.describe(), after=after.describe() if after else None,
        outcome=result.outcome, ok=result.ok, plan=[s.to_dict() for s in fresh.steps], log=result.log,
        started_at=started, simulated=profile.simulated,
    ))
    after_price = prices.layout_price(result.after, model) if result.after else None
    applied = MigApplied(result, profile, before_price, after_price, prices.source)
    if result.kind is ResizeOutcome.VERIFIED and result.after is not None:
        new = profile_after_resize(
            profile, gpu=state.index, gpu_count=len(gpus), layout=result.after.describe(),
            price_before=before_price, price_after=after_price, full_card_price=prices.full_card,
        )
        try:
            saved = await asyncio.to_thread(save_profile_after, profile, new)
        except GpuwsError as exc:  # the GPU was resized and verified all the same: say so, and why
            applied.warnings.append(f"the profile was not updated: {exc}")
        else:
            # The profile after the resize, saved or not (the demo host has no saved profile): the
            # window's sidebar and cost meter follow these figures, so the price is computed once.
            del saved
            applied = MigApplied(result, new, before_price, after_price, prices.source, applied.warnings)
    return applied


def save_profile_after(old: HostProfile, new: HostProfile) -> bool:
    """Record the verified slice and its price in the saved profile; False when `old` is not saved.

    The built-in demo host has no saved profile: there is nothing to update.
    """
    from gpuws.core.profiles import ProfileNotFound, ProfileStore
    from gpuws.core.session import SessionLedger

    if new == old:
        return False
    store = ProfileStore()
    try:
        store.get(old.name)
    except ProfileNotFound:
        return False
    store.update(new, old_name=old.name)
    # An open cost session continues at the new price from now on.
    SessionLedger().reprice(new, time.time())
    return True


async def apply_provider(
    profile: HostProfile,
    plan: ProviderPlan,
    *,
    reconnect: Callable[[], Awaitable[str]],
    progress: ProgressCallback | None = None,
    audit: AuditLog | None = None,
    target_text: str | None = None,
) -> ProviderResult:
    """Change the instance type through the provider CLI (token from the keyring, never shown)."""
    audit = audit if audit is not None else AuditLog()
    token = await provider_token_async(profile.name)
    started = now_iso()
    result = await run_provider_resize(plan, token=token, reconnect=reconnect, progress=progress)
    await asyncio.to_thread(audit.append, AuditRecord(
        host=profile.name, gpu=None, backend="provider", target=target_text or f"type:{plan.instance_type}",
        before=profile.slice_profile, after=plan.instance_type if result.ok else None,
        outcome=result.outcome, ok=result.ok, plan=plan.to_dict()["steps"], log=result.log,
        started_at=started, simulated=profile.simulated,
    ))
    return result


async def read_audit(audit: AuditLog, host: str) -> list[AuditRecord]:
    """The host's resize history, oldest first (file IO off the loop)."""
    return await asyncio.to_thread(audit.read, host)
