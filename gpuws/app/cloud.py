"""A cloud host's instance type and power, through its provider's CLI: the one implementation both
front ends reach through the `Workspace` verbs (`resize_instance`, `recover`, `power`).

A type change runs: describe (state, type) -> stop -> wait stopped -> modify -> start -> wait
running -> describe again (the instance's address: a stop and start gives most instances a new
public one) -> wait for SSH there -> probe -> verify that the GPU seen is the type's fraction
(`gpuws.core.resize.instance_types.matches_gpu`: framebuffer share and vGPU profile) -> the
profile's type, price and address saved in one step, and the front end told once (`on_changed`,
which the Workspace turns into `layout_changed`).

Anything that fails after the stop (a start refused for capacity, a host that never answers, a
GPU that is not the type's) puts the previous type back and starts it (ROLLED_BACK, exit 9; the
profile keeps its type and price); if that fails too the outcome is ROLLBACK_FAILED (exit 10) and
the journal stays. The journal (`core/resize/journal.py`, backend "provider") is written before the
stop, so a resize killed at any step is finished by `resize NAME --recover`: the same convergence,
from whatever state the provider reports (it completes the target, or restores the previous type).

Providers without a "describe" command (Google Cloud, Alibaba, Tencent presets today) keep the
older path: the templates run in order and the host is reached at the profile's address.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from gpuws.app.providers import provider_token_async
from gpuws.core.errors import GpuwsError
from gpuws.core.inventory import Inventory
from gpuws.core.jsontypes import JsonObject
from gpuws.core.models import HostProfile
from gpuws.core.resize.audit import AuditLog, AuditRecord, now_iso
from gpuws.core.resize.instance_state import InstanceState, InstanceView, NoAddress, parse_aws_describe
from gpuws.core.resize.instance_types import InstanceType
from gpuws.core.resize.journal import JournalEntry, ResizeJournal
from gpuws.core.resize.outcome import ResizeOutcome
from gpuws.core.resize.provider import ProviderError, ProviderPlan, plan_provider_resize
from gpuws.remote.provider_ops import PowerResult, ProviderCli
from gpuws.remote.resize import PROVIDER_ROLLED_BACK, ROLLBACK_FAILED, TARGET_VERIFIED, Progress, ProgressCallback

TYPE_PREFIX = "type:"
SSH_WAIT_S = 300.0  # a started instance's sshd answers within a minute or two
SSH_RETRY_S = 1.0



@dataclass(frozen=True)
class Reached:
    """The host answered: its inventory, and how long gpuws waited before it did (the boot)."""

    inventory: Inventory
    waited_s: float  # the failed tries before it answered (the instance booting)
    probe_s: float = 0.0  # the probe command on the host (its nvidia-smi), after the SSH connect


Reach = Callable[[HostProfile], Awaitable[Reached]]
"""Wait for SSH at the profile's address (a started instance takes a while) and probe it; raises
when it does not answer in time. The front end gives it (its host-key answers, its timeout)."""

ProfileHook = Callable[[HostProfile], None]


class GpuMismatch(GpuwsError):
    """The GPU the host shows is not the fraction its instance type promises."""


@dataclass(frozen=True)
class TimedStep:
    """One step of a run and how long it took; `external`: a provider CLI call or a wait for the
    host, not gpuws' own work (the benchmark reports gpuws' share without them)."""

    step: str
    seconds: float
    external: bool

    def to_dict(self) -> JsonObject:
        """The `--json` row."""
        return {"step": self.step, "seconds": round(self.seconds, 4), "external": self.external}


@dataclass
class InstanceResized:
    """What a type change (or its recovery) did: outcome, types and addresses, the profile now."""

    outcome: str
    kind: ResizeOutcome
    profile: HostProfile
    before: str | None  # the instance type before ("g6f.large")
    target: str
    after: str | None = None  # the type the instance has now (None: unknown)
    address_before: str | None = None
    address_after: str | None = None
    gpu_seen: str | None = None  # "NVIDIA L4, 2816 MiB, vGPU NVIDIA L4-3Q"
    error: str | None = None
    log: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    steps: list[TimedStep] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The target type runs and its GPU was verified (or it already did)."""
        return self.kind in (ResizeOutcome.VERIFIED, ResizeOutcome.ALREADY_AT_TARGET)

    def to_dict(self) -> JsonObject:
        """The `gpuws resize --json` fields of a type change."""
        return {"outcome": self.outcome, "outcome_kind": str(self.kind), "ok": self.ok, "before": self.before,
                "after": self.after, "target": self.target, "address_before": self.address_before,
                "address_after": self.address_after, "gpu_seen": self.gpu_seen, "error": self.error,
                "log": list(self.log), "warnings": list(self.warnings),
                "steps": [s.to_dict() for s in self.steps]}


def instance_type_of(target: str) -> str:
    """"type:g6f.large" -> "g6f.large" (a bare type is taken as it is)."""
    return target[len(TYPE_PREFIX):] if target.startswith(TYPE_PREFIX) else target


def can_describe(profile: HostProfile) -> bool:
    """Whether the host's provider has a describe command (the address can be read back)."""
    try:
        return plan_provider_resize(profile.provider, "x").command("describe") is not None
    except GpuwsError:
        return False


def type_price(profile: HostProfile, instance_type: str) -> float | None:
    """The hourly price saved after a verified change to `instance_type`: the one rule the listing
    uses too (`gpuws.core.resize.cloud.type_price`: the host's own slice price, else the catalog's
    in its region for a host priced in USD); None when neither knows one."""
    from gpuws.core.resize.cloud import type_price as priced

    return priced(profile, instance_type)[0]


def _catalog_type(profile: HostProfile, instance_type: str) -> InstanceType | None:
    from gpuws.core.resize.instance_types import instance_type as lookup

    return lookup(profile.provider.kind, instance_type)


def verify_gpu(profile: HostProfile, instance_type: str, inventory: Inventory) -> tuple[str, list[str]]:
    """Check the GPU the host shows against the fraction `instance_type` promises; returns what was
    seen (one line) and warnings. GpuMismatch names both when they differ."""
    from gpuws.core.resize.instance_types import matches_gpu

    if not inventory.gpus:
        raise GpuMismatch(f"{instance_type} should have a GPU; the host shows none")
    gpu = inventory.gpus[0]
    seen = ", ".join(x for x in (gpu.name, f"{gpu.memory_total_mib} MiB" if gpu.memory_total_mib else None,
                                 f"vGPU {gpu.vgpu_profile}" if gpu.vgpu_profile else None) if x)
    itype = _catalog_type(profile, instance_type)
    if itype is None:
        return seen, [f"{instance_type} is not in gpuws' catalog of GPU fractions: the GPU ({seen}) was not "
                      "compared with it"]
    reason = matches_gpu(itype, gpu.memory_total_mib or 0, gpu.vgpu_profile)
    if reason is not None:
        raise GpuMismatch(f"the GPU seen does not match {instance_type}: {reason}")
    return seen, []


class _Run:
    """One type change or recovery in progress: the CLI, the timings, the progress lines."""

    def __init__(self, profile: HostProfile, cli: ProviderCli, reach: Reach,
                 progress: ProgressCallback | None) -> None:
        self.profile = profile
        self.cli = cli
        self.reach = reach
        self.report = progress or (lambda _p: None)
        self.steps: list[TimedStep] = []
        self.done = 0
        self.total = 9

    def say(self, message: str, phase: str = "apply") -> None:
        """One progress line."""
        self.report(Progress(min(self.done, self.total), self.total, message, phase))

    async def call(self, plan: ProviderPlan, action: str, phase: str = "apply") -> str | None:
        """Run the plan's `action` (timed); its stdout, None when the provider has no such command."""
        command = plan.command(action)
        if command is None:
            return None
        self.say(command.display(plan.env_names), phase)
        started = time.perf_counter()
        try:
            return await self.cli.run(command)
        finally:
            self.steps.append(TimedStep(action, time.perf_counter() - started, True))
            self.done += 1

    async def describe(self, plan: ProviderPlan, phase: str = "apply") -> InstanceView:
        """The instance as the provider describes it now."""
        text = await self.call(plan, "describe", phase)
        assert text is not None  # only called where the provider has a describe command
        started = time.perf_counter()
        view = parse_aws_describe(text, self.profile.provider.instance_id or "")
        self.steps.append(TimedStep("read the answer", time.perf_counter() - started, False))
        return view

    async def move(self, view: InstanceView, instance_type: str, phase: str) -> InstanceView:
        """Bring the instance from `view` to running on `instance_type`; the new view."""
        plan = plan_provider_resize(self.profile.provider, instance_type)
        if view.instance_type != instance_type or view.state not in (InstanceState.RUNNING, InstanceState.PENDING):
            if view.state in (InstanceState.RUNNING, InstanceState.PENDING):
                await self.call(plan, "stop", phase)
            if view.state is not InstanceState.STOPPED:
                await self.call(plan, "wait_stopped", phase)
            if view.instance_type != instance_type:
                await self.call(plan, "modify", phase)
            await self.call(plan, "start", phase)
        await self.call(plan, "wait_running", phase)
        after = await self.describe(plan, phase)
        if after.state is not InstanceState.RUNNING:
            raise ProviderError(f"the instance is {after.state} after the start, not running")
        if after.instance_type != instance_type:
            raise ProviderError(f"the provider reports type {after.instance_type} after the change, not "
                                f"{instance_type}")
        return after

    async def arrive(self, view: InstanceView, instance_type: str, phase: str) -> tuple[HostProfile, str, list[str]]:
        """Reach the running instance at its address (read back) and verify its GPU."""
        source = self.profile.provider.address_source
        address = view.address(source)
        if address is None:
            raise NoAddress(f"the provider gives the instance no {source} address (choose another with "
                            f"`gpuws hosts edit {self.profile.name} --address-from public|private|dns`)")
        at = dataclasses.replace(self.profile, host=address)
        self.say(f"waiting for SSH at {address} and probing", "verify")
        started = time.perf_counter()
        reached = await self.reach(at)
        took = time.perf_counter() - started
        self.steps.append(TimedStep("wait for SSH", reached.waited_s, True))
        self.steps.append(TimedStep("SSH connect", max(took - reached.waited_s - reached.probe_s, 0.0), False))
        # The probe is one command the host runs (nvidia-smi there): gpuws waits for the host.
        self.steps.append(TimedStep("probe (the host's nvidia-smi)", reached.probe_s, True))
        started = time.perf_counter()
        seen, warnings = verify_gpu(self.profile, instance_type, reached.inventory)
        self.steps.append(TimedStep("verify the GPU", time.perf_counter() - started, False))
        self.done += 1
        return at, seen, warnings


async def resize_instance(
    profile: HostProfile,
    target: str,
    *,
    reach: Reach,
    progress: ProgressCallback | None = None,
    audit: AuditLog | None = None,
    via: str = "resize",
    on_changed: ProfileHook | None = None,
    cli: ProviderCli | None = None,
) -> InstanceResized:
    """Change the host's instance type to `target` ("type:T" or "T"), verify, or roll back."""
    instance_type = instance_type_of(target)
    plan = plan_provider_resize(profile.provider, instance_type)
    if plan.command("describe") is None:
        return await _templates_only(profile, plan, reach=reach, progress=progress, audit=audit,
                                     on_changed=on_changed)
    run = _Run(profile, cli or await _cli(profile, plan), reach, progress)
    started_at = now_iso()
    clock = time.perf_counter()
    view = await run.describe(plan, "preflight")
    if view.instance_type == instance_type and view.state is InstanceState.RUNNING:
        done = InstanceResized("already at target", ResizeOutcome.ALREADY_AT_TARGET, profile, view.instance_type,
                               instance_type, view.instance_type, profile.host, profile.host, log=run.cli.log,
                               steps=run.steps)
        return done
    journal = ResizeJournal(audit=audit or AuditLog())
    entry = JournalEntry(host=profile.name, gpu=0, gpu_name=view.instance_id,
                         before=f"{TYPE_PREFIX}{view.instance_type}",
                         target=f"{TYPE_PREFIX}{instance_type}", plan=plan.to_dict()["steps"],
                         simulated=profile.simulated, via=via, backend="provider")
    await asyncio.to_thread(journal.begin, entry)
    result = await _converge(run, journal, view, view.instance_type, instance_type, started_at, "", on_changed)
    run.steps.append(TimedStep("total", time.perf_counter() - clock, False))
    return result


async def _templates_only(profile: HostProfile, plan: ProviderPlan, *, reach: Reach,
                          progress: ProgressCallback | None, audit: AuditLog | None,
                          on_changed: ProfileHook | None) -> InstanceResized:
    """A provider without a describe command (its templates only, as before): the steps in
    order, the host reached at the profile's address, the type and price saved when it answers."""
    from gpuws.app.resize import apply_provider

    async def reconnect() -> str:
        """Wait for SSH at the profile's address and say what GPUs it has."""
        inventory = (await reach(profile)).inventory
        return ", ".join(g.name for g in inventory.gpus) or "no GPU"

    applied = await apply_provider(profile, plan, reconnect=reconnect, progress=progress, audit=audit,
                                   target_text=f"{TYPE_PREFIX}{plan.instance_type}", on_changed=on_changed)
    done = applied.result
    return InstanceResized(done.outcome, done.kind, applied.profile, profile.slice_profile, plan.instance_type,
                           plan.instance_type if done.ok else None, profile.host, profile.host, error=done.error,
                           log=done.log, warnings=[*applied.warnings, f"{plan.kind}: the address is not read back "
                                                   "from the provider (no describe command); the host is reached "
                                                   "at the profile's address"])


async def recover_instance(
    profile: HostProfile,
    entry: JournalEntry,
    *,
    reach: Reach,
    progress: ProgressCallback | None = None,
    audit: AuditLog | None = None,
    on_changed: ProfileHook | None = None,
    cli: ProviderCli | None = None,
) -> InstanceResized:
    """Finish an interrupted type change from whatever state the provider reports now: complete
    its target, or restore its previous type if that fails."""
    before, target = instance_type_of(entry.before), instance_type_of(entry.target)
    plan = plan_provider_resize(profile.provider, target)
    run = _Run(profile, cli or await _cli(profile, plan), reach, progress)
    journal = ResizeJournal(audit=audit or AuditLog())
    view = await run.describe(plan, "preflight")
    # The journal is ours now (a kill of this recovery is found again).
    await asyncio.to_thread(journal.begin, dataclasses.replace(entry, pid=_pid(), via="recover", started_at=now_iso()))
    return await _converge(run, journal, view, before, target, now_iso(), "recover: ", on_changed)


def _pid() -> int:
    import os

    return os.getpid()


async def _cli(profile: HostProfile, plan: ProviderPlan) -> ProviderCli:
    token = await provider_token_async(profile.name)
    return ProviderCli(plan.kind, plan.env_names, token)


async def _converge(run: _Run, journal: ResizeJournal, view: InstanceView, before: str, target: str,
                    started_at: str, note: str, on_changed: ProfileHook | None) -> InstanceResized:
    profile = run.profile
    result = InstanceResized(TARGET_VERIFIED, ResizeOutcome.VERIFIED, profile, before, target,
                             address_before=profile.host, log=run.cli.log, steps=run.steps)
    try:
        after = await run.move(view, target, "apply")
        at, result.gpu_seen, warnings = await run.arrive(after, target, "verify")
        result.warnings += warnings
        result.after, result.address_after = target, at.host
        started = time.perf_counter()
        price = type_price(profile, target)
        if price is None:
            kept = "no price" if profile.price_per_hour is None else f"its price of {profile.price_per_hour:g}/h"
            result.warnings.append(f"no price is known for {target} (neither the host's slice prices nor the "
                                   f"catalog for its region): the host keeps {kept} until you edit it")
        new = dataclasses.replace(profile, host=at.host, slice_profile=target,
                                  price_per_hour=price if price is not None else profile.price_per_hour)
        result.profile = await _save(new, profile, result.warnings)
        await _finish(journal, result, note, started_at, keep=False)
        run.steps.append(TimedStep("save the profile", time.perf_counter() - started, False))
        if on_changed is not None:
            on_changed(result.profile)
        return result
    except GpuwsError as exc:
        result.error = run.cli.redact(str(exc))
    # Put the previous type back and start it: the host as it was (its address may be new).
    try:
        plan = plan_provider_resize(profile.provider, before)
        now = await run.describe(plan, "rollback")
        restored = await run.move(now, before, "rollback")
        at, result.gpu_seen, warnings = await run.arrive(restored, before, "rollback")
        result.warnings += warnings
        result.after, result.address_after = before, at.host
        result.outcome, result.kind = PROVIDER_ROLLED_BACK, ResizeOutcome.ROLLED_BACK
        if at.host != profile.host:  # type and price unchanged; only the address the host has now
            result.profile = await _save(dataclasses.replace(profile, host=at.host), profile, result.warnings)
            if on_changed is not None:
                on_changed(result.profile)
        await _finish(journal, result, note, started_at, keep=False)
    except GpuwsError as exc:
        result.outcome = ROLLBACK_FAILED.format(state="stopped or unknown (see `gpuws resize "
                                                      f"{profile.name} --recover`)")
        result.kind = ResizeOutcome.ROLLBACK_FAILED
        result.error = f"{result.error}; rollback: {run.cli.redact(str(exc))}"
        await _finish(journal, result, note, started_at, keep=True)
    return result


async def _save(new: HostProfile, old: HostProfile, warnings: list[str]) -> HostProfile:
    from gpuws.app.resize import save_profile_after

    try:
        await asyncio.to_thread(save_profile_after, old, new)
    except GpuwsError as exc:  # the instance changed all the same: say so, and why
        warnings.append(f"the profile was not updated: {exc}")
        return old
    return new


async def _finish(journal: ResizeJournal, result: InstanceResized, note: str, started_at: str, *, keep: bool) -> None:
    profile = result.profile
    record = AuditRecord(
        host=profile.name, gpu=None, backend="provider", target=f"{TYPE_PREFIX}{result.target}",
        before=result.before, after=result.after, outcome=f"{note}{result.outcome}", ok=result.ok,
        plan=[], log=[*result.log, *([f"error: {result.error}"] if result.error else []),
                      f"address: {result.address_before} -> {result.address_after}"],
        started_at=started_at, simulated=profile.simulated,
    )
    await asyncio.to_thread(journal.finish, profile.name, record, keep=keep)


async def start_instance(profile: HostProfile, *, progress: Callable[[str], None] | None = None,
                         on_changed: ProfileHook | None = None, cli: ProviderCli | None = None) -> PowerResult:
    """Start the instance, wait until it runs, and read its address back from the provider: a new
    one is saved in the profile (and told through `on_changed`) so the host is reached there."""
    plan = plan_provider_resize(profile.provider, "unchanged")
    run_cli = cli or await _cli(profile, plan)
    say = progress or (lambda _line: None)
    result = PowerResult("start", False, log=run_cli.log, address_before=profile.host)
    try:
        for action in ("start", "wait_running"):
            command = plan.command(action)
            if command is not None:
                say(command.display(plan.env_names))
                await run_cli.run(command)
        describe = plan.command("describe")
        if describe is not None:
            say(describe.display(plan.env_names))
            view = parse_aws_describe(await run_cli.run(describe), profile.provider.instance_id or "")
            source = profile.provider.address_source
            address = view.address(source)
            if address is None:
                raise NoAddress(f"the provider gives the instance no {source} address (choose another with "
                                f"`gpuws hosts edit {profile.name} --address-from public|private|dns`)")
            result.address_after = address
            if address != profile.host:
                warnings: list[str] = []
                saved = await _save(dataclasses.replace(profile, host=address), profile, warnings)
                result.log += warnings
                if on_changed is not None:
                    on_changed(saved)
        result.ok = True
    except GpuwsError as exc:
        result.error = run_cli.redact(str(exc))
    return result


async def wait_for_ssh(profile: HostProfile, *, timeout: float = SSH_WAIT_S,
                       connection_options: Mapping[str, object] | None = None) -> Reached:
    """Connect to `profile`'s address until it answers (a started instance boots first), probe it,
    close; the error of the last try when it has not answered within `timeout` seconds."""
    from gpuws.app.errors import classify
    from gpuws.remote.connection import HostConnection
    from gpuws.remote.probe import probe

    connect: Callable[..., HostConnection] = HostConnection  # the options are the caller's (host keys, prompts)
    began = time.monotonic()
    deadline = began + timeout
    while True:
        attempt = time.monotonic()
        connection = connect(profile, **dict(connection_options or {}))
        try:
            await connection.connect()
            probing = time.monotonic()
            inventory = await probe(connection.runner)
            return Reached(inventory, attempt - began, time.monotonic() - probing)
        except (GpuwsError, OSError) as exc:
            if not classify(exc).kind.retry or time.monotonic() >= deadline:
                raise
        finally:
            await connection.close()
        await asyncio.sleep(SSH_RETRY_S)
