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
from pathlib import Path
from typing import TYPE_CHECKING

from gpuws.app.providers import provider_token_async
from gpuws.core.errors import GpuwsError, ParseError, RefusedInput
from gpuws.core.files import read_text_file
from gpuws.core.models import HostProfile
from gpuws.core.nvsmi.compute_apps import ComputeApp
from gpuws.core.resize.audit import AuditLog, AuditRecord, now_iso
from gpuws.core.resize.catalog import GpuModel
from gpuws.core.resize.journal import STARTED, JournalEntry, ResizeJournal
from gpuws.core.resize.layout import Layout, LayoutError, parse_target
from gpuws.core.resize.outcome import ResizeOutcome
from gpuws.core.resize.plan import Plan
from gpuws.core.resize.pricing import PriceBook, price_book, profile_after_resize
from gpuws.core.resize.provider import ProviderPlan
from gpuws.core.resize.state import GpuMigState
from gpuws.core.runner import CommandRunner
from gpuws.core.terminal import printable

if TYPE_CHECKING:
    from gpuws.core.resize.migparted import MigPartedEntry

from gpuws.remote.resize import (
    MigResizer,
    ProgressCallback,
    ProviderResult,
    ResizeRefused,
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
    via: str = "resize",
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
    # The plan and the previous layout are journaled before the first change, so a resize killed
    # midway is found on the next connect and `--recover` can finish it (core/resize/journal.py).
    journal = ResizeJournal(audit=audit)
    result = await resizer.resize(shown.gpu_index, shown.after, stop_processes=stop_processes, progress=progress,
                                  on_begin=journal_hook(journal, profile, state, via))
    after = result.after if result.after is not None else (fresh.before if fresh.empty else None)
    record = AuditRecord(
        host=profile.name, gpu=state.index, backend="mig", target=target_text or shown.after.describe(),
        before=fresh.before.describe(), after=after.describe() if after else None,
        outcome=result.outcome, ok=result.ok, plan=[s.to_dict() for s in fresh.steps], log=result.log,
        started_at=started, simulated=profile.simulated,
    )
    await asyncio.to_thread(journal.finish, profile.name, record, keep=result.kind is ResizeOutcome.ROLLBACK_FAILED)
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
    """The host's resize history, oldest first (file IO off the loop): finished resizes only (the
    "started" records are the journal's; an unfinished one shows as the interrupted-resize banner)."""
    records = await asyncio.to_thread(audit.read, host)
    return [r for r in records if r.phase != STARTED]


# -- interrupted resizes and mig-parted files ----------------------------------------------------


def journal_hook(
    journal: ResizeJournal, profile: HostProfile, state: GpuMigState, via: str, before: Layout | None = None
) -> Callable[[Plan], None]:
    """The `on_begin` hook of a resize: journal the plan and the previous layout right before the
    first change (see core/resize/journal)."""

    def begin(plan: Plan) -> None:
        journal.begin(JournalEntry(
            host=profile.name, gpu=state.index, gpu_name=state.name, before=(before or plan.before).describe(),
            target=plan.after.describe(), plan=[s.to_dict() for s in plan.steps], simulated=profile.simulated,
            via=via,
        ))

    return begin


async def interrupted_resize(audit: AuditLog, host: str) -> JournalEntry | None:
    """A resize of `host` that did not finish (its journal, its process gone), if any."""
    return await asyncio.to_thread(ResizeJournal(audit=audit).interrupted, host)


async def recover_mig(
    runner: CommandRunner, profile: HostProfile, entry: JournalEntry, *, progress: ProgressCallback,
    audit: AuditLog,
) -> ResizeResult:
    """Finish an interrupted resize: complete its target, or restore its previous layout; verify; record."""
    resizer = MigResizer(runner)
    state = await resizer.read_state(entry.gpu)
    model = state.model
    if model is None or not state.mig_capable:
        raise ResizeRefused(f"GPU {entry.gpu} ({state.name}) is not MIG-capable; nothing to recover")
    target, previous = parse_target(entry.target, model), parse_target(entry.before, model)
    journal = ResizeJournal(audit=audit)
    started = now_iso()
    result = await resizer.resize(entry.gpu, target, progress=progress, restore=previous,
                                  on_begin=journal_hook(journal, profile, state, "recover", previous))
    record = AuditRecord(
        host=profile.name, gpu=entry.gpu, backend="mig", target=entry.target, before=entry.before,
        after=result.after.describe() if result.after else None, outcome=f"recover: {result.outcome}",
        ok=result.ok, plan=[s.to_dict() for s in result.plan.steps], log=result.log, started_at=started,
        simulated=profile.simulated,
    )
    await asyncio.to_thread(journal.finish, profile.name, record, keep=result.kind is ResizeOutcome.ROLLBACK_FAILED)
    return result


async def mig_parted_target(runner: CommandRunner, path: str, config: str, gpu_index: int) -> Layout | None:
    """The layout named config `config` of the mig-parted file at `path` gives GPU `gpu_index`
    (mig-parted's rules, PCI device id included); None when no entry selects that GPU."""
    from gpuws.core.resize.migparted import config_targets
    from gpuws.remote.mig_parted import read_host_gpus

    entries = (await asyncio.to_thread(read_mig_parted_configs, Path(path))).get(config)
    if entries is None:
        raise LayoutError(f"the file has no config named {config[:60]!r}")
    gpus = [g for g in await read_host_gpus(MigResizer(runner)) if g.index == gpu_index]
    targets = config_targets(config, entries, gpus)
    return targets[0].target if targets else None


def mig_parted_config_names(path: str) -> list[str]:
    """The named configs of a mig-parted file (RefusedInput says why it cannot be read)."""
    return list(read_mig_parted_configs(Path(path)))


MAX_MIG_PARTED_FILE_BYTES = 1_000_000  # NVIDIA's config-default.yaml is ~20 KB


def read_mig_parted_configs(path: Path) -> dict[str, list[MigPartedEntry]]:
    """The named configs of the mig-parted v1 file at `path`, read by the one local file reader
    (regular file, size cap); the file is the user's input, so any fault in it is RefusedInput."""
    from gpuws.core.resize.migparted import import_mig_parted

    text = read_text_file(path, MAX_MIG_PARTED_FILE_BYTES, what="mig-parted file")
    try:
        return import_mig_parted(text)
    except ParseError as exc:
        raise RefusedInput(f"{printable(str(path))}: {exc}") from None
