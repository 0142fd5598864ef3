"""The slice catalog: what a GPU can be cut into, as NVIDIA documents it.

MIG GPU-instance profiles per GPU model follow NVIDIA's MIG user guide and what
`nvidia-smi mig -lgip` / `-lgipp` print on real cards (see /work/shared/fixtures/mig/): profile
name, profile ID, how many instances fit, memory, compute share (SM slices out of 7) and the
placements the driver accepts (start memory slot and size, out of 8 slots). Time-sliced vGPU
fractions are listed for hosts whose GPU is a vGPU slice; those change only through the provider.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

COMPUTE_SLICES = 7  # every MIG-capable model has 7 compute (SM) slices
MEMORY_SLOTS = 8  # and 8 memory slices; placements are "start:size" in these slots

FULL = "full"


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile, e.g. `1g.10gb` (ID 19) on an H100 80GB."""

    name: str
    profile_id: int
    max_count: int
    memory_gib: float  # as `nvidia-smi mig -lgip` reports it (GiB), or the nominal size
    compute_slices: int  # SM slices out of COMPUTE_SLICES
    placement_starts: tuple[int, ...]  # valid start slots, as `mig -lgipp` lists them
    placement_size: int  # memory slots one instance occupies
    sm_count: int | None = None  # streaming multiprocessors, where published

    @property
    def compute_fraction(self) -> Fraction:
        return Fraction(self.compute_slices, COMPUTE_SLICES)

    @property
    def memory_slices(self) -> int:
        return self.placement_size


@dataclass(frozen=True)
class GpuModel:
    """The MIG profile set of one GPU model."""

    key: str  # short id used in docs and tests, e.g. "h100-80gb"
    display_name: str
    name_patterns: tuple[str, ...]  # regexes matched against the driver's product name
    memory_gib: float
    profiles: tuple[MigProfile, ...]
    # Illustrative on-demand price for the whole card, used only when a host has no price of
    # its own (the demo host); every host can override it.
    reference_price_per_hour: float = 0.0

    def profile(self, name_or_id: str | int) -> MigProfile | None:
        """The profile with this name (`3g.40gb`, `MIG 3g.40gb`) or profile ID, if any."""
        for p in self.profiles:
            if isinstance(name_or_id, int):
                if p.profile_id == name_or_id:
                    return p
            elif p.name == name_or_id.removeprefix("MIG ").strip():
                return p
        return None

    @property
    def profile_names(self) -> list[str]:
        return [p.name for p in self.profiles]


@dataclass(frozen=True)
class VgpuFraction:
    """A time-sliced vGPU share of one card (not isolated: the card is time-shared)."""

    name: str  # "1/8", "1/4", "1/2", "full"
    fraction: Fraction


VGPU_FRACTIONS: tuple[VgpuFraction, ...] = (
    VgpuFraction("1/8", Fraction(1, 8)),
    VgpuFraction("1/4", Fraction(1, 4)),
    VgpuFraction("1/2", Fraction(1, 2)),
    VgpuFraction(FULL, Fraction(1)),
)


def _profiles(
    sizes: tuple[str, str, str, str, str, str],
    memory_gib: tuple[float, float, float, float, float, float],
    sm_counts: tuple[int, int, int, int, int, int] | None,
) -> tuple[MigProfile, ...]:
    """The six standard profiles (1g, 1g x2 memory, 2g, 3g, 4g, 7g) with NVIDIA's IDs/placements.

    IDs, max counts and placements are the same on A100, H100, H200 and B200 (MIG user guide;
    `mig -lgip`/`-lgipp` captures): 1g (19) {0..6}:1, 1g double memory (15) {0,2,4,6}:2,
    2g (14) {0,2,4}:2, 3g (9) {0,4}:4, 4g (5) {0}:4, 7g (0) {0}:8.
    """
    shape = (
        (19, 7, 1, (0, 1, 2, 3, 4, 5, 6), 1),
        (15, 4, 1, (0, 2, 4, 6), 2),
        (14, 3, 2, (0, 2, 4), 2),
        (9, 2, 3, (0, 4), 4),
        (5, 1, 4, (0,), 4),
        (0, 1, 7, (0,), 8),
    )
    return tuple(
        MigProfile(
            name=name,
            profile_id=pid,
            max_count=count,
            memory_gib=mem,
            compute_slices=compute,
            placement_starts=starts,
            placement_size=size,
            sm_count=sm_counts[i] if sm_counts else None,
        )
        for i, (name, mem, (pid, count, compute, starts, size)) in enumerate(
            zip(sizes, memory_gib, shape, strict=True)
        )
    )


# Memory figures: the `mig -lgip` GiB column where a real capture exists (H100 80GB, H100 NVL),
# NVIDIA's MIG user guide examples for A100; H200 and B200 use the nominal size in the name.
GPU_MODELS: tuple[GpuModel, ...] = (
    GpuModel(
        key="a100-40gb",
        display_name="A100 40GB",
        name_patterns=(r"A100.*40GB",),
        memory_gib=40,
        profiles=_profiles(
            ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
            (4.75, 9.62, 9.62, 19.62, 19.62, 39.5),
            (14, 14, 28, 42, 56, 98),
        ),
        reference_price_per_hour=1.50,
    ),
    GpuModel(
        key="a100-80gb",
        display_name="A100 80GB",
        name_patterns=(r"A100.*80GB",),
        memory_gib=80,
        profiles=_profiles(
            ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            (9.5, 19.5, 19.5, 39.25, 39.25, 79.25),
            (14, 14, 28, 42, 56, 98),
        ),
        reference_price_per_hour=2.00,
    ),
    GpuModel(
        key="h100-nvl",
        display_name="H100 NVL 94GB",
        name_patterns=(r"H100 NVL",),
        memory_gib=94,
        profiles=_profiles(
            ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
            (10.75, 21.62, 21.62, 46.38, 46.38, 93.12),
            (16, 26, 32, 60, 64, 132),
        ),
        reference_price_per_hour=3.50,
    ),
    GpuModel(
        key="h100-80gb",
        display_name="H100 80GB",
        name_patterns=(r"H100.*80GB", r"H100 (SXM|PCIe)"),
        memory_gib=80,
        profiles=_profiles(
            ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            (9.75, 19.62, 19.62, 39.5, 39.5, 79.25),
            (16, 26, 32, 60, 64, 132),
        ),
        reference_price_per_hour=3.00,
    ),
    GpuModel(
        key="h200-141gb",
        display_name="H200 141GB",
        name_patterns=(r"H200",),
        memory_gib=141,
        profiles=_profiles(
            ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
            (18, 35, 35, 71, 71, 141),
            (16, 26, 32, 60, 64, 132),
        ),
        reference_price_per_hour=4.00,
    ),
    GpuModel(
        key="b200",
        display_name="B200 180GB",
        name_patterns=(r"B200",),
        memory_gib=180,
        profiles=_profiles(
            ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
            (23, 45, 45, 90, 90, 180),
            None,
        ),
        reference_price_per_hour=6.00,
    ),
)


def model_by_key(key: str) -> GpuModel:
    """The catalog entry with this key (`h100-80gb`); KeyError names the known keys."""
    for model in GPU_MODELS:
        if model.key == key:
            return model
    raise KeyError(f"unknown GPU model {key!r}; known: {', '.join(m.key for m in GPU_MODELS)}")


def model_for_gpu_name(product_name: str) -> GpuModel | None:
    """The MIG catalog entry for a driver product name ("NVIDIA H100 80GB HBM3"), or None."""
    for model in GPU_MODELS:  # H100 NVL is listed before H100 80GB so it wins
        if any(re.search(p, product_name, re.IGNORECASE) for p in model.name_patterns):
            return model
    return None


@dataclass(frozen=True)
class SliceOption:
    """One row of `gpuws slices`: a target a GPU can be resized to."""

    target: str
    kind: str  # "full", "mig" or "vgpu"
    memory_gib: float | None
    compute_fraction: Fraction
    price_per_hour: float | None
    notes: list[str] = field(default_factory=list)
