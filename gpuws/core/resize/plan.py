"""Planning a MIG resize: the exact commands, in order, from the current state to a target.

Order (NVIDIA MIG user guide): destroy compute instances, destroy GPU instances, switch MIG
mode (the GPU must be idle; some GPUs keep the change pending until a GPU reset), then create
GPU instances each with its default compute instance (`-cgi ID -C`). Every step is an argv
list, never a shell string. A target equal to the current state gives an empty plan.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gpuws.core.resize.catalog import GpuModel
from gpuws.core.resize.layout import Layout, creation_order, fit_placements
from gpuws.core.resize.state import GpuMigState

ALREADY_AT_TARGET = "already at target"


class StepKind(StrEnum):
    DESTROY_CI = "destroy-compute-instances"
    DESTROY_GI = "destroy-gpu-instances"
    SET_MIG_MODE = "set-mig-mode"
    RESET_GPU = "reset-gpu"
    CREATE_GI = "create-gpu-instance"


@dataclass(frozen=True)
class Step:
    """One command of a plan."""

    kind: StepKind
    argv: tuple[str, ...]
    description: str
    destructive: bool
    only_if_pending: bool = False  # a GPU reset, run only when the MIG mode change stays pending
    profile: str | None = None  # for CREATE_GI: the profile it must create

    @property
    def command(self) -> str:
        """The command as a person would type it (display only; never executed as a string)."""
        return shlex.join(self.argv)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "argv": list(self.argv),
            "command": self.command,
            "description": self.description,
            "destructive": self.destructive,
            "only_if_pending": self.only_if_pending,
        }


@dataclass
class Plan:
    """The steps that take GPU `gpu_index` from `before` to `after`."""

    gpu_index: int
    before: Layout
    after: Layout
    steps: list[Step] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.steps

    @property
    def destructive(self) -> bool:
        return any(s.destructive for s in self.steps)

    @property
    def needs_mode_change(self) -> bool:
        return any(s.kind is StepKind.SET_MIG_MODE for s in self.steps)

    def summary(self) -> str:
        if self.empty:
            return ALREADY_AT_TARGET
        return f"GPU {self.gpu_index}: {self.before.describe()} -> {self.after.describe()} ({len(self.steps)} steps)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu_index,
            "before": self.before.describe(),
            "after": self.after.describe(),
            "summary": self.summary(),
            "destructive": self.destructive,
            "steps": [s.to_dict() for s in self.steps],
        }


def nvidia_smi(*args: str, sudo: bool) -> tuple[str, ...]:
    """argv for nvidia-smi, behind `sudo -n` (never prompts) when we are not root."""
    return (("sudo", "-n") if sudo else ()) + ("nvidia-smi", *args)


def build_mig_plan(state: GpuMigState, target: Layout, model: GpuModel, *, sudo: bool) -> Plan:
    """The plan from `state` to `target` on one GPU (empty when already there)."""
    fit_placements(target, model)  # refuse a target that cannot fit before planning anything
    i = str(state.index)
    plan = Plan(state.index, state.layout, target)
    at_target = state.layout == target and state.complete and not state.mode_pending
    if at_target:
        return plan
    steps = plan.steps
    if state.mig_enabled and state.compute_instances:
        steps.append(
            Step(StepKind.DESTROY_CI, nvidia_smi("mig", "-i", i, "-dci", sudo=sudo),
                 f"destroy the {len(state.compute_instances)} compute instance(s) on GPU {i}", True)
        )
    if state.mig_enabled and state.gpu_instances:
        steps.append(
            Step(StepKind.DESTROY_GI, nvidia_smi("mig", "-i", i, "-dgi", sudo=sudo),
                 f"destroy the GPU instances on GPU {i} ({state.layout.describe()})", True)
        )
    want_mode = "Enabled" if target.mig_enabled else "Disabled"
    if state.mig_current != want_mode or state.mode_pending:
        flag = "1" if target.mig_enabled else "0"
        verb = "enable" if target.mig_enabled else "disable"
        steps.append(
            Step(StepKind.SET_MIG_MODE, nvidia_smi("-i", i, "-mig", flag, sudo=sudo),
                 f"{verb} MIG mode on GPU {i} (needs an idle GPU)", True)
        )
        steps.append(
            Step(StepKind.RESET_GPU, nvidia_smi("-i", i, "-r", sudo=sudo),
                 f"reset GPU {i} if the MIG mode change is still pending", True, only_if_pending=True)
        )
    for profile in creation_order(target, model):  # an order the driver's placement rule can follow
        name = profile.name
        steps.append(
            Step(StepKind.CREATE_GI, nvidia_smi("mig", "-i", i, "-cgi", str(profile.profile_id), "-C", sudo=sudo),
                 f"create GPU instance {name} (profile ID {profile.profile_id}) with its compute instance",
                 False, profile=name)
        )
    return plan
