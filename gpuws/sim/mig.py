"""The MIG state machine of the simulated GPUs, with real `nvidia-smi` texts and exit codes.

Rules followed (NVIDIA MIG user guide; checked against fixtures/mig/ and the MIG capture):

- MIG mode changes need an idle GPU: with compute processes present the new mode stays *pending*
  (as real drivers report it) until the GPU is idle and reset (`nvidia-smi -r`) or the mode is set
  again while idle. Disabling needs every GPU instance destroyed first.
- GPU instances occupy memory slices [start, start + size) of 8; a profile may only start at its
  documented placements; the driver picks the lowest free placement. GPU instance ids are fixed by
  placement, as on real A100/H100: the whole card is 0, 4-slice instances at 0/4 are 1/2, 2-slice
  instances are 3 + start/2, 1-slice instances are 7 + start.
- Compute instances: `-C` (or `mig -cci` without a profile) creates one covering the whole GPU
  instance, id 0. A GPU instance with compute instances cannot be destroyed.

Exit codes follow the nvidia-smi man page: 0 ok, 2 invalid argument, 3 not supported,
6 not found, 255 other error (e.g. insufficient resources, in use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuws.sim.dynamics import scenario_processes
from gpuws.sim.models import MigProfile
from gpuws.sim.state import BUSY_PID_BASE, ComputeInstance, Fault, GpuInstance, GpuState

EXIT_OK = 0
EXIT_INVALID_ARGUMENT = 2
EXIT_NOT_SUPPORTED = 3
EXIT_NOT_FOUND = 6
EXIT_OTHER = 255

NOT_FOUND = "Not Found"
IN_USE = "In use by another client"
INSUFFICIENT_RESOURCES = "Insufficient Resources"
NOT_SUPPORTED = "Not Supported"
UNKNOWN_ERROR = "Unknown Error"
NO_MIG_DEVICES = "No MIG-enabled devices found."


@dataclass
class Outcome:
    """What an nvidia-smi invocation prints and returns."""

    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    code: int = EXIT_OK

    def fail(self, code: int) -> None:
        # The first failure decides the exit code, as with real multi-GPU invocations.
        if self.code == EXIT_OK:
            self.code = code


def gi_id_for(start: int, size: int) -> int:
    """The fixed GPU instance id for a placement on an 8-slice A100/H100."""
    if size >= 8:
        return 0
    if size >= 4:
        return 1 + start // 4
    if size == 2:
        return 3 + start // 2
    return 7 + start


def _occupied(gpu: GpuState) -> set[int]:
    return {s for gi in gpu.gpu_instances for s in range(gi.start, gi.start + gi.size)}


def _media_extension_in_use(gpu: GpuState) -> bool:
    return any(
        (p := gpu.model.mig_profile(gi.profile_id)) is not None and p.name.endswith("+me")
        for gi in gpu.gpu_instances
    )


def free_placements(gpu: GpuState, profile: MigProfile) -> list[int]:
    """Placements where one more `profile` instance fits right now (lowest first)."""
    if profile.name.endswith("+me") and _media_extension_in_use(gpu):
        return []
    taken = _occupied(gpu)
    return [s for s in profile.placements if not taken & set(range(s, s + profile.size))]


def free_count(gpu: GpuState, profile: MigProfile) -> int:
    """How many more `profile` instances could be created (the "Free" of `mig -lgip`)."""
    if profile.name.endswith("+me"):
        return 1 if free_placements(gpu, profile) else 0
    taken = set(_occupied(gpu))
    count = 0
    for start in profile.placements:
        slots = set(range(start, start + profile.size))
        if not taken & slots:
            taken |= slots
            count += 1
    return count


def compute_processes(gpu: GpuState, now: float) -> list[int]:
    """PIDs of compute processes on the GPU now (scenario, explicit and the busy fault)."""
    pids = [p.pid for p in scenario_processes(gpu, now)] + [p.pid for p in gpu.processes]
    if gpu.has_fault(Fault.BUSY):
        pids.append(BUSY_PID_BASE + gpu.index)
    return pids


def mig_devices(gpu: GpuState) -> list[tuple[GpuInstance, ComputeInstance]]:
    """(GI, CI) pairs in device-index order (by GPU instance id, then compute instance id)."""
    pairs = [(gi, ci) for gi in gpu.gpu_instances for ci in gi.compute_instances]
    return sorted(pairs, key=lambda pair: (pair[0].gi_id, pair[1].ci_id))


# -- MIG mode -------------------------------------------------------------------------------------


def set_mig_mode(gpus: Sequence[GpuState], enable: bool, now: float) -> Outcome:
    """`nvidia-smi [-i N] -mig 0|1`."""
    out = Outcome()
    verb = "enable" if enable else "disable"
    for gpu in gpus:
        bus = gpu.pci_bus_id
        if not gpu.model.mig_capable:
            out.stderr.append(f"Unable to {verb} MIG Mode for GPU {bus}: {NOT_SUPPORTED}")
            out.fail(EXIT_NOT_SUPPORTED)
            continue
        if not enable and gpu.gpu_instances:
            out.stderr.append(f"Unable to disable MIG Mode for GPU {bus}: {IN_USE}")
            out.fail(EXIT_OTHER)
            continue
        gpu.mig_pending = enable
        if gpu.mig_current == enable:
            out.stdout.append(f"{verb.capitalize()}d MIG Mode for GPU {bus}")
            continue
        if compute_processes(gpu, now):
            out.stdout.append(f"Warning: MIG mode is in pending {verb} state for GPU {bus}:{IN_USE}")
            out.stdout.append(
                f"{bus} is currently being used by one or more other processes (e.g. CUDA application "
                "or a monitoring application such as another instance of nvidia-smi). Please first "
                "kill all processes using the device and retry the command or reboot the system to "
                "make MIG mode effective."
            )
            continue
        if gpu.consume_fault(Fault.RESET_FAILS):
            out.stdout.append(f"Warning: MIG mode is in pending {verb} state for GPU {bus}:{NOT_SUPPORTED}")
            out.stdout.append(
                f"Reboot the system or try nvidia-smi --gpu-reset to make MIG mode effective on GPU {bus}"
            )
            continue
        gpu.mig_current = enable
        out.stdout.append(f"{verb.capitalize()}d MIG Mode for GPU {bus}")
    if out.code == EXIT_OK:
        out.stdout.append("All done.")
    return out


def reset_gpus(gpus: Sequence[GpuState], now: float) -> Outcome:
    """`nvidia-smi -r [-i N]`: applies a pending MIG mode when the GPU is idle."""
    out = Outcome()
    for gpu in gpus:
        if compute_processes(gpu, now) or gpu.consume_fault(Fault.RESET_FAILS):
            out.stderr.append(
                "Unable to reset this GPU because it's being used by some other process (e.g. CUDA "
                "application, graphics application like X server, monitoring application like other "
                "instance of nvidia-smi). Please first kill all processes using this GPU and all compute "
                "applications running in the system."
            )
            out.fail(EXIT_OTHER)
            continue
        gpu.mig_current = gpu.mig_pending
        if not gpu.mig_current:
            gpu.gpu_instances.clear()
        out.stdout.append(f"GPU {gpu.pci_bus_id} was successfully reset.")
    if out.code == EXIT_OK:
        out.stdout.append("All done.")
    return out


# -- GPU and compute instances --------------------------------------------------------------------


def _mig_enabled(gpus: Sequence[GpuState], out: Outcome) -> list[GpuState]:
    enabled = [g for g in gpus if g.mig_current]
    if not enabled:
        out.stderr.append(NO_MIG_DEVICES)
        out.fail(EXIT_NOT_FOUND)
    return enabled


def _new_compute_instance(gpu: GpuState, gi: GpuInstance, profile: MigProfile) -> ComputeInstance:
    ci = ComputeInstance(0, profile.compute_profile_id, profile.compute_slices, gpu.next_mig_uuid())
    gi.compute_instances.append(ci)
    return ci


def _ci_created_line(gpu: GpuState, gi: GpuInstance, ci: ComputeInstance, profile: MigProfile) -> str:
    ci_name = profile.name if ci.slices == profile.compute_slices else f"{ci.slices}c.{profile.name}"
    return (
        f"Successfully created compute instance ID {ci.ci_id:2d} on GPU {gpu.index:2d} GPU instance ID "
        f"{gi.gi_id:2d} using profile MIG {ci_name} (ID {ci.profile_id:2d})"
    )


def create_gpu_instances(
    gpus: Sequence[GpuState], profile_keys: Sequence[str], with_compute: bool
) -> Outcome:
    """`nvidia-smi mig [-i N] -cgi P[,P...] [-C]`."""
    out = Outcome()
    for gpu in _mig_enabled(gpus, out):
        for key in profile_keys:
            profile = gpu.model.mig_profile(key)
            if profile is None:
                out.stderr.append(
                    f"Unable to create a GPU instance on GPU {gpu.index:2d} using profile {key}: {NOT_FOUND}"
                )
                out.stderr.append(f"Failed to create GPU instances: {NOT_FOUND}")
                out.fail(EXIT_NOT_FOUND)
                return out
            placements = free_placements(gpu, profile)
            failure = None
            if not placements:
                failure = INSUFFICIENT_RESOURCES
            elif gpu.consume_fault(Fault.CREATE_GI_FAILS):
                failure = UNKNOWN_ERROR
            if failure:
                out.stderr.append(
                    f"Unable to create a GPU instance on GPU {gpu.index:2d} using profile "
                    f"{profile.profile_id}: {failure}"
                )
                out.stderr.append(f"Failed to create GPU instances: {failure}")
                out.fail(EXIT_OTHER)
                return out
            start = placements[0]
            gi = GpuInstance(gi_id_for(start, profile.size), profile.profile_id, start, profile.size)
            silent = gpu.consume_fault(Fault.SILENT_NOOP)
            if not silent:
                gpu.gpu_instances.append(gi)
            out.stdout.append(
                f"Successfully created GPU instance ID {gi.gi_id:2d} on GPU {gpu.index:2d} using profile "
                f"MIG {profile.name} (ID {profile.profile_id:2d})"
            )
            if with_compute:
                if gpu.consume_fault(Fault.CREATE_CI_FAILS):
                    out.stderr.append(
                        f"Unable to create a compute instance on GPU {gpu.index:2d} GPU instance ID "
                        f"{gi.gi_id:2d} using profile {profile.compute_profile_id}: {UNKNOWN_ERROR}"
                    )
                    out.stderr.append(f"Failed to create compute instances: {UNKNOWN_ERROR}")
                    out.fail(EXIT_OTHER)
                    return out
                if silent:
                    ci = ComputeInstance(0, profile.compute_profile_id, profile.compute_slices, "")
                else:
                    ci = _new_compute_instance(gpu, gi, profile)
                out.stdout.append(_ci_created_line(gpu, gi, ci, profile))
    return out


def _select_gis(gpu: GpuState, gi_ids: Sequence[int] | None) -> list[GpuInstance]:
    if gi_ids is None:
        return sorted(gpu.gpu_instances, key=lambda gi: gi.gi_id)
    return [gi for gi in gpu.gpu_instances if gi.gi_id in gi_ids]


def create_compute_instances(gpus: Sequence[GpuState], gi_ids: Sequence[int] | None) -> Outcome:
    """`nvidia-smi mig [-i N] [-gi ID] -cci`: one whole-instance compute instance per GPU instance."""
    out = Outcome()
    for gpu in _mig_enabled(gpus, out):
        targets = _select_gis(gpu, gi_ids)
        if not targets:
            out.stderr.append(f"No GPU instances found: {NOT_FOUND}")
            out.fail(EXIT_NOT_FOUND)
            continue
        for gi in targets:
            profile = gpu.model.mig_profile(gi.profile_id)
            assert profile is not None  # state only ever holds the model's own profiles
            if gi.compute_instances:
                out.stderr.append(
                    f"Unable to create a compute instance on GPU {gpu.index:2d} GPU instance ID "
                    f"{gi.gi_id:2d} using profile {profile.compute_profile_id}: {INSUFFICIENT_RESOURCES}"
                )
                out.stderr.append(f"Failed to create compute instances: {INSUFFICIENT_RESOURCES}")
                out.fail(EXIT_OTHER)
                return out
            if gpu.consume_fault(Fault.CREATE_CI_FAILS):
                out.stderr.append(
                    f"Unable to create a compute instance on GPU {gpu.index:2d} GPU instance ID "
                    f"{gi.gi_id:2d} using profile {profile.compute_profile_id}: {UNKNOWN_ERROR}"
                )
                out.stderr.append(f"Failed to create compute instances: {UNKNOWN_ERROR}")
                out.fail(EXIT_OTHER)
                return out
            if gpu.consume_fault(Fault.SILENT_NOOP):
                ci = ComputeInstance(0, profile.compute_profile_id, profile.compute_slices, "")
            else:
                ci = _new_compute_instance(gpu, gi, profile)
            out.stdout.append(_ci_created_line(gpu, gi, ci, profile))
    return out


def _processes_on_gi(gpu: GpuState, gi: GpuInstance) -> bool:
    return any(p.gpu_instance_id == gi.gi_id for p in gpu.processes) or gpu.has_fault(Fault.BUSY)


def destroy_compute_instances(
    gpus: Sequence[GpuState], gi_ids: Sequence[int] | None, ci_ids: Sequence[int] | None
) -> Outcome:
    """`nvidia-smi mig [-i N] [-gi ID] [-ci ID] -dci`."""
    out = Outcome()
    for gpu in _mig_enabled(gpus, out):
        pairs = [
            (gi, ci) for gi in _select_gis(gpu, gi_ids) for ci in gi.compute_instances
            if ci_ids is None or ci.ci_id in ci_ids
        ]
        if not pairs:
            out.stderr.append(f"No compute instances found: {NOT_FOUND}")
            out.fail(EXIT_NOT_FOUND)
            continue
        for gi, ci in pairs:
            if _processes_on_gi(gpu, gi) or gpu.consume_fault(Fault.DESTROY_FAILS):
                out.stderr.append(
                    f"Unable to destroy compute instance ID {ci.ci_id:2d} from GPU {gpu.index:2d} GPU "
                    f"instance ID {gi.gi_id:2d}: {IN_USE}"
                )
                out.stderr.append(f"Failed to destroy compute instances: {IN_USE}")
                out.fail(EXIT_OTHER)
                return out
            gi.compute_instances.remove(ci)
            out.stdout.append(
                f"Successfully destroyed compute instance ID {ci.ci_id:2d} from GPU {gpu.index:2d} GPU "
                f"instance ID {gi.gi_id:2d}"
            )
    return out


def destroy_gpu_instances(gpus: Sequence[GpuState], gi_ids: Sequence[int] | None) -> Outcome:
    """`nvidia-smi mig [-i N] [-gi ID] -dgi`: refused while compute instances remain."""
    out = Outcome()
    for gpu in _mig_enabled(gpus, out):
        targets = _select_gis(gpu, gi_ids)
        if not targets:
            out.stderr.append(f"No GPU instances found: {NOT_FOUND}")
            out.fail(EXIT_NOT_FOUND)
            continue
        for gi in targets:
            if gi.compute_instances or _processes_on_gi(gpu, gi) or gpu.consume_fault(Fault.DESTROY_FAILS):
                out.stderr.append(
                    f"Unable to destroy GPU instance ID {gi.gi_id:2d} from GPU {gpu.index:2d}: {IN_USE}"
                )
                out.stderr.append(f"Failed to destroy GPU instances: {IN_USE}")
                out.fail(EXIT_OTHER)
                return out
            gpu.gpu_instances.remove(gi)
            out.stdout.append(f"Successfully destroyed GPU instance ID {gi.gi_id:2d} from GPU {gpu.index:2d}")
    return out


# -- listings -------------------------------------------------------------------------------------


def list_gpu_instance_profiles(gpus: Sequence[GpuState]) -> Outcome:
    """`nvidia-smi mig -lgip`, in the real box layout (fixtures/mig/h100-sxm5-lgip.txt)."""
    out = Outcome()
    enabled = _mig_enabled(gpus, out)
    if not enabled:
        return out
    rule = "+" + "-" * 77 + "+"
    lines = [
        rule,
        "| GPU instance profiles:" + " " * 54 + "|",
        "| GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |",
        "|                              Free/Total   GiB              CE    JPEG  OFA  |",
        "|" + "=" * 77 + "|",
    ]
    for gpu in enabled:
        for p in gpu.model.mig_profiles:
            counts = f"{free_count(gpu, p)}/{p.max_count}"
            row1 = (
                f"|{gpu.index:4d}  {'MIG ' + p.name:<18}{p.profile_id:2d}     {counts:<11}"
                f"{p.memory_gib_text:<11}No     {p.sm_count:<7}{p.decoders:<6}{p.encoders:<4}|"
            )
            row2 = f"|{'':61}{p.copy_engines:<6}{p.jpeg:<6}{p.ofa:<4}|"
            lines += [row1, row2, rule]
    out.stdout = lines
    return out


def list_gpu_instance_placements(gpus: Sequence[GpuState]) -> Outcome:
    """`nvidia-smi mig -lgipp` (fixtures/mig/h100-nvl-lgip-lgipp-cgi.txt)."""
    out = Outcome()
    for gpu in _mig_enabled(gpus, out):
        for p in gpu.model.mig_profiles:
            starts = ",".join(str(s) for s in p.placements)
            label = "Placements:" if len(p.placements) > 1 else "Placement :"
            out.stdout.append(f"GPU {gpu.index:2d} Profile ID {p.profile_id:2d} {label} {{{starts}}}:{p.size}")
    return out


def list_gpu_instances(gpus: Sequence[GpuState]) -> Outcome:
    """`nvidia-smi mig -lgi`."""
    out = Outcome()
    enabled = _mig_enabled(gpus, out)
    if not enabled:
        return out
    rows = [(g, gi) for g in enabled for gi in sorted(g.gpu_instances, key=lambda gi: gi.gi_id)]
    if not rows:
        out.stderr.append(f"No GPU instances found: {NOT_FOUND}")
        out.fail(EXIT_NOT_FOUND)
        return out
    rule = "+" + "-" * 55 + "+"
    lines = [
        rule,
        "| GPU instances:" + " " * 40 + "|",
        "| GPU   Name             Profile  Instance   Placement  |",
        "|                          ID       ID       Start:Size |",
        "|" + "=" * 55 + "|",
    ]
    for gpu, gi in rows:
        profile = gpu.model.mig_profile(gi.profile_id)
        name = f"MIG {profile.name}" if profile else "MIG ?"
        place = f"{gi.start}:{gi.size}"
        lines.append(f"|{gpu.index:4d}  {name:<18}{gi.profile_id:>5}{gi.gi_id:>9}{place:>12}     |")
        lines.append(rule)
    out.stdout = lines
    return out


def list_compute_instances(gpus: Sequence[GpuState]) -> Outcome:
    """`nvidia-smi mig -lci`."""
    out = Outcome()
    enabled = _mig_enabled(gpus, out)
    if not enabled:
        return out
    rows = [(g, gi, ci) for g in enabled for gi, ci in mig_devices(g)]
    if not rows:
        out.stderr.append(f"No compute instances found: {NOT_FOUND}")
        out.fail(EXIT_NOT_FOUND)
        return out
    rule = "+" + "-" * 68 + "+"
    lines = [
        rule,
        "| Compute instances:" + " " * 49 + "|",
        "| GPU     GPU       Name             Profile   Instance   Placement  |",
        "|       Instance                       ID        ID       Start:Size |",
        "|         ID                                                         |",
        "|" + "=" * 68 + "|",
    ]
    for gpu, gi, ci in rows:
        profile = gpu.model.mig_profile(gi.profile_id)
        name = f"MIG {profile.name}" if profile else "MIG ?"
        place = f"0:{ci.slices}"
        lines.append(
            f"|{gpu.index:4d}{gi.gi_id:>7}       {name:<18}{ci.profile_id:>5}{ci.ci_id:>10}{place:>12}     |"
        )
        lines.append(rule)
    out.stdout = lines
    return out
