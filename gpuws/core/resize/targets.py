"""What a GPU can be resized to, with memory, compute share and price per hour.

Shared by `gpuws slices` and the Resize tab: memory is the sum of the instances' memory, compute
share the sum of their SM slices out of 7, price from the host's price book (`pricing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from gpuws.core.gpus.models import is_vgpu_name
from gpuws.core.resize.catalog import COMPUTE_SLICES, VGPU_FRACTIONS, GpuModel
from gpuws.core.resize.layout import Layout, valid_layouts
from gpuws.core.resize.pricing import PriceBook
from gpuws.core.resize.state import GpuMigState


@dataclass(frozen=True)
class LayoutFigures:
    """Memory, compute and price of one layout on one GPU."""

    memory_gib: float | None
    compute_slices: int | None  # out of COMPUTE_SLICES; None when unknown (vGPU, non-MIG)
    instances: int  # GPU instances (0 for the full card)
    price_per_hour: float | None

    @property
    def compute_share(self) -> Fraction | None:
        return None if self.compute_slices is None else Fraction(self.compute_slices, COMPUTE_SLICES)


@dataclass(frozen=True)
class TargetOption:
    """One row of the picker: a target the GPU can be resized to (or a listed-only row)."""

    target: str  # what `gpuws resize` takes: "full", "7x1g.10gb", "1/4"
    kind: str  # "full", "mig" or "vgpu"
    figures: LayoutFigures
    current: bool
    selectable: bool = True
    note: str = ""


def layout_figures(layout: Layout, model: GpuModel | None, prices: PriceBook) -> LayoutFigures:
    """The figures of `layout` on a GPU of `model` (memory/compute None when the model is unknown)."""
    price = prices.layout_price(layout, model)
    if layout.is_full:
        memory = model.memory_gib if model else None
        return LayoutFigures(memory, COMPUTE_SLICES, 0, price)
    if model is None:
        return LayoutFigures(None, None, len(layout.instances), price)
    profiles = [p for p in (model.profile(n) for n in layout.instances) if p is not None]
    return LayoutFigures(
        round(sum(p.memory_gib for p in profiles), 2),
        sum(p.compute_slices for p in profiles),
        len(layout.instances),
        price,
    )


def target_options(state: GpuMigState, prices: PriceBook) -> list[TargetOption]:
    """Every target for this GPU: MIG layouts of its model, vGPU fractions, or the full card only."""
    model = state.model
    if model is not None and state.mig_capable:
        return [
            TargetOption(layout.describe(), "full" if layout.is_full else "mig",
                         layout_figures(layout, model, prices), layout == state.layout)
            for layout in valid_layouts(model)
        ]
    if is_vgpu(state.name):
        return [
            TargetOption(
                fraction.name, "vgpu",
                LayoutFigures(None, None, 0, prices.fraction_price(fraction.fraction, fraction.name)),
                current=False, selectable=False,
                note="time-sliced vGPU: changes with the instance type (provider)",
            )
            for fraction in VGPU_FRACTIONS
        ]
    return [TargetOption("full", "full", LayoutFigures(None, COMPUTE_SLICES, 0, prices.full_card), True,
                         selectable=False, note="not MIG-capable: the whole card only")]


def is_vgpu(name: str) -> bool:
    """A vGPU guest reports a vGPU product name: "GRID A100-10C", or as cloud guests (AWS G6f,
    Azure NVadsA10 v5) show it, "NVIDIA L4-3Q" (the registry's one rule, `is_vgpu_name`)."""
    return "vGPU" in name or is_vgpu_name(name)
