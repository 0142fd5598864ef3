"""What a cloud host can be resized to: its instance type's family from the catalog, priced.

Shared by `gpuws slices NAME` and the window's Resize tab for a host whose profile names an
instance type the catalog knows (`core/resize/instance_types.py`): every fraction and the whole
card of the same card, each with its price per hour in the profile's region and the change
against what the host costs now.

Prices, in order: the host's own slice price for the type (`--slice-price TYPE=PRICE`, in the
host's currency), else the catalog's on-demand price in the host's region, which is in US
dollars and so used only for a host priced in USD (money is never mixed across currencies).
"Now" is the host's own hourly price when it has one, else the price of its current type.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuws.core.jsontypes import JsonObject, JsonValue
from gpuws.core.models import HostProfile
from gpuws.core.money import currency_of
from gpuws.core.resize.instance_types import InstanceType, family_of, instance_type, price_for

CATALOG_CURRENCY = "USD"
TYPE_PREFIX = "type:"


def current_instance_type(profile: HostProfile) -> str | None:
    """The instance type the host runs as now, from its profile: the slice a provider resize
    recorded (`slice_profile`, "g6f.large" or "type:g6f.large"); None when it names none."""
    text = (profile.slice_profile or "").strip().removeprefix(TYPE_PREFIX)
    return text or None


@dataclass(frozen=True)
class CloudOption:
    """One instance type the host can be resized to (or the one it is)."""

    itype: InstanceType
    price_per_hour: float | None
    price_source: str  # "override" (the host's slice price), "catalog", or "none"
    spot_price_per_hour: float | None  # the catalog's, in USD; None where unlisted or not USD
    change_per_hour: float | None  # against now; None when either price is unknown
    current: bool

    @property
    def target(self) -> str:
        """What `gpuws resize NAME TARGET` takes for this type."""
        return f"{TYPE_PREFIX}{self.itype.name}"

    def to_dict(self) -> JsonObject:
        """The JSON row of `gpuws slices NAME --json` (field names are a contract)."""
        t = self.itype
        return {
            "type": t.name,
            "target": self.target,
            "family": t.family,
            "card": t.card,
            "fraction": t.fraction_text,
            "fraction_of_card": round(float(t.fraction), 4),
            "framebuffer_mib": t.framebuffer_mib,
            "vgpu_profile": t.vgpu_profile,
            "vcpus": t.vcpus,
            "memory_gib": t.memory_gib,
            "price_per_hour": self.price_per_hour,
            "price_source": self.price_source,
            "spot_price_per_hour": self.spot_price_per_hour,
            "price_change_per_hour": self.change_per_hour,
            "current": self.current,
        }


@dataclass(frozen=True)
class CloudFamily:
    """The host's instance-type family, priced, smallest share first."""

    provider: str
    region: str | None
    currency: str
    current_type: str
    now_price_per_hour: float | None
    now_price_source: str  # "profile" (the host's hourly price), "override", "catalog" or "none"
    options: tuple[CloudOption, ...]
    catalog_prices_used: bool  # False when the host's currency is not the catalog's (USD)

    @property
    def current(self) -> CloudOption | None:
        """The option the host runs as now."""
        return next((o for o in self.options if o.current), None)

    def option(self, name: str) -> CloudOption | None:
        """The option for instance type `name` ("g6f.large" or "type:g6f.large"), if listed."""
        name = name.strip().removeprefix(TYPE_PREFIX)
        return next((o for o in self.options if o.itype.name == name), None)

    def to_dict(self) -> JsonObject:
        """The "cloud" object of `gpuws slices NAME --json`."""
        current = self.current
        types: list[JsonValue] = [o.to_dict() for o in self.options]
        return {
            "provider": self.provider,
            "region": self.region,
            "card": current.itype.card if current else None,
            "currency": self.currency,
            "current_type": self.current_type,
            "price_per_hour_now": self.now_price_per_hour,
            "price_now_source": self.now_price_source,
            "catalog_prices_used": self.catalog_prices_used,
            "types": types,
        }


def type_price(profile: HostProfile, name: str) -> tuple[float | None, str]:
    """The hourly price of instance type `name` for this host and its source: the host's own
    slice price ("override"), else the catalog's in its region when the host is priced in USD
    ("catalog"), else (None, "none"). One rule for the listing and for the price saved after a
    verified type change."""
    itype = instance_type(profile.provider.kind, name)
    if itype is None:
        bare = name.strip().removeprefix(TYPE_PREFIX)
        for key in (bare, f"{TYPE_PREFIX}{bare}"):
            if key in profile.slice_prices:
                return profile.slice_prices[key], "override"
        return None, "none"
    price, source = price_for(itype, profile.provider.region, profile.slice_prices)
    if source == "catalog" and currency_of(profile.currency) != CATALOG_CURRENCY:
        return None, "none"
    return price, source


def cloud_family(profile: HostProfile) -> CloudFamily | None:
    """The priced family of the host's current instance type; None when the host names no type
    the catalog knows (not a cloud host, or a type outside the catalog's families)."""
    name = current_instance_type(profile)
    current = instance_type(profile.provider.kind, name) if name else None
    if current is None:
        return None
    currency = currency_of(profile.currency)
    use_catalog = currency == CATALOG_CURRENCY
    region = profile.provider.region

    def priced(itype: InstanceType) -> tuple[float | None, str]:
        """The type's price for this host and its source."""
        return type_price(profile, itype.name)

    now, now_source = priced(current)
    if profile.price_per_hour is not None:
        now, now_source = profile.price_per_hour, "profile"
    options = []
    for itype in family_of(current.provider, current.name):
        price, source = priced(itype)
        is_current = itype.name == current.name
        change = 0.0 if is_current else None if price is None or now is None else round(price - now, 4)
        spot = itype.spot_price(region) if use_catalog else None
        options.append(CloudOption(itype, price, source, spot, change, is_current))
    return CloudFamily(current.provider, region, currency, current.name, now, now_source, tuple(options), use_catalog)
