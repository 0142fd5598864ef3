"""Derive a MIG profile name ("3g.40gb") from what `nvidia-smi -q -x` says about a MIG device.

The XML gives each MIG device's SM count and memory but not its profile name (`nvidia-smi -L`
does; `listing.merge_gpu_listing` fills names from it and wins over this guess). The name is
"<compute slices>g.<memory label>gb[+me]":

- compute slices = SM count // SMs per slice of the GPU family. Not every profile has an exact
  multiple (H100's 1g.20gb has 26 SMs, its 7g has 132), so floor and cap at the family's maximum.
- memory label = memory slices * the card's nominal memory / its number of memory slices, rounded
  half up. Memory slices come from the device's share of the parent's memory. Checked against the
  real `mig -lgip` tables in the fixtures (H100 SXM5: 1g.10gb ... 7g.80gb; H100 NVL: 1g.12gb,
  1g.24gb, 3g.47gb, 7g.94gb) and the A100-80GB XML (1g.20gb).
- "+me" (media extensions) profiles are the only sub-7g ones with an OFA engine.

Only GPUs the registry (`gpuws.core.gpus`) knows are derived; for anything else the profile stays
None rather than being guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuws.core.gpus.models import mig_gpu_for_name


@dataclass(frozen=True)
class MigFamily:
    """How one GPU family divides into MIG slices (from the GPU registry)."""

    sms_per_slice: int
    max_compute_slices: int
    memory_slices: int
    nominal_memory_gb: float | None = None  # marketing size, when the product name may not say it


def mig_family(product_name: str) -> MigFamily | None:
    """The MIG slicing of the GPU named `product_name`, or None when we do not know it."""
    gpu = mig_gpu_for_name(product_name)
    if gpu is None:
        return None
    return MigFamily(gpu.sms_per_slice, gpu.compute_slices, gpu.memory_slices, gpu.memory_gib)


def _round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def derive_mig_profile(
    product_name: str,
    parent_memory_mib: int | None,
    sm_count: int | None,
    memory_mib: int | None,
    ofa_count: int | None = None,
) -> str | None:
    """The profile name of a MIG device, or None when it cannot be derived reliably."""
    family = mig_family(product_name)
    if family is None or not parent_memory_mib or not sm_count or not memory_mib:
        return None
    compute_slices = min(sm_count // family.sms_per_slice, family.max_compute_slices)
    if compute_slices < 1:
        return None
    slice_mib = parent_memory_mib / family.memory_slices
    memory_slices = max(1, _round_half_up(memory_mib / slice_mib))
    nominal_gb = _nominal_memory_gb(product_name, parent_memory_mib, family)
    memory_label = _round_half_up(memory_slices * nominal_gb / family.memory_slices)
    media = "+me" if ofa_count and compute_slices < family.max_compute_slices else ""
    return f"{compute_slices}g.{memory_label}gb{media}"


def _nominal_memory_gb(product_name: str, parent_memory_mib: int, family: MigFamily) -> float:
    if family.nominal_memory_gb is not None:
        return family.nominal_memory_gb
    return parent_memory_mib / 1024
