"""The Resize tab's remote work: the application layer's resize service (`gpuws.app.resize`).

The tab runs these coroutines on the loop thread through the bridge and turns the plain results
into widgets on the GUI thread. Nothing here is implemented twice: the CLI calls the same service.
"""

from __future__ import annotations

from gpuws.app.resize import (
    LayoutHook,
    LayoutRun,
    MigApplied,
    MigPreview,
    PlanChanged,
    ProgressCallback,
    ProviderApplied,
    apply_provider,
    interrupted_resize,
    mig_parted_config_names,
    mig_parted_target,
    preview_mig,
    read_audit,
    read_gpus,
    recover_mig,
)
from gpuws.app.resize import apply_mig as _apply_mig
from gpuws.core.models import HostProfile
from gpuws.core.resize.audit import AuditLog
from gpuws.core.resize.plan import Plan
from gpuws.core.runner import CommandRunner

__all__ = ["LayoutRun", "MigApplied", "MigPreview", "PlanChanged", "ProviderApplied", "apply_mig", "apply_provider",
           "interrupted_resize",
           "mig_parted_config_names", "mig_parted_target", "preview_mig", "read_audit", "read_gpus",
           "reconnect_and_probe", "recover_mig"]


async def apply_mig(
    runner: CommandRunner,
    profile: HostProfile,
    shown: Plan,
    *,
    stop_processes: bool,
    progress: ProgressCallback,
    audit: AuditLog,
    on_changed: LayoutHook | None = None,
) -> MigApplied:
    """Apply the confirmed plan through the shared service (re-plan check, audit, profile update)."""
    applied = await _apply_mig(runner, profile, shown, stop_processes=stop_processes, progress=progress, audit=audit,
                               via="window", on_changed=on_changed)
    applied.result.warnings.extend(applied.warnings)
    return applied


async def reconnect_and_probe(profile_name: str) -> str:
    """After a provider resize: wait for SSH on the (restarted) instance and say what GPUs it has."""
    from gpuws.app.targets import reconnect_and_probe as probe_again

    return await probe_again(profile_name)
