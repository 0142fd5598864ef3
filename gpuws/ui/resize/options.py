"""How the Resize tab words its figures; the figures themselves are `gpuws.core.resize.targets`."""

from __future__ import annotations

from gpuws.core.resize.catalog import COMPUTE_SLICES
from gpuws.core.resize.targets import LayoutFigures, TargetOption, layout_figures, target_options

__all__ = ["LayoutFigures", "TargetOption", "layout_figures", "target_options"]

MINUS = "\u2212"  # a real minus sign (U+2212): a price drop reads at a glance


def money(value: float | None, *, per_hour: bool = True) -> str:
    """'$2.00/h' ('$2.00' without `per_hour`), or '—' when no price is known."""
    return "—" if value is None else f"${value:,.2f}" + ("/h" if per_hour else "")


def price_difference(before: float | None, after: float | None, *, per_hour: bool = True) -> str:
    """'-$0.85/h' (with U+2212), '+$1.14/h', '±$0.00/h', or '' when either price is unknown."""
    if before is None or after is None:
        return ""
    unit = "/h" if per_hour else ""
    delta = round(after - before, 2)
    if delta == 0:
        return f"\u00b1$0.00{unit}"
    sign = "+" if delta > 0 else MINUS
    return f"{sign}${abs(delta):,.2f}{unit}"


def memory_figure(gib: float | None) -> str:
    if gib is None:
        return "—"
    return f"{gib:.0f} GiB" if gib == int(gib) else f"{gib:.1f} GiB"


def compute_figure(figures: LayoutFigures, *, short: bool = False) -> str:
    """'43% (3/7 slices)', or '43%' when `short`; '—' when unknown."""
    share = figures.compute_share
    if share is None:
        return "—"
    if short:
        return f"{float(share):.0%}"
    return f"{float(share):.0%} ({figures.compute_slices}/{COMPUTE_SLICES} slices)"
