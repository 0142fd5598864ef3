"""Resizing a GPU: the one implementation the CLI (`gpuws resize`) and the Resize tab both call.

A MIG resize re-plans from the GPU's state right now and refuses if the plan differs from the one
the user confirmed (`PlanChanged`), runs and verifies it (or rolls back), appends the audit record,
and records the verified slice and its price in the saved profile, so the cost meter follows it.
A provider resize changes the instance type through the provider CLI with the keyring's token.

Every path that changes a GPU layout (the wizard, `gpuws resize`, `resize --recover`,
`gpuws mig-parted apply`, a provider type change) ends in the one `after_verify` step: the journal
is closed with the audit line, the profile's slice and price follow the verified layout, and the
front end's `LayoutHook` refreshes the inventory and restarts telemetry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuws.app.providers import provider_token_async
from gpuws.core.errors import GpuwsError, ParseError, RefusedInput
from gpuws.core.files import read_text_file
from gpuws.core.jsontypes import JsonObject, JsonValue
from gpuws.core.models import HostProfile
from gpuws.core.nvsmi.compute_apps import ComputeApp
from gpuws.core.resize.audit import AuditLog, AuditRecord, now_iso
from gpuws.core.resize.catalog import GpuModel
from gpuws.core.resize.journal import STARTED, JournalEntry, ResizeJournal
from gpuws.core.resize.layout import Layout, LayoutError, parse_target
from gpuws.core.resize.migparted import GpuAction, GpuTarget, HostGpu
from gpuws.core.resize.outcome import ResizeOutcome, worst
from gpuws.core.resize.plan import Plan
from gpuws.core.resize.pricing import PriceBook, price_book, profile_after_resize
from gpuws.core.resize.provider import ProviderPlan
from gpuws.core.resize.state import GpuMigState
from gpuws.core.runner import CommandRunner
from gpuws.core.terminal import printable
from gpuws.remote.mig_parted import read_host_gpus as _read_host_gpus

if TYPE_CHECKING:
    from gpuws.core.resize.migparted import MigPartedEntry
from gpuws.remote.resize import (
    MigResizer,
    Progress,
    ProgressCallback,
    ProviderResult,
    ResizeRefused,
    ResizeResult,
    StepFailed,
    run_provider_resize,
)

# The resize value types the front ends read, from here (they never import gpuws.remote).
__all__ = ["AfterVerify", "LayoutHook", "LayoutRun", "MigApplied", "MigPreview", "PendingGpu", "PlanChanged",
           "Progress", "ProgressCallback", "ProviderApplied", "ProviderResult", "ResizeOutcome", "ResizeRefused",
           "ResizeResult", "StepFailed", "after_verify", "apply_mig", "apply_mig_config", "apply_provider",
           "config_result_json", "interrupted_resize", "journal_hook", "mig_parted_config_names",
           "mig_parted_target", "plan_mig", "preview_mig", "prices_for", "read_audit", "read_gpus",
           "read_host_gpus", "recover_mig", "save_profile_after"]


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
        """How the resize ended (the result's kind)."""
        return self.result.kind


async def read_gpus(runner: CommandRunner) -> list[GpuMigState]:
    """Every GPU of the host with its MIG mode and layout."""
    return await MigResizer(runner).read_gpus()


async def plan_mig(runner: CommandRunner, gpu_index: int, target: str | Layout) -> tuple[GpuMigState, GpuModel, Plan]:
    """GPU `gpu_index` now, its model, and the plan to `target` (changes nothing; LayoutError and
    ResizeRefused say why not)."""
    return await MigResizer(runner).plan(gpu_index, target)


async def read_host_gpus(runner: CommandRunner) -> list[HostGpu]:
    """Every GPU with its PCI device id and current layout, as mig-parted configs select them."""
    return await _read_host_gpus(MigResizer(runner))


async def preview_mig(runner: CommandRunner, gpu_index: int, target: str) -> MigPreview:
    """Plan `target` for GPU `gpu_index` and list its compute processes (changes nothing)."""
    resizer = MigResizer(runner)
    state, model, plan = await resizer.plan(gpu_index, target)
    if plan.empty:
        return MigPreview(state, model, plan)
    processes = await resizer.compute_apps(state)
    blockers = await resizer.reset_blockers() if plan.needs_mode_change else []
    return MigPreview(state, model, plan, processes, blockers)


def prices_for(profile: HostProfile, model: GpuModel | None, gpu_count: int) -> PriceBook:
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
    on_changed: LayoutHook | None = None,
) -> MigApplied:
    """Apply the plan the user confirmed, verify it (or roll back), then the after-verify step.

    The plan is made again from the GPU's state right now: if it differs from the one the user
    read and confirmed, PlanChanged is raised before anything runs.
    """
    audit = audit if audit is not None else AuditLog()
    resizer = MigResizer(runner)
    gpus = await resizer.read_gpus()
    state, _model, fresh = await resizer.plan(shown.gpu_index, shown.after)
    if [s.argv for s in fresh.steps] != [s.argv for s in shown.steps]:
        raise PlanChanged(
            f"GPU {shown.gpu_index} changed since the plan was shown (it is now {fresh.before.describe()}); "
            "nothing was changed: review the new plan"
        )
    # The plan and the previous layout are journaled before the first change, so a resize killed
    # midway is found on the next connect and `--recover` can finish it (core/resize/journal.py).
    journal = ResizeJournal(audit=audit)
    started = now_iso()
    result = await resizer.resize(shown.gpu_index, shown.after, stop_processes=stop_processes, progress=progress,
                                  on_begin=journal_hook(journal, profile, state, via))
    after = result.after if result.after is not None else (fresh.before if fresh.empty else None)
    record = AuditRecord(
        host=profile.name, gpu=state.index, backend="mig", target=target_text or shown.after.describe(),
        before=fresh.before.describe(), after=after.describe() if after else None,
        outcome=result.outcome, ok=result.ok, plan=[s.to_dict() for s in fresh.steps], log=result.log,
        started_at=started, simulated=profile.simulated,
    )
    done = await after_verify(profile, state, result, record, gpu_count=len(gpus), priced_from=fresh.before,
                              journal=journal, on_changed=on_changed)
    return MigApplied(result, done.profile, done.price_before, done.price_after, done.price_source, done.warnings)


LayoutHook = Callable[[HostProfile], None]
"""Told the host's profile (slice and price as now saved) after a GPU layout changed on the host,
on the thread running the resize: the front end refreshes the inventory and restarts telemetry
(the window re-probes, and the Workspace restarts the stream on the new devices and reprices)."""


@dataclass
class AfterVerify:
    """What the after-verify step did: the profile as it is now, the prices, what went wrong."""

    profile: HostProfile
    price_before: float | None
    price_after: float | None
    price_source: str
    warnings: list[str] = field(default_factory=list)


async def after_verify(
    profile: HostProfile,
    state: GpuMigState,
    result: ResizeResult,
    record: AuditRecord | None,
    *,
    gpu_count: int,
    priced_from: Layout,
    journal: ResizeJournal,
    then: JournalEntry | None = None,
    on_changed: LayoutHook | None = None,
) -> AfterVerify:
    """The one step after a MIG layout change ran on GPU `state.index`, whatever started it.

    Closes the journal with the audit `record` (kept after a failed rollback; handed over to
    `then` when the run goes on with another GPU), records the verified slice and its price in the
    profile (`priced_from`: the layout the profile's price counts now), saved where the host has a
    saved profile, and tells the front end through `on_changed` unless nothing changed.
    """
    if record is not None:
        await asyncio.to_thread(journal.finish, profile.name, record,
                                keep=result.kind is ResizeOutcome.ROLLBACK_FAILED, then=then)
    model = state.model
    prices = prices_for(profile, model, gpu_count)
    done = AfterVerify(profile, prices.layout_price(priced_from, model),
                       prices.layout_price(result.after, model) if result.after else None, prices.source)
    if result.kind is ResizeOutcome.VERIFIED and result.after is not None:
        new = profile_after_resize(
            profile, gpu=state.index, gpu_count=gpu_count, layout=result.after.describe(),
            price_before=done.price_before, price_after=done.price_after, full_card_price=prices.full_card,
        )
        try:
            await asyncio.to_thread(save_profile_after, profile, new)
        except GpuwsError as exc:  # the GPU was resized and verified all the same: say so, and why
            done.warnings.append(f"the profile was not updated: {exc}")
        else:
            # The profile after the resize, saved or not (the demo host has no saved profile): the
            # window's sidebar and cost meter follow these figures, so the price is computed once.
            done.profile = new
    if on_changed is not None and result.kind is not ResizeOutcome.ALREADY_AT_TARGET:
        on_changed(done.profile)
    return done


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


@dataclass
class ProviderApplied:
    """A provider resize that ran: the remote result and the profile after it."""

    result: ProviderResult
    profile: HostProfile
    warnings: list[str] = field(default_factory=list)

    @property
    def kind(self) -> ResizeOutcome:
        """The outcome (the exit-status table's key)."""
        return self.result.kind


async def apply_provider(
    profile: HostProfile,
    plan: ProviderPlan,
    *,
    reconnect: Callable[[], Awaitable[str]],
    progress: ProgressCallback | None = None,
    audit: AuditLog | None = None,
    target_text: str | None = None,
    on_changed: LayoutHook | None = None,
) -> ProviderApplied:
    """Change the instance type through the provider CLI (token from the keyring, never shown),
    then the after-verify step: audit line, the profile's slice (the instance type) and price
    (the host's `slice_prices` entry for that type, when it has one), the front end's hook."""
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
    applied = ProviderApplied(result, profile)
    if result.kind is ResizeOutcome.VERIFIED and result.ok:
        price = profile.slice_prices.get(plan.instance_type, profile.slice_prices.get(f"type:{plan.instance_type}"))
        if price is None:
            kept = "no price" if profile.price_per_hour is None else f"its price of {profile.price_per_hour:g}/h"
            applied.warnings.append(f"no price is known for {plan.instance_type} (the host's slice prices have "
                                    f"none): the host keeps {kept} until you edit it")
        new = dataclasses.replace(profile, slice_profile=plan.instance_type,
                                  price_per_hour=price if price is not None else profile.price_per_hour)
        try:
            await asyncio.to_thread(save_profile_after, profile, new)
        except GpuwsError as exc:
            applied.warnings.append(f"the profile was not updated: {exc}")
        else:
            applied.profile = new
    if on_changed is not None and result.ok:
        on_changed(applied.profile)
    return applied


async def read_audit(audit: AuditLog, host: str) -> list[AuditRecord]:
    """The host's resize history, oldest first (file IO off the loop): finished resizes only (the
    "started" records are the journal's; an unfinished one shows as the interrupted-resize banner)."""
    records = await asyncio.to_thread(audit.read, host)
    return [r for r in records if r.phase != STARTED]


# -- interrupted resizes and mig-parted files ----------------------------------------------------


def journal_hook(
    journal: ResizeJournal, profile: HostProfile, state: GpuMigState, via: str, before: Layout | None = None,
    pending: list[dict[str, Any]] | None = None,
) -> Callable[[Plan], None]:
    """The `on_begin` hook of a resize: journal the plan and the previous layout right before the
    first change (see core/resize/journal); `pending`: the GPUs the run changes after this one."""

    def begin(plan: Plan) -> None:
        journal.begin(JournalEntry(
            host=profile.name, gpu=state.index, gpu_name=state.name, before=(before or plan.before).describe(),
            target=plan.after.describe(), plan=[s.to_dict() for s in plan.steps], simulated=profile.simulated,
            via=via, pending=list(pending or []),
        ))

    return begin


async def interrupted_resize(audit: AuditLog, host: str) -> JournalEntry | None:
    """A resize of `host` that did not finish (its journal, its process gone), if any."""
    return await asyncio.to_thread(ResizeJournal(audit=audit).interrupted, host)


@dataclass(frozen=True)
class PendingGpu:
    """A GPU an interrupted run had still to change: its index, name and target layout text."""

    gpu: int
    gpu_name: str
    target: str

    def to_dict(self) -> JsonObject:
        """The journal's form (`JournalEntry.pending`)."""
        return {"gpu": self.gpu, "gpu_name": self.gpu_name, "target": self.target}


@dataclass
class LayoutRun:
    """A run over one or more GPUs (`mig-parted apply`, `--recover`): per-GPU results, in order."""

    profile: HostProfile  # the profile after the run (slice and price of every verified GPU)
    results: dict[int, ResizeResult] = field(default_factory=dict)
    remaining: list[PendingGpu] = field(default_factory=list)  # not done: an earlier GPU failed
    warnings: list[str] = field(default_factory=list)

    @property
    def kind(self) -> ResizeOutcome:
        """The worst outcome of the GPUs (ALREADY_AT_TARGET when none needed a change)."""
        kinds = [r.kind for r in self.results.values()]
        return worst(kinds) if kinds else ResizeOutcome.ALREADY_AT_TARGET


def _pending_of(entry: JournalEntry) -> list[PendingGpu]:
    try:
        return [PendingGpu(int(p["gpu"]), str(p.get("gpu_name", "")), str(p["target"])) for p in entry.pending]
    except (KeyError, TypeError, ValueError):
        raise ResizeRefused("the resize journal's list of GPUs still to do cannot be read") from None


def _next_entry(profile: HostProfile, state: GpuMigState, target: str, rest: list[PendingGpu],
                via: str) -> JournalEntry:
    """The journal handed over to the next GPU of a run (its `begin` adds the plan)."""
    return JournalEntry(host=profile.name, gpu=state.index, gpu_name=state.name, before=state.layout.describe(),
                        target=target, simulated=profile.simulated, via=via,
                        pending=[p.to_dict() for p in rest])


async def _run_gpus(
    resizer: MigResizer, run: LayoutRun, gpus: list[GpuMigState], todo: list[PendingGpu], *, via: str,
    journal: ResizeJournal, stop_processes: bool, progress: ProgressCallback | None, target_note: str,
    on_changed: LayoutHook | None,
) -> None:
    """Change each GPU of `todo` in order, each through the after-verify step; stop at the first
    that fails (as `nvidia-mig-parted apply` does) and leave the rest in `run.remaining`."""
    by_index = {g.index: g for g in gpus}
    for number, item in enumerate(todo):
        rest = todo[number + 1:]
        state = by_index.get(item.gpu)
        if state is None or state.model is None:
            raise ResizeRefused(f"GPU {item.gpu} is not a MIG-capable GPU of this host")
        target = parse_target(item.target, state.model)
        started = now_iso()
        result = await resizer.resize(item.gpu, target, stop_processes=stop_processes, progress=progress,
                                      on_begin=journal_hook(journal, run.profile, state, via,
                                                            pending=[p.to_dict() for p in rest]))
        run.results[item.gpu] = result
        record = None if result.kind is ResizeOutcome.ALREADY_AT_TARGET else AuditRecord(
            host=run.profile.name, gpu=item.gpu, backend="mig", target=f"{target.describe()}{target_note}",
            before=result.before.describe(), after=result.after.describe() if result.after else None,
            outcome=result.outcome, ok=result.ok, plan=[s.to_dict() for s in result.plan.steps], log=result.log,
            started_at=started, simulated=run.profile.simulated,
        )
        following = by_index.get(rest[0].gpu) if rest and result.ok else None
        then = _next_entry(run.profile, following, rest[0].target, rest[1:], via) if following else None
        done = await after_verify(run.profile, state, result, record, gpu_count=len(gpus),
                                  priced_from=state.layout, journal=journal, then=then, on_changed=on_changed)
        run.profile = done.profile
        run.warnings.extend(done.warnings)
        if not result.ok:
            run.remaining = rest
            return


async def recover_mig(
    runner: CommandRunner, profile: HostProfile, entry: JournalEntry, *, progress: ProgressCallback | None,
    audit: AuditLog, stop_processes: bool = False, on_changed: LayoutHook | None = None,
) -> LayoutRun:
    """Finish an interrupted run: complete its GPU's target, or restore its previous layout; verify;
    then the after-verify step. A run over several GPUs (`mig-parted apply`) goes on with the GPUs
    it had still to do; the first failure stops it, and `remaining` says what is left."""
    resizer = MigResizer(runner)
    gpus = await resizer.read_gpus()
    state = next((g for g in gpus if g.index == entry.gpu), None)
    if state is None:
        raise ResizeRefused(f"the host has no GPU {entry.gpu}")
    model = state.model
    if model is None or not state.mig_capable:
        raise ResizeRefused(f"GPU {entry.gpu} ({state.name}) is not MIG-capable; nothing to recover")
    try:
        target, previous = parse_target(entry.target, model), parse_target(entry.before, model)
    except LayoutError as exc:  # a journal this GPU cannot take: refused, nothing changed
        raise ResizeRefused(f"the interrupted resize cannot be recovered: {exc}") from None
    pending = _pending_of(entry)
    journal = ResizeJournal(audit=audit)
    run = LayoutRun(profile)
    started = now_iso()
    result = await resizer.resize(entry.gpu, target, stop_processes=stop_processes, progress=progress,
                                  restore=previous,
                                  on_begin=journal_hook(journal, profile, state, "recover", previous,
                                                        [p.to_dict() for p in pending]))
    run.results[entry.gpu] = result
    record = AuditRecord(
        host=profile.name, gpu=entry.gpu, backend="mig", target=entry.target, before=entry.before,
        after=result.after.describe() if result.after else None, outcome=f"recover: {result.outcome}",
        ok=result.ok, plan=[s.to_dict() for s in result.plan.steps], log=result.log, started_at=started,
        simulated=profile.simulated,
    )
    following = next((g for g in gpus if pending and g.index == pending[0].gpu), None) if result.ok else None
    then = _next_entry(profile, following, pending[0].target, pending[1:], "recover") if following else None
    done = await after_verify(profile, state, result, record, gpu_count=len(gpus), priced_from=previous,
                              journal=journal, then=then, on_changed=on_changed)
    run.profile = done.profile
    run.warnings.extend(done.warnings)
    if not result.ok:
        run.remaining = pending
    elif pending:
        await _run_gpus(resizer, run, gpus, pending, via="recover", journal=journal, stop_processes=stop_processes,
                        progress=progress, target_note=" (recover)", on_changed=on_changed)
    return run


async def apply_mig_config(
    runner: CommandRunner, profile: HostProfile, config: str, targets: list[GpuTarget], *,
    stop_processes: bool, progress: ProgressCallback | None = None, audit: AuditLog | None = None,
    on_changed: LayoutHook | None = None,
) -> LayoutRun:
    """Apply a mig-parted config: every GPU it changes, one at a time in index order, each through
    the after-verify step; the first GPU that fails stops the run (as `nvidia-mig-parted apply`
    does), and the GPUs already done keep their verified layouts."""
    todo = [PendingGpu(t.gpu.index, t.gpu.name, t.target.describe())
            for t in targets if t.action is GpuAction.CHANGE and t.target is not None]
    resizer = MigResizer(runner)
    run = LayoutRun(profile)
    if todo:
        await _run_gpus(resizer, run, await resizer.read_gpus(), todo, via=f"mig-parted {config}",
                        journal=ResizeJournal(audit=audit), stop_processes=stop_processes, progress=progress,
                        target_note=f" (mig-parted {config})", on_changed=on_changed)
    return run


def config_result_json(config: str, targets: list[GpuTarget], run: LayoutRun) -> JsonObject:
    """The `mig-parted apply --json` fields of a run: per GPU its action and outcome."""
    gpus: list[JsonValue] = []
    for t in targets:
        row = t.to_dict()
        result = run.results.get(t.gpu.index)
        if result is not None:
            row.update(outcome=result.outcome, outcome_kind=str(result.kind), ok=result.ok,
                       after=result.after.describe() if result.after else None, error=result.error)
        gpus.append(row)
    return {"config": config, "outcome_kind": str(run.kind),
            "ok": run.kind in (ResizeOutcome.VERIFIED, ResizeOutcome.ALREADY_AT_TARGET), "gpus": gpus,
            "remaining": [p.to_dict() for p in run.remaining]}


async def mig_parted_target(runner: CommandRunner, path: str, config: str, gpu_index: int) -> Layout | None:
    """The layout named config `config` of the mig-parted file at `path` gives GPU `gpu_index`
    (mig-parted's rules, PCI device id included); None when no entry selects that GPU."""
    from gpuws.core.resize.migparted import config_targets

    entries = (await asyncio.to_thread(read_mig_parted_configs, Path(path))).get(config)
    if entries is None:
        raise LayoutError(f"the file has no config named {config[:60]!r}")
    gpus = [g for g in await read_host_gpus(runner) if g.index == gpu_index]
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
