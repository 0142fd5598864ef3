"""MIG GPU-instance profiles as the driver lists them (`nvidia-smi mig -lgip` / `-lgipp`).

One row per profile: ID, name, placement size and allowed starts (memory slices), memory, SMs and
engines. Real captures (tests/fixtures/real/mig/: H100 SXM5 and H100 NVL) and NVIDIA's MIG user
guide give these; where neither has a model's table (H200, B200) the memory is the nominal size in
the profile name, and `MigGpu.memory_source` says so.
"""

from __future__ import annotations

from dataclasses import dataclass

MEDIA_EXTENSION_SUFFIX = "+me"


@dataclass(frozen=True)
class MigProfileSpec:
    """One GPU-instance profile, e.g. `1g.10gb` (ID 19) on an H100 80GB.

    Placements are start slots over the GPU's memory slices; `size` slices are taken from there.
    Engine counts are None where no table publishes them.
    """

    profile_id: int
    name: str  # "1g.10gb" (the driver shows "MIG 1g.10gb")
    size: int  # memory slices one instance occupies (placement size)
    placements: tuple[int, ...]
    memory_mib: int
    sm_count: int | None
    copy_engines: int | None
    decoders: int | None
    encoders: int | None
    jpeg: int | None
    ofa: int | None
    compute_slices: int  # the "Ng" part; also the size of the default compute instance
    bar1_mib: int = 32767

    @property
    def media_extensions(self) -> bool:
        """A `+me` profile: the one small instance that gets the media engines (OFA, JPEG...)."""
        return self.name.endswith(MEDIA_EXTENSION_SUFFIX)

    @property
    def memory_gib_text(self) -> str:
        """Memory as `mig -lgip` prints it: printf's %.2f of GiB (9984 MiB -> "9.75").

        The sizes are exact binary fractions, so halves round to even as printf does: 20096 MiB
        (19.625) prints "19.62" and 47488 MiB (46.375) "46.38", as the real captures show.
        """
        return f"{self.memory_mib / 1024:.2f}"

    @property
    def memory_gib(self) -> float:
        """The `mig -lgip` GiB figure as a number."""
        return float(self.memory_gib_text)

    @property
    def max_count(self) -> int:
        """How many such instances fit on an empty GPU."""
        if self.media_extensions:
            return 1  # the driver allows one media-extension instance per GPU
        count, taken_until = 0, -1
        for start in self.placements:
            if start > taken_until:
                count += 1
                taken_until = start + self.size - 1
        return count

    @property
    def compute_profile_id(self) -> int:
        """The compute-instance profile id covering the whole GPU instance (as `-C` uses)."""
        return {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}[self.compute_slices]


# (profile id, compute slices, placement starts, size) of the seven 8-slot profiles, in `-lgip`
# order: identical on A100, H100, H200 and B200 (MIG user guide; `-lgipp` captures).
_EIGHT_SLOT_SHAPE: tuple[tuple[int, int, tuple[int, ...], int], ...] = (
    (19, 1, (0, 1, 2, 3, 4, 5, 6), 1),
    (20, 1, (0, 1, 2, 3, 4, 5, 6), 1),
    (15, 1, (0, 2, 4, 6), 2),
    (14, 2, (0, 2, 4), 2),
    (9, 3, (0, 4), 4),
    (5, 4, (0,), 4),
    (0, 7, (0,), 8),
)

Engines = tuple[int, int, int, int, int]  # copy engines, decoders, encoders, jpeg, ofa


def eight_slot_profiles(
    names: tuple[str, str, str, str, str, str],
    memory_mib: tuple[int, int, int, int, int, int],
    sm_counts: tuple[int, int, int, int, int, int] | None,
    engines: tuple[Engines, ...] | None,
) -> tuple[MigProfileSpec, ...]:
    """The seven profiles of an 8-slot GPU: 1g, 1g+me, 1g x2 memory, 2g, 3g, 4g, 7g.

    `names`, `memory_mib` and `sm_counts` are given without the +me row, which is the 1g row with
    the media engines; `engines` includes it (None: unpublished).
    """
    rows_names = (names[0], names[0] + MEDIA_EXTENSION_SUFFIX, *names[1:])
    rows_mem = (memory_mib[0], *memory_mib)
    rows_sms: tuple[int | None, ...] = (sm_counts[0], *sm_counts) if sm_counts else (None,) * 7
    if engines is not None and len(engines) != len(_EIGHT_SLOT_SHAPE):
        raise ValueError("one engine row per profile, +me included")
    profiles = []
    for i, (pid, compute, starts, size) in enumerate(_EIGHT_SLOT_SHAPE):
        ce, dec, enc, jpeg, ofa = engines[i] if engines else (None, None, None, None, None)
        profiles.append(MigProfileSpec(pid, rows_names[i], size, starts, rows_mem[i], rows_sms[i],
                                       ce, dec, enc, jpeg, ofa, compute))
    return tuple(profiles)


# Engine rows (CE, DEC, ENC, JPEG, OFA) per family, from `-lgip` captures (H100 SXM5, H100 NVL)
# and the MIG user guide's A100 tables.
HOPPER_ENGINES: tuple[Engines, ...] = (
    (1, 1, 0, 1, 0), (1, 1, 0, 1, 1), (1, 1, 0, 1, 0), (2, 2, 0, 2, 0), (3, 3, 0, 3, 0), (4, 4, 0, 4, 0),
    (8, 7, 0, 7, 1),
)
AMPERE_ENGINES: tuple[Engines, ...] = (
    (1, 0, 0, 0, 0), (1, 1, 0, 1, 1), (1, 1, 0, 0, 0), (2, 1, 0, 0, 0), (3, 2, 0, 0, 0), (4, 2, 0, 0, 0),
    (7, 5, 0, 1, 1),
)
