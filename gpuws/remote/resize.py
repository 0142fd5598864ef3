"""Executing resizes: MIG over any CommandRunner (SSH, local, the simulated host), and the
cloud-provider CLI run locally.

MIG: read the GPU's state, preflight (MIG-capable, root or `sudo -n`, no compute processes
unless the user chose to stop them, name what may block a GPU reset), run the plan's argv steps
with progress callbacks, then VERIFY by reading the layout back and `nvidia-smi -L`. On any
failure the recorded previous layout is restored and verified. The outcome says exactly which
of TARGET_VERIFIED, ROLLED_BACK or "rollback failed: host state is X" happened; never silent.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuws.core.errors import GpuwsError, NoNvidiaDriver, RefusedInput
from gpuws.core.nvsmi.compute_apps import ComputeApp, parse_compute_apps
from gpuws.core.nvsmi.listing import parse_gpu_list
from gpuws.core.nvsmi.query_csv import parse_query_csv
from gpuws.core.resize.catalog import GpuModel
from gpuws.core.resize.layout import Layout, parse_target
from gpuws.core.resize.mig_parse import parse_lci, parse_lgi, parse_lgip
from gpuws.core.resize.outcome import ResizeOutcome as ResizeOutcome  # re-exported: callers read it here
from gpuws.core.resize.plan import ALREADY_AT_TARGET, Plan, Step, build_mig_plan, nvidia_smi
from gpuws.core.resize.provider import ProviderPlan, redact, token_environment
from gpuws.core.resize.state import GpuMigState
from gpuws.core.runner import CommandResult, CommandRunner, CommandTimeout, LocalRunner

TARGET_VERIFIED = "target verified"
ROLLED_BACK = "rolled back to previous layout (verified)"
ROLLBACK_FAILED = "rollback failed: host state is {state}"
PROVIDER_ROLLED_BACK = "rolled back to previous instance type (verified)"

_GPU_FIELDS = ("index", "name", "uuid", "mig.mode.current", "mig.mode.pending")
_APP_FIELDS = ("pid", "process_name", "gpu_uuid", "used_memory")
# Processes that commonly keep a GPU open and so block a MIG mode change or a GPU reset.
_RESET_BLOCKERS = {
    "nvidia-persistenced": "nvidia-persistenced (persistence daemon)",
    "nv-hostengine": "nv-hostengine (DCGM)",
    "dcgm-exporter": "dcgm-exporter (DCGM client)",
    "Xorg": "Xorg (display server)",
    "Xwayland": "Xwayland (display server)",
}


class ResizeRefused(GpuwsError):
    """Preflight refused the resize before anything on the host changed."""

    def __init__(self, message: str, processes: Sequence[ComputeApp] = ()) -> None:
        super().__init__(message)
        self.processes = list(processes)


class GpuNotResizable(ResizeRefused, RefusedInput):
    """The GPU asked for does not exist or has no MIG: the user's choice is wrong, so it is refused
    input (exit status 2, as every input error), not a preflight refusal of a possible resize (8)."""


class StepFailed(GpuwsError):
    """A step or the verification failed (the caller rolls back)."""


class NoDriverForResize(StepFailed, NoNvidiaDriver):
    """nvidia-smi is not on the host: a failed step to the resize, "no NVIDIA driver" to people."""


@dataclass(frozen=True)
class Progress:
    """One progress report: `done` of `total` steps, with a line for the step log."""

    done: int
    total: int
    message: str
    phase: str = "apply"  # "preflight", "apply", "verify", "rollback"


ProgressCallback = Callable[[Progress], None]


@dataclass
class ResizeResult:
    """What a resize did. `ok` is True only for a verified target (or nothing to do)."""

    outcome: str
    ok: bool
    before: Layout
    after: Layout | None  # the layout read back at the end (None when it could not be read)
    plan: Plan
    error: str | None = None
    log: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stopped_processes: list[int] = field(default_factory=list)
    kind: ResizeOutcome = ResizeOutcome.VERIFIED

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "outcome_kind": str(self.kind),
            "ok": self.ok,
            "before": self.before.describe(),
            "after": self.after.describe() if self.after else None,
            "error": self.error,
            "warnings": self.warnings,
            "stopped_processes": self.stopped_processes,
            "log": self.log,
        }


def _first_line(result: CommandResult) -> str:
    text = (result.stderr.strip() or result.stdout.strip()).splitlines()
    return text[0][:200] if text else f"exit status {result.exit_status}"


class MigResizer:
    """Reads, plans, preflights and applies MIG layouts on one host through a CommandRunner."""

    def __init__(self, runner: CommandRunner, *, step_timeout: float = 300.0, read_timeout: float = 60.0) -> None:
        self.runner = runner
        self.step_timeout = step_timeout
        self.read_timeout = read_timeout
        self._sudo: bool | None = None

    # -- reading ------------------------------------------------------------------------------

    async def _run(self, argv: Sequence[str], timeout: float | None = None) -> CommandResult:
        try:
            return await self.runner.run(list(argv), timeout=timeout or self.read_timeout)
        except CommandTimeout as exc:
            raise StepFailed(str(exc)) from None
        except OSError as exc:  # e.g. nvidia-smi missing on a LocalRunner
            if isinstance(exc, FileNotFoundError) and argv[0] == "nvidia-smi":
                raise NoDriverForResize("no NVIDIA driver found on the host (nvidia-smi is missing)") from None
            raise StepFailed(f"{argv[0]}: {exc.strerror or exc}") from None

    async def needs_sudo(self) -> bool:
        """False as root; True when `sudo -n true` works; ResizeRefused otherwise."""
        if self._sudo is None:
            uid = await self._run(["id", "-u"])
            if uid.ok and uid.stdout.strip() == "0":
                self._sudo = False
            elif (await self._run(["sudo", "-n", "true"])).ok:
                self._sudo = True
            else:
                raise ResizeRefused(
                    "resizing MIG needs root or sudo without a password on the host (`sudo -n true` failed)"
                )
        return self._sudo

    async def _mig_list(self, flag: str) -> str:
        """`nvidia-smi mig -lgi`/`-lci` output; "No ... found" (non-zero exit) reads as empty."""
        result = await self._run(nvidia_smi("mig", flag, sudo=await self.needs_sudo()))
        text = result.stdout if result.stdout.strip() else result.stderr
        if not result.ok and "found" not in text.lower():
            raise StepFailed(f"nvidia-smi mig {flag} failed: {_first_line(result)}")
        return text

    async def read_gpus(self) -> list[GpuMigState]:
        """Every GPU with its MIG mode, instances and `-L` MIG devices."""
        query = await self._run(
            ["nvidia-smi", f"--query-gpu={','.join(_GPU_FIELDS)}", "--format=csv,noheader"]
        )
        if query.exit_status == 127:  # the host's shell did not find it (over SSH)
            raise NoDriverForResize("no NVIDIA driver found on the host (nvidia-smi is missing)")
        if not query.ok:
            raise StepFailed(f"nvidia-smi --query-gpu failed: {_first_line(query)}")
        rows = parse_query_csv(query.stdout, _GPU_FIELDS)
        any_mig = any(r.get("mig.mode.current") == "Enabled" for r in rows)
        gis = parse_lgi(await self._mig_list("-lgi")) if any_mig else []
        cis = parse_lci(await self._mig_list("-lci")) if any_mig else []
        listing = await self._run(["nvidia-smi", "-L"])
        if not listing.ok:
            raise StepFailed(f"nvidia-smi -L failed: {_first_line(listing)}")
        mig_names = {g.index: tuple(d.profile for d in g.mig_devices) for g in parse_gpu_list(listing.stdout)}
        host_memory = await self._host_profile_memory() if any_mig else {}
        states = []
        for row in rows:
            index = int(row["index"] or -1)
            states.append(
                GpuMigState(
                    index=index,
                    name=row["name"] or "",
                    uuid=row["uuid"],
                    mig_current=row["mig.mode.current"],
                    mig_pending=row["mig.mode.pending"],
                    gpu_instances=tuple(gi for gi in gis if gi.gpu == index),
                    compute_instances=tuple(ci for ci in cis if ci.gpu == index),
                    mig_device_names=mig_names.get(index, ()),
                    host_profile_memory=tuple(sorted(host_memory.get(index, {}).items())),
                )
            )
        return states

    async def _host_profile_memory(self) -> dict[int, dict[int, float]]:
        """GPU index -> profile ID -> GiB from the host's own `mig -lgip` (empty when unreadable:
        the catalog's figures are used then)."""
        try:
            result = await self._run(["nvidia-smi", "mig", "-lgip"])
            rows = parse_lgip(result.stdout) if result.ok else []
        except GpuwsError:
            return {}
        memory: dict[int, dict[int, float]] = {}
        for row in rows:
            memory.setdefault(row.gpu, {})[row.profile_id] = row.memory_gib
        return memory

    async def read_state(self, gpu_index: int) -> GpuMigState:
        for state in await self.read_gpus():
            if state.index == gpu_index:
                return state
        raise ResizeRefused(f"the host has no GPU {gpu_index}")

    async def compute_apps(self, state: GpuMigState) -> list[ComputeApp]:
        result = await self._run(
            ["nvidia-smi", f"--query-compute-apps={','.join(_APP_FIELDS)}", "--format=csv,noheader,nounits"]
        )
        if not result.ok:
            raise StepFailed(f"nvidia-smi --query-compute-apps failed: {_first_line(result)}")
        apps = parse_compute_apps(result.stdout, _APP_FIELDS)
        return [a for a in apps if a.gpu_uuid is None or a.gpu_uuid == state.uuid]

    async def reset_blockers(self) -> list[str]:
        """Processes and modules that commonly block a MIG mode change or GPU reset."""
        found = []
        ps = await self._run(["ps", "-eo", "pid=,comm="])
        for line in ps.stdout.splitlines():
            pid, _, comm = line.strip().partition(" ")
            if comm.strip() in _RESET_BLOCKERS:
                found.append(f"{_RESET_BLOCKERS[comm.strip()]}, pid {pid}")
        modules = await self._run(["cat", "/proc/modules"])
        if any(line.startswith("nvidia_drm ") for line in modules.stdout.splitlines()):
            found.append("the nvidia_drm kernel module (holds the GPU when modeset is on)")
        return found

    # -- planning -------------------------------------------------------------------------------

    async def plan(self, gpu_index: int, target: str | Layout) -> tuple[GpuMigState, GpuModel, Plan]:
        """Read GPU `gpu_index` and plan `target` for it (LayoutError / ResizeRefused say why not;
        GpuNotResizable when the GPU asked for is not there or has no MIG)."""
        gpus = await self.read_gpus()
        state = next((gpu for gpu in gpus if gpu.index == gpu_index), None)
        if state is None:
            there = ", ".join(str(gpu.index) for gpu in gpus) or "none"
            raise GpuNotResizable(f"the host has no GPU {gpu_index} (its GPUs: {there})")
        model = state.model
        if model is None or not state.mig_capable:
            raise GpuNotResizable(f"GPU {gpu_index} ({state.name}) is not MIG-capable; its layout cannot change here")
        layout = parse_target(target, model) if isinstance(target, str) else target
        return state, model, build_mig_plan(state, layout, model, sudo=await self.needs_sudo())

    # -- preflight ----------------------------------------------------------------------------

    async def preflight(
        self, state: GpuMigState, plan: Plan, *, stop_processes: bool, report: ProgressCallback
    ) -> tuple[list[str], list[int]]:
        """Refuse (ResizeRefused) unless the GPU is free; returns (warnings, stopped pids)."""
        warnings: list[str] = []
        stopped: list[int] = []
        apps = await self.compute_apps(state)
        if apps and not stop_processes:
            listed = "; ".join(f"pid {a.pid} {a.process_name}" for a in apps)
            raise ResizeRefused(
                f"GPU {state.index} is in use by {len(apps)} compute process(es): {listed}. "
                "Stop them first, or choose to have them stopped (--stop-processes)",
                apps,
            )
        if apps:
            stopped = await self._stop_processes(state, apps, report)
        if plan.needs_mode_change:
            blockers = await self.reset_blockers()
            if blockers:
                warnings.append("may block the MIG mode change / GPU reset: " + "; ".join(blockers))
        return warnings, stopped

    async def _stop_processes(
        self, state: GpuMigState, apps: list[ComputeApp], report: ProgressCallback
    ) -> list[int]:
        # A pid from nvidia-smi is only signalled when this host sees a process of that name
        # under it (containers have their own pid namespace: never kill the wrong process).
        for app in apps:
            ps = await self._run(["ps", "-o", "comm=", "-p", str(app.pid)])
            comm = ps.stdout.strip()
            expected = app.process_name.split()[0].rsplit("/", 1)[-1] if app.process_name else ""
            if not ps.ok or not comm or not expected.startswith(comm[:15]):
                raise ResizeRefused(
                    f"cannot stop pid {app.pid} ({app.process_name}): no such process is visible on the host "
                    "(is it in a container?); stop it there first",
                    apps,
                )
        pids = [str(a.pid) for a in apps]
        sudo = ("sudo", "-n") if await self.needs_sudo() else ()
        for signal_name, wait_s in (("TERM", 10.0), ("KILL", 5.0)):
            report(Progress(0, 0, f"stopping pid(s) {', '.join(pids)} (SIG{signal_name})", "preflight"))
            await self._run([*sudo, "kill", f"-{signal_name}", *pids])
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                if not await self.compute_apps(state):
                    return [a.pid for a in apps]
                await asyncio.sleep(0.3)
        left = await self.compute_apps(state)
        raise ResizeRefused(
            f"GPU {state.index} still has compute process(es) after SIGKILL: "
            + "; ".join(f"pid {a.pid} {a.process_name}" for a in left),
            left,
        )

    # -- applying -----------------------------------------------------------------------------

    async def resize(
        self,
        gpu_index: int,
        target: str | Layout,
        *,
        stop_processes: bool = False,
        progress: ProgressCallback | None = None,
        on_begin: Callable[[Plan], None] | None = None,
        restore: Layout | None = None,
    ) -> ResizeResult:
        """Plan, preflight, apply, verify; on failure roll back and verify that.

        Raises LayoutError / ResizeRefused (nothing changed) before the first step; after it, the
        result's `outcome` says what state the host is in. `on_begin(plan)` runs after preflight,
        right before the first change (the journal is written there). `restore` is the layout a
        failure returns to (default: the layout read now; a recovery passes the one from before
        the interrupted run).
        """
        report = progress or (lambda _p: None)
        state, model, plan = await self.plan(gpu_index, target)
        previous = restore or plan.before
        result = ResizeResult(ALREADY_AT_TARGET, True, previous, plan.before, plan,
                              kind=ResizeOutcome.ALREADY_AT_TARGET)
        if plan.empty:
            if restore is not None:  # a recovery at its target still proves it, `-L` included
                try:
                    result.after = await self._verify(gpu_index, plan.after, report)
                except GpuwsError as exc:
                    result.ok, result.error = False, str(exc)
                    result.log.append(f"FAILED: {exc}")
                    await self._roll_back(gpu_index, previous, model, result, report)
                    return result
                result.outcome, result.kind = TARGET_VERIFIED, ResizeOutcome.VERIFIED
            return result
        result.warnings, result.stopped_processes = await self.preflight(
            state, plan, stop_processes=stop_processes, report=report
        )
        if on_begin is not None:
            on_begin(plan)
        try:
            await self._execute(plan, model, result, report, phase="apply")
            result.after = await self._verify(gpu_index, plan.after, report)
            result.outcome, result.kind = TARGET_VERIFIED, ResizeOutcome.VERIFIED
            return result
        except GpuwsError as exc:
            result.ok = False
            result.error = str(exc)
            result.log.append(f"FAILED: {exc}")
            report(Progress(0, 0, f"failed: {exc}; rolling back to {previous.describe()}", "rollback"))
        await self._roll_back(gpu_index, previous, model, result, report)
        return result

    async def _execute(
        self, plan: Plan, model: GpuModel, result: ResizeResult, report: ProgressCallback, phase: str
    ) -> None:
        total = len(plan.steps)
        for done, step in enumerate(plan.steps, start=1):
            if step.only_if_pending and not (await self.read_state(plan.gpu_index)).mode_pending:
                result.log.append(f"skipped (MIG mode already applied): {step.command}")
                report(Progress(done, total, f"{step.description}: not needed", phase))
                continue
            report(Progress(done - 1, total, f"{step.description}: {step.command}", phase))
            outcome = await self._run(step.argv, timeout=self.step_timeout)
            result.log.append(f"$ {step.command} -> exit {outcome.exit_status}")
            if not outcome.ok:
                raise StepFailed(f"step {done}/{total} ({step.description}) failed: {_first_line(outcome)}"
                                 + self._blocker_hint(step, result))
            report(Progress(done, total, f"done: {step.description}", phase))

    @staticmethod
    def _blocker_hint(step: Step, result: ResizeResult) -> str:
        if step.kind.value in ("set-mig-mode", "reset-gpu") and result.warnings:
            return f" ({result.warnings[0]})"
        return ""

    async def _verify(self, gpu_index: int, target: Layout, report: ProgressCallback) -> Layout:
        """Read back the layout and `nvidia-smi -L`; StepFailed unless both show `target`."""
        report(Progress(0, 0, f"verifying {target.describe()}", "verify"))
        state = await self.read_state(gpu_index)
        if state.mode_pending:
            raise StepFailed(f"verification: GPU {gpu_index} MIG mode is still pending ({state.mig_pending})")
        if state.layout != target or not state.complete:
            incomplete = "" if state.complete else " (a GPU instance has no compute instance)"
            raise StepFailed(
                f"verification: expected {target.describe()}, the host has {state.layout.describe()}{incomplete}"
            )
        if Counter(state.mig_device_names) != Counter(target.instances):
            listed = ",".join(state.mig_device_names) or "none"
            raise StepFailed(
                f"verification: nvidia-smi -L lists MIG devices [{listed}], expected {target.describe()}"
            )
        report(Progress(0, 0, f"verified: {target.describe()}", "verify"))
        return state.layout

    async def _roll_back(
        self, gpu_index: int, previous: Layout, model: GpuModel, result: ResizeResult, report: ProgressCallback
    ) -> None:
        try:
            state = await self.read_state(gpu_index)
            plan = build_mig_plan(state, previous, model, sudo=await self.needs_sudo())
            result.log.append(f"rollback: {plan.summary()}")
            await self._execute(plan, model, result, report, phase="rollback")
            result.after = await self._verify(gpu_index, previous, report)
            result.outcome, result.kind = ROLLED_BACK, ResizeOutcome.ROLLED_BACK
        except GpuwsError as exc:
            result.log.append(f"ROLLBACK FAILED: {exc}")
            result.after = await self._describe_now(gpu_index)
            where = result.after.describe() if result.after else "unknown (it could not be read)"
            result.outcome, result.kind = ROLLBACK_FAILED.format(state=where), ResizeOutcome.ROLLBACK_FAILED
            result.error = f"{result.error}; rollback: {exc}"

    async def _describe_now(self, gpu_index: int) -> Layout | None:
        try:
            return (await self.read_state(gpu_index)).layout
        except GpuwsError:
            return None


# -- cloud provider ---------------------------------------------------------------------------


@dataclass
class ProviderResult:
    outcome: str
    ok: bool
    error: str | None = None
    log: list[str] = field(default_factory=list)
    kind: ResizeOutcome = ResizeOutcome.VERIFIED

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "ok": self.ok, "error": self.error, "log": self.log}


async def run_provider_resize(
    plan: ProviderPlan,
    *,
    token: str | None,
    reconnect: Callable[[], Awaitable[str]],
    runner: CommandRunner | None = None,
    progress: ProgressCallback | None = None,
    timeout: float = 900.0,
) -> ProviderResult:
    """Run the provider CLI steps locally (token only in the environment), then `reconnect`
    (wait for SSH and re-probe; returns a one-line description of what it found).

    If a step fails after the instance was stopped, the instance is started again with its
    previous type and reconnected, and the outcome says so.
    """
    report = progress or (lambda _p: None)
    local = runner or LocalRunner()
    env = token_environment(plan.kind, token)
    secrets = [token or "", *env.values()]
    result = ProviderResult(TARGET_VERIFIED, True)
    steps = [c for c in plan.commands if c.action != "describe"]  # gpuws.app.cloud reads it where there is one
    total = len(steps)
    stopped = False

    async def run(action: str, argv: Sequence[str]) -> None:
        shown = next(c.display(plan.env_names) for c in plan.commands if c.action == action)
        try:
            out = await local.run(list(argv), timeout=timeout, env=env)
        except (CommandTimeout, OSError) as exc:
            raise StepFailed(redact(f"{action} failed: {exc}", secrets)) from None
        result.log.append(redact(f"$ {shown} -> exit {out.exit_status}", secrets))
        if not out.ok:
            raise StepFailed(redact(f"{action} failed: {_first_line(out)}", secrets))

    try:
        for done, command in enumerate(steps, start=1):
            report(Progress(done - 1, total, command.display(plan.env_names), "apply"))
            await run(command.action, command.argv)
            stopped = stopped or command.action == "stop"
            if command.action == "start":
                stopped = False
        report(Progress(total, total, "waiting for SSH and probing", "verify"))
        found = await reconnect()
        result.log.append(f"reconnected: {found}")
        return result
    except GpuwsError as exc:
        result.ok = False
        result.error = redact(str(exc), secrets)
    if not stopped:
        result.outcome = ROLLBACK_FAILED.format(state="unknown (the instance did not come back)")
        result.kind = ResizeOutcome.ROLLBACK_FAILED
        return result
    try:  # the instance is stopped with its old type: start it again
        for command in steps:
            if command.action in ("start", "wait_running"):
                await run(command.action, command.argv)
        found = await reconnect()
        result.log.append(f"reconnected: {found}")
        result.outcome, result.kind = PROVIDER_ROLLED_BACK, ResizeOutcome.ROLLED_BACK
    except GpuwsError as exc:
        result.outcome = ROLLBACK_FAILED.format(state="stopped or unknown")
        result.kind = ResizeOutcome.ROLLBACK_FAILED
        result.error = f"{result.error}; rollback: {redact(str(exc), secrets)}"
    return result
