"""Applying and asserting NVIDIA mig-parted configs on a host, GPU by GPU, through `MigResizer`.

Each GPU a config changes goes through the same plan -> preflight -> apply -> verify -> rollback as
`gpuws resize`, with the journal written before its first change. GPUs are done one at a time, in
index order; the first GPU that fails stops the run (as `nvidia-mig-parted apply` does), and
the GPUs already done keep their verified layouts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuws.core.nvsmi.query_csv import parse_query_csv
from gpuws.core.resize.audit import AuditRecord, now_iso
from gpuws.core.resize.journal import JournalEntry, ResizeJournal
from gpuws.core.resize.layout import Layout
from gpuws.core.resize.migparted import GpuAction, GpuTarget, HostGpu
from gpuws.core.resize.outcome import ResizeOutcome, worst
from gpuws.core.resize.plan import Plan
from gpuws.remote.resize import MigResizer, ProgressCallback, ResizeResult, StepFailed

_ID_FIELDS = ("index", "pci.device_id")


async def read_host_gpus(resizer: MigResizer) -> list[HostGpu]:
    """Every GPU with its PCI device id (what `device-filter` matches) and current layout."""
    states = await resizer.read_gpus()
    result = await resizer.runner.run(
        ["nvidia-smi", f"--query-gpu={','.join(_ID_FIELDS)}", "--format=csv,noheader"], timeout=resizer.read_timeout
    )
    if not result.ok:
        raise StepFailed("nvidia-smi --query-gpu=pci.device_id failed")
    ids = {row["index"]: row["pci.device_id"] for row in parse_query_csv(result.stdout, _ID_FIELDS)}
    return [
        HostGpu(s.index, s.name, ids.get(str(s.index)), s.model if s.mig_capable else None, s.layout,
                settled=s.complete and not s.mode_pending)
        for s in states
    ]


@dataclass
class ConfigResult:
    """What applying a config did, per GPU."""

    config: str
    targets: list[GpuTarget]
    results: dict[int, ResizeResult] = field(default_factory=dict)
    outcome: ResizeOutcome = ResizeOutcome.ALREADY_AT_TARGET

    def to_dict(self) -> dict[str, Any]:
        gpus = []
        for t in self.targets:
            row = t.to_dict()
            result = self.results.get(t.gpu.index)
            if result is not None:
                row.update(outcome=result.outcome, outcome_kind=str(result.kind), ok=result.ok,
                           after=result.after.describe() if result.after else None, error=result.error)
            gpus.append(row)
        return {"config": self.config, "outcome_kind": str(self.outcome),
                "ok": self.outcome in (ResizeOutcome.VERIFIED, ResizeOutcome.ALREADY_AT_TARGET), "gpus": gpus}


async def apply_config(
    resizer: MigResizer,
    host: str,
    config: str,
    targets: list[GpuTarget],
    *,
    stop_processes: bool,
    simulated: bool,
    journal: ResizeJournal | None = None,
    progress: ProgressCallback | None = None,
) -> ConfigResult:
    """Resize every GPU the config changes, one at a time; stops at the first that fails."""
    journal = journal or ResizeJournal()
    done = ConfigResult(config, targets)
    for target in targets:
        if target.action is not GpuAction.CHANGE or target.target is None:
            continue
        gpu = target.gpu
        started = now_iso()

        def begin(plan: Plan, gpu: HostGpu = gpu) -> None:
            journal.begin(JournalEntry(host=host, gpu=gpu.index, gpu_name=gpu.name, before=plan.before.describe(),
                                       target=plan.after.describe(), plan=[s.to_dict() for s in plan.steps],
                                       simulated=simulated, via=f"mig-parted {config}"))

        result = await resizer.resize(gpu.index, target.target, stop_processes=stop_processes, progress=progress,
                                      on_begin=begin)
        done.results[gpu.index] = result
        if result.kind is not ResizeOutcome.ALREADY_AT_TARGET:
            journal.finish(host, _record(host, gpu, config, target.target, result, started, simulated),
                           keep=result.kind is ResizeOutcome.ROLLBACK_FAILED)
        if not result.ok:
            break
    kinds = [r.kind for r in done.results.values()]
    done.outcome = worst(kinds) if kinds else ResizeOutcome.ALREADY_AT_TARGET
    return done


def _record(host: str, gpu: HostGpu, config: str, target: Layout, result: ResizeResult, started: str,
            simulated: bool) -> AuditRecord:
    return AuditRecord(
        host=host, gpu=gpu.index, backend="mig", target=f"{target.describe()} (mig-parted {config})",
        before=result.before.describe(), after=result.after.describe() if result.after else None,
        outcome=result.outcome, ok=result.ok, plan=[s.to_dict() for s in result.plan.steps], log=result.log,
        started_at=started, simulated=simulated,
    )
