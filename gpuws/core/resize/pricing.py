"""Hourly prices per slice: derived from the full-card price by compute share, editable per host.

The full-card price of one GPU is, in order: the host's `slice_prices["full"]`, the host's
`price_per_hour` split evenly over its GPUs, or the catalog's illustrative reference price
(only for hosts without any price, such as the demo host; `source` says which). A MIG layout
costs the sum of its instances (each `slice_prices[profile]`, or full price x compute share).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from gpuws.core.errors import ValidationError
from gpuws.core.models import HostProfile
from gpuws.core.resize.catalog import FULL, GPU_MODELS, VGPU_FRACTIONS, GpuModel, MigProfile
from gpuws.core.resize.layout import Layout


@dataclass(frozen=True)
class PriceBook:
    """Prices for the slices of one GPU."""

    full_card: float | None
    overrides: Mapping[str, float] = field(default_factory=dict)
    source: str = "none"  # "override", "profile", "reference" or "none"

    def profile_price(self, profile: MigProfile) -> float | None:
        if profile.name in self.overrides:
            return self.overrides[profile.name]
        return self.fraction_price(profile.compute_fraction)

    def fraction_price(self, fraction: Fraction, name: str | None = None) -> float | None:
        if name is not None and name in self.overrides:
            return self.overrides[name]
        return None if self.full_card is None else round(self.full_card * float(fraction), 4)

    def layout_price(self, layout: Layout, model: GpuModel | None) -> float | None:
        """What the GPU costs per hour in this layout (None when no price is known)."""
        if layout.is_full:
            return self.full_card
        if model is None:
            return None
        overridden = 0.0
        derived = Fraction(0)  # summed exactly, rounded once: 7 x 1/7 of $2.00 is $2.00
        for name in layout.instances:
            profile = model.profile(name)
            if profile is None:
                return None
            if profile.name in self.overrides:
                overridden += self.overrides[profile.name]
            else:
                derived += profile.compute_fraction
        if derived and self.full_card is None:
            return None
        return round(overridden + (self.full_card or 0.0) * float(derived), 4)


def price_book(profile: HostProfile | None, model: GpuModel | None, gpu_count: int = 1) -> PriceBook:
    """The price book for one GPU of a host with `gpu_count` GPUs."""
    overrides = dict(profile.slice_prices) if profile else {}
    if FULL in overrides:
        return PriceBook(overrides[FULL], overrides, "override")
    if profile is not None and profile.price_per_hour is not None:
        return PriceBook(round(profile.price_per_hour / max(gpu_count, 1), 4), overrides, "profile")
    if model is not None and model.reference_price_per_hour:
        return PriceBook(model.reference_price_per_hour, overrides, "reference")
    return PriceBook(None, overrides, "none")


def profile_after_resize(
    profile: HostProfile, *, gpu: int, gpu_count: int, layout: str,
    price_before: float | None, price_after: float | None, full_card_price: float | None,
) -> HostProfile:
    """The profile as it should be saved after GPU `gpu` was verified at `layout`.

    `slice_profile` names the layout (per GPU, as "gpuN=LAYOUT;..." on multi-GPU hosts), and the
    host's hourly price moves by the layout's price difference, so the cost meter follows a resize.
    The full card's price is pinned in `slice_prices["full"]` first: it was derived from the host
    price, which the resize changes.
    """
    if gpu_count <= 1:
        slice_profile = layout
    else:
        parts = dict(
            part.strip().split("=", 1) for part in (profile.slice_profile or "").split(";") if "=" in part
        )
        parts[f"gpu{gpu}"] = layout
        slice_profile = ";".join(f"{k}={v}" for k, v in sorted(parts.items()))
    price = profile.price_per_hour
    slice_prices = dict(profile.slice_prices)
    if price is not None and price_before is not None and price_after is not None:
        price = round(max(0.0, price - price_before + price_after), 4)
        if full_card_price is not None:
            slice_prices.setdefault(FULL, full_card_price)
    return dataclasses.replace(profile, slice_profile=slice_profile, price_per_hour=price, slice_prices=slice_prices)


PROVIDER_TYPE_PREFIX = "type:"


def check_slice_price_key(key: str, field: str = "slice-price") -> str:
    """A `--slice-price` name a price book can use: `full`, a MIG profile of the catalog (e.g.
    1g.10gb), a vGPU fraction (1/8, 1/4, 1/2), an instance type of the cloud catalog (g6f.4xlarge)
    or `type:INSTANCE_TYPE`; a price under any other
    name would never be read, so it is refused rather than kept silently."""
    if key.startswith(PROVIDER_TYPE_PREFIX) and len(key) > len(PROVIDER_TYPE_PREFIX):
        return key
    names = {FULL, *(f.name for f in VGPU_FRACTIONS), *(p.name for m in GPU_MODELS for p in m.profiles)}
    if key not in names and not _known_instance_type(key):
        from gpuws.core.terminal import printable

        raise ValidationError(field, f"no slice profile {printable(key, 40)} on this host (a MIG profile such "
                                     f"as 1g.10gb, full, a vGPU share such as 1/4, or type:INSTANCE_TYPE)")
    return key


def _known_instance_type(name: str) -> bool:
    """An instance type the cloud catalog lists (`gpuws slices` prices it by its bare name too)."""
    from gpuws.core.resize.instance_types import instance_type

    return instance_type(None, name) is not None
