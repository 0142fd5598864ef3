"""The slice catalog: what a GPU can be cut into, derived from the GPU registry (`core/gpus`).

MIG GPU-instance profiles per GPU model follow NVIDIA's MIG user guide and what
`nvidia-smi mig -lgip` / `-lgipp` print on real cards (see tests/fixtures/real/mig/): profile
name, profile ID, how many instances fit, memory, compute share (SM slices out of 7) and the
placements the driver accepts (start memory slot and size, out of 8 slots), `+me` included. Time-sliced vGPU
fractions are listed for hosts whose GPU is a vGPU slice; those change only through the provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

from gpuws.core.gpus.models import MIG_GPUS, MemorySource, MigGpu, mig_gpu_for_name
from gpuws.core.gpus.profiles import MigProfileSpec

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
    memory_gib: float
    profiles: tuple[MigProfile, ...]
    # Illustrative on-demand price for the whole card, used only when a host has no price of
    # its own (the demo host); every host can override it.
    reference_price_per_hour: float = 0.0
    # DRIVER: memory figures as the driver reports them; NOMINAL: the size in the profile name
    # (no capture available), shown as such; a host's own `-lgip` replaces them (`with_host_memory`).
    memory_source: MemorySource = MemorySource.DRIVER

    @property
    def memory_nominal(self) -> bool:
        return self.memory_source is MemorySource.NOMINAL

    def with_host_memory(self, memory_gib: dict[int, float]) -> GpuModel:
        """This model with memory figures from the host's own `mig -lgip` (profile ID -> GiB)."""
        if not memory_gib:
            return self
        profiles = tuple(
            replace(p, memory_gib=memory_gib[p.profile_id]) if p.profile_id in memory_gib else p
            for p in self.profiles
        )
        return replace(self, profiles=profiles, memory_source=MemorySource.DRIVER)

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


def _catalog_profile(spec: MigProfileSpec) -> MigProfile:
    return MigProfile(
        name=spec.name,
        profile_id=spec.profile_id,
        max_count=spec.max_count,
        memory_gib=spec.memory_gib,
        compute_slices=spec.compute_slices,
        placement_starts=spec.placements,
        placement_size=spec.size,
        sm_count=spec.sm_count,
    )


def _catalog_model(gpu: MigGpu) -> GpuModel:
    return GpuModel(
        key=gpu.key,
        display_name=gpu.display_name,
        memory_gib=gpu.memory_gib,
        profiles=tuple(_catalog_profile(p) for p in gpu.profiles),
        reference_price_per_hour=gpu.reference_price_per_hour,
        memory_source=gpu.memory_source,
    )


# Derived from the GPU registry: every model whose MIG profile table the registry has and that
# divides into 7 compute / 8 memory slices (what the planner places over).
GPU_MODELS: tuple[GpuModel, ...] = tuple(
    _catalog_model(g) for g in MIG_GPUS.values()
    if g.profiles and g.compute_slices == COMPUTE_SLICES and g.memory_slices == MEMORY_SLOTS
)


def model_by_key(key: str) -> GpuModel:
    """The catalog entry with this key (`h100-80gb`); KeyError names the known keys."""
    for model in GPU_MODELS:
        if model.key == key:
            return model
    raise KeyError(f"unknown GPU model {key!r}; known: {', '.join(m.key for m in GPU_MODELS)}")


def model_for_gpu_name(product_name: str) -> GpuModel | None:
    """The MIG catalog entry for a driver product name ("NVIDIA H100 80GB HBM3"), or None."""
    gpu = mig_gpu_for_name(product_name)
    return next((m for m in GPU_MODELS if gpu is not None and m.key == gpu.key), None)


@dataclass(frozen=True)
class SliceOption:
    """One row of `gpuws slices`: a target a GPU can be resized to."""

    target: str
    kind: str  # "full", "mig" or "vgpu"
    memory_gib: float | None
    compute_fraction: Fraction
    price_per_hour: float | None
    notes: list[str] = field(default_factory=list)
