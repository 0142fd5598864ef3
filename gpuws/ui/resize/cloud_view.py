"""How the Resize tab shows a cloud instance type next to the current one (comparison card)."""

from __future__ import annotations

from gpuws.app.cloud_slices import CloudFamily, CloudOption, cloud_family
from gpuws.ui.resize.options import LayoutFigures

__all__ = ["cloud_family", "cloud_figures", "cloud_hint", "cloud_price_source"]


def cloud_figures(option: CloudOption, price: float | None) -> LayoutFigures:
    """An instance type as the comparison card shows a layout: its framebuffer and price (its
    compute share is a vGPU time slice, not MIG slices: left unknown)."""
    t = option.itype
    return LayoutFigures(round(t.framebuffer_mib / 1024, 1), None, 0 if t.whole_card else 1, price)


def cloud_hint(option: CloudOption) -> str:
    """'1/2 of an L4 (NVIDIA L4-12Q) · 16 vCPUs'; 'the whole L4 · 4 vCPUs'."""
    t = option.itype
    share = f"the whole {t.card}" if t.whole_card else f"{t.fraction_text} of an {t.card}"
    vgpu = f" ({t.vgpu_profile})" if t.vgpu_profile else ""
    return f"{share}{vgpu} \u00b7 {t.vcpus} vCPUs"


def cloud_price_source(family: CloudFamily, target: CloudOption) -> str:
    """Which price source the comparison card names: the weakest of now's and the target's."""
    sources = {family.now_price_source, target.price_source}
    if "none" in sources:
        return "none"
    if "catalog" in sources:
        return "catalog"
    return "override" if "override" in sources else "profile"
