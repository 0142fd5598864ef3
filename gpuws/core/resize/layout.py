"""MIG layouts: what a GPU is cut into, how users write it, and whether it fits.

TARGET grammar (documented for `gpuws resize`):

    full                      MIG disabled, the whole card
    mig                       MIG enabled with no instances (rarely wanted; allowed)
    ITEM[,ITEM...]            GPU instances, each ITEM is `[Nx]PROFILE`, e.g. `7x1g.10gb`,
                              `3g.40gb,3g.40gb` (= `2x3g.40gb`), `4g.40gb,2g.20gb,1g.10gb`

Each GPU instance gets its default compute instance (`-C`), so a layout is the multiset of
GPU-instance profiles. A layout is refused, with the reason, when it exceeds a profile's
maximum count, the 7 compute slices, or has no valid placement in the 8 memory slots.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from gpuws.core.errors import GpuwsError
from gpuws.core.resize.catalog import COMPUTE_SLICES, FULL, MEMORY_SLOTS, GpuModel, MigProfile

MIG_EMPTY = "mig"
_MAX_TARGET_LEN = 200
_ITEM_RE = re.compile(r"^(?:(\d{1,2})\s*[xX*]\s*)?([0-9a-z.+]+)$", re.ASCII)  # user input: ASCII digits only


class LayoutError(GpuwsError):
    """A target layout was refused (unparseable, unknown profile, or it does not fit)."""


@dataclass(frozen=True)
class Layout:
    """MIG mode plus the GPU-instance profiles on one GPU (sorted, largest first)."""

    mig_enabled: bool
    instances: tuple[str, ...] = ()

    @property
    def is_full(self) -> bool:
        return not self.mig_enabled

    def describe(self) -> str:
        """Canonical text, the same grammar users type: `full`, `mig`, `7x1g.10gb`, ..."""
        if not self.mig_enabled:
            return FULL
        if not self.instances:
            return MIG_EMPTY
        counts = Counter(self.instances)
        parts = []
        for name in dict.fromkeys(self.instances):  # keeps the sorted order
            n = counts[name]
            parts.append(f"{n}x{name}" if n > 1 else name)
        return ",".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"layout": self.describe(), "mig_enabled": self.mig_enabled, "instances": list(self.instances)}


FULL_LAYOUT = Layout(mig_enabled=False)


def _sort_key(model: GpuModel | None, name: str) -> tuple[int, int, str]:
    profile = model.profile(name) if model else None
    if profile is None:
        return (0, 0, name)
    return (-profile.compute_slices, -profile.placement_size, name)


def make_layout(model: GpuModel | None, mig_enabled: bool, names: list[str]) -> Layout:
    """A layout with its instances in canonical order (largest first)."""
    return Layout(mig_enabled, tuple(sorted(names, key=lambda n: _sort_key(model, n))))


def parse_target(text: str, model: GpuModel) -> Layout:
    """Parse a TARGET for a GPU of this model and check that it fits; LayoutError says why not."""
    raw = text.strip()
    if not raw or len(raw) > _MAX_TARGET_LEN:
        raise LayoutError("target: give a layout such as 'full', '7x1g.10gb' or '3g.40gb,3g.40gb'")
    lowered = raw.lower()
    if lowered == FULL:
        return FULL_LAYOUT
    if lowered == MIG_EMPTY:
        return Layout(mig_enabled=True)
    names: list[str] = []
    for item in lowered.split(","):
        match = _ITEM_RE.match(item.strip().removeprefix("mig "))
        if not match:
            raise LayoutError(f"target: cannot read {item.strip()[:40]!r}; write items like 7x1g.10gb")
        count = int(match.group(1) or 1)
        if not 1 <= count <= COMPUTE_SLICES:
            raise LayoutError(f"target: count {count} in {item.strip()!r} must be 1 to {COMPUTE_SLICES}")
        if model.profile(match.group(2)) is None:
            raise LayoutError(
                f"target: {match.group(2)!r} is not a MIG profile of the {model.display_name} "
                f"(valid: {', '.join(model.profile_names)})"
            )
        names.extend([match.group(2)] * count)
    layout = make_layout(model, True, names)
    fit_placements(layout, model)
    return layout


def fit_placements(layout: Layout, model: GpuModel) -> list[tuple[MigProfile, int]]:
    """Place every instance of `layout` in the 8 memory slots; LayoutError says why it cannot.

    Returns (profile, start slot) per instance. The driver chooses its own placements; this
    proves one exists, so a refused layout is refused before anything on the host changes.
    """
    profiles: list[MigProfile] = []
    for name in layout.instances:
        profile = model.profile(name)
        if profile is None:
            raise LayoutError(f"{name} is not a MIG profile of the {model.display_name}")
        profiles.append(profile)
    for profile, count in Counter(profiles).items():
        if count > profile.max_count:
            raise LayoutError(
                f"{count}x{profile.name} does not fit: the {model.display_name} allows at most "
                f"{profile.max_count} {profile.name} instance(s)"
            )
    compute = sum(p.compute_slices for p in profiles)
    if compute > COMPUTE_SLICES:
        raise LayoutError(
            f"{layout.describe()} needs {compute} compute slices; the {model.display_name} has {COMPUTE_SLICES}"
        )
    order = sorted(profiles, key=lambda p: (-p.placement_size, -p.compute_slices, p.name))
    placed = _place(order, [False] * MEMORY_SLOTS)
    if placed is None:
        raise LayoutError(
            f"{layout.describe()} has no valid placement in the {MEMORY_SLOTS} memory slices of the "
            f"{model.display_name} (see `nvidia-smi mig -lgipp`)"
        )
    return placed


def _place(todo: list[MigProfile], used: list[bool]) -> list[tuple[MigProfile, int]] | None:
    """Backtracking over each profile's allowed start slots (at most 7 instances: tiny)."""
    if not todo:
        return []
    first, rest = todo[0], todo[1:]
    for start in first.placement_starts:
        slots = range(start, start + first.placement_size)
        if slots.stop > len(used) or any(used[s] for s in slots):
            continue
        for s in slots:
            used[s] = True
        tail = _place(rest, used)
        for s in slots:
            used[s] = False
        if tail is not None:
            return [(first, start), *tail]
    return None


def creation_order(layout: Layout, model: GpuModel) -> list[MigProfile]:
    """An order to create the instances of `layout` in, one by one, that the driver can follow.

    `nvidia-smi mig -cgi P` puts each new instance at the lowest free placement of its profile, so
    the order matters: on an H100, 3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb fills slots 0-3, 4-5, 6 and
    then finds no 1g start left (slot 7 is not one), while 1g, 1g, 2g, 3g fits. Like mig-parted,
    which tries orders until one succeeds, this tries the orders (at most 7! of 7 instances) and
    takes the first that the lowest-free rule places; largest-first when that works.
    """
    profiles = [p for p in (model.profile(n) for n in layout.instances) if p is not None]
    seen: set[tuple[str, ...]] = set()
    for order in itertools.permutations(profiles):
        key = tuple(p.name for p in order)
        if key in seen:
            continue
        seen.add(key)
        if _lowest_free_fits(order):
            return list(order)
    raise LayoutError(
        f"{layout.describe()} cannot be created one instance at a time on the {model.display_name} "
        "(the driver places each at its lowest free slot)"
    )


def _lowest_free_fits(order: tuple[MigProfile, ...]) -> bool:
    used = [False] * MEMORY_SLOTS
    for profile in order:
        start = next((s for s in profile.placement_starts
                      if s + profile.placement_size <= MEMORY_SLOTS
                      and not any(used[s:s + profile.placement_size])), None)
        if start is None:
            return False
        for s in range(start, start + profile.placement_size):
            used[s] = True
    return True


def valid_layouts(model: GpuModel) -> list[Layout]:
    """Every homogeneous layout (1..max of one profile) plus `full`: the `gpuws slices` list."""
    layouts = [FULL_LAYOUT]
    for profile in sorted(model.profiles, key=lambda p: (-p.compute_slices, -p.placement_size)):
        for n in range(profile.max_count, 0, -1):
            layout = make_layout(model, True, [profile.name] * n)
            try:
                fit_placements(layout, model)
            except LayoutError:
                continue
            layouts.append(layout)
    return layouts
