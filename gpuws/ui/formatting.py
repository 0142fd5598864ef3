"""Short human-readable texts for GPUs, memory and prices, shared by the sidebar and the tabs."""

from __future__ import annotations

from collections import Counter

from gpuws.core.inventory import GpuInfo, Inventory
from gpuws.core.models import HostProfile

_VENDOR_PREFIXES = ("NVIDIA ", "Tesla ")
TIMES = "\u00d7"  # the multiplication sign, as in "2x H100" written properly


def short_gpu_name(name: str) -> str:
    """'NVIDIA A100-SXM4-80GB' -> 'A100-SXM4-80GB' (the vendor is the same for every card)."""
    for prefix in _VENDOR_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name.strip() or "GPU"


def gpu_summary(inventory: Inventory | None) -> str:
    """'2x H100 80GB HBM3' (with a multiplication sign) or '1x A100 + 1x L40S'; '' when unknown."""
    if inventory is None:
        return ""
    if not inventory.gpus:
        return "No GPU found"
    counts = Counter(short_gpu_name(g.name) for g in inventory.gpus)
    return " + ".join(f"{n}{TIMES} {name}" for name, n in counts.items())


def memory_text(mib: int | None) -> str:
    if mib is None:
        return "—"
    if mib >= 1024:
        gib = mib / 1024
        return f"{gib:.0f} GiB" if gib >= 10 else f"{gib:.1f} GiB"
    return f"{mib} MiB"


def price_text(price_per_hour: float | None, currency: str | None = None) -> str:
    """'$2.49/h' in the profile's currency (the locale's when it names none); '' without a price."""
    from gpuws.core.money import currency_of, rate

    return "" if price_per_hour is None else rate(price_per_hour, currency_of(currency))


def or_dash(value: object) -> str:
    """Missing values read as an em dash, never as 0 or 'None'."""
    return "—" if value is None or value == "" else str(value)


def pcie_text(gpu: GpuInfo) -> str:
    """'Gen4 x16 (max Gen4 x16)' or '—'."""
    if gpu.pcie_width_current is None and gpu.pcie_gen_current is None:
        return "—"
    cur = f"Gen{or_dash(gpu.pcie_gen_current)} x{or_dash(gpu.pcie_width_current)}"
    if gpu.pcie_gen_max is None and gpu.pcie_width_max is None:
        return cur
    return f"{cur} (max Gen{or_dash(gpu.pcie_gen_max)} x{or_dash(gpu.pcie_width_max)})"


def pcie_warning(gpu: GpuInfo) -> str | None:
    """'Link degraded: x8 of x16' when the link is narrower than the card supports."""
    if not gpu.pcie_degraded:
        return None
    return f"PCIe link degraded: x{gpu.pcie_width_current} of x{gpu.pcie_width_max}"


def power_text(watts: float | None) -> str:
    return "—" if watts is None else f"{watts:.0f} W"


def host_address(profile: HostProfile) -> str:
    """'user@host' with ':port' when not 22 (IPv6 in brackets then), as ssh would take it."""
    user = f"{profile.user}@" if profile.user else ""
    if profile.port == 22:
        return f"{user}{profile.host}"
    host = f"[{profile.host}]" if ":" in profile.host else profile.host
    return f"{user}{host}:{profile.port}"
