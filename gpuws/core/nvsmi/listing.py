"""`nvidia-smi -L` -> GPUs and their MIG devices, and merging that into the XML inventory.

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)
      MIG 3g.40gb     Device  0: (UUID: MIG-00000000-0000-0000-0000-000000000000)

Drivers before R470 wrote MIG UUIDs as "MIG-GPU-<uuid>/<gi>/<ci>"; both forms are kept verbatim.
`-L` is the authoritative source of MIG profile names, which the XML lacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuws.core.errors import ParseError
from gpuws.core.inventory import GpuInfo, MigDevice
from gpuws.core.nvsmi._values import clean_text, describe

_GPU_LINE = re.compile(r"^GPU\s+(?P<index>\d+):\s+(?P<name>.+?)\s+\(UUID:\s*(?P<uuid>[^)]*)\)\s*$")
_MIG_LINE = re.compile(r"^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+):\s+\(UUID:\s*(?P<uuid>[^)]*)\)\s*$")


@dataclass
class MigListEntry:
    """One `  MIG <profile> Device N: (UUID: ...)` line."""

    index: int
    profile: str
    uuid: str | None


@dataclass
class GpuListEntry:
    """One `GPU N: <name> (UUID: ...)` line with the MIG devices listed under it."""

    index: int
    name: str
    uuid: str | None
    mig_devices: list[MigListEntry] = field(default_factory=list)


def parse_gpu_list(text: str) -> list[GpuListEntry]:
    """Parse `nvidia-smi -L`. Blank lines are ignored; any other unknown line is a ParseError."""
    gpus: list[GpuListEntry] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        gpu = _GPU_LINE.match(line)
        if gpu is not None:
            gpus.append(
                GpuListEntry(
                    index=int(gpu.group("index")),
                    name=clean_text(gpu.group("name")) or "",
                    uuid=clean_text(gpu.group("uuid")),
                )
            )
            continue
        mig = _MIG_LINE.match(line)
        if mig is not None and gpus:
            gpus[-1].mig_devices.append(
                MigListEntry(
                    index=int(mig.group("index")),
                    profile=clean_text(mig.group("profile")) or "",
                    uuid=clean_text(mig.group("uuid")),
                )
            )
            continue
        if mig is not None:
            raise ParseError(f"nvidia-smi -L line {number}: a MIG device before any GPU: {describe(line)}")
        raise ParseError(f"nvidia-smi -L line {number}: not a GPU or MIG device line: {describe(line)}")
    return gpus


def merge_gpu_listing(gpus: list[GpuInfo], listing: list[GpuListEntry]) -> None:
    """Fill MIG profile names and UUIDs on `gpus` (from the XML) from `nvidia-smi -L`, in place.

    GPUs are matched by UUID, or by index when either side lacks one; MIG devices by index. A
    MIG device that `-L` lists but the XML does not describe is added with what `-L` knows.
    """
    for entry in listing:
        gpu = _find_gpu(gpus, entry)
        if gpu is None:
            continue
        by_index = {device.index: device for device in gpu.mig_devices}
        for listed in entry.mig_devices:
            device = by_index.get(listed.index)
            if device is None:
                gpu.mig_devices.append(
                    MigDevice(
                        index=listed.index,
                        gpu_instance_id=None,
                        compute_instance_id=None,
                        profile=listed.profile,
                        memory_total_mib=None,
                        uuid=listed.uuid,
                    )
                )
                continue
            device.profile = listed.profile
            device.uuid = device.uuid or listed.uuid
        gpu.mig_devices.sort(key=lambda device: device.index)


def _find_gpu(gpus: list[GpuInfo], entry: GpuListEntry) -> GpuInfo | None:
    # Both keys first: masked captures (and cloned VMs) can repeat a UUID across GPUs.
    candidates = (
        [gpu for gpu in gpus if gpu.uuid == entry.uuid and gpu.index == entry.index],
        [gpu for gpu in gpus if entry.uuid is not None and gpu.uuid == entry.uuid],
        [gpu for gpu in gpus if gpu.index == entry.index and (gpu.uuid is None or entry.uuid is None)],
    )
    for found in candidates:
        if found:
            return found[0]
    return None
