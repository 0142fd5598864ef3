"""`gpuws slices NAME` for a cloud host: its instance-type family from the catalog (issue 31).

Every fraction and the whole card of the same card, the price per hour in the host's region and
the change against now; the current type is marked. Called by `gpuws slices` (`resize.py`) before
it connects: a cloud host's family is known from its profile, even while the instance is stopped.
"""

from __future__ import annotations

from gpuws.app.cloud_slices import CloudFamily, CloudOption
from gpuws.cli.output import print_json, sim_banner
from gpuws.core.models import HostProfile
from gpuws.core.money import money
from gpuws.core.resize.instance_types import READ_ON
from gpuws.core.resize.journal import JournalEntry, ResizeJournal, interrupted_resize_json


def cloud_slices_json(profile: HostProfile, family: CloudFamily, interrupted: JournalEntry | None = None
                      ) -> dict[str, object]:
    """The document `gpuws slices NAME --json` prints for a cloud host."""
    return {"host": profile.name, "simulated": profile.simulated,
            "cloud": {**family.to_dict(), "catalog_read": READ_ON.isoformat()},
            "interrupted_resize": interrupted_resize_json(interrupted)}


def print_cloud_slices(profile: HostProfile, family: CloudFamily, as_json: bool) -> None:
    """Print the family as JSON or as a table (current type marked with *)."""
    interrupted = ResizeJournal().interrupted(profile.name)
    if as_json:
        print_json(cloud_slices_json(profile, family, interrupted))
        return
    if interrupted is not None:
        print(f"warning: {interrupted.summary()}; run `gpuws resize {profile.name} --recover`")
    cur = family.currency
    now = "?" if family.now_price_per_hour is None else money(family.now_price_per_hour, cur)
    where = family.region or "no region set"
    print(f"{sim_banner(profile.simulated)}{profile.name}: {family.provider} {family.current_type} "
          f"({where}; now {now}/h)")
    for option in family.options:
        print("  " + _row(option, cur))
    if not family.catalog_prices_used:
        print(f"  (catalog prices are in USD and this host is priced in {cur}: set them with "
              f"`gpuws hosts edit {profile.name} --slice-price TYPE=PRICE`)")
    elif any(o.price_per_hour is None for o in family.options):
        print(f"  (? : no published price read for {where}; set one with "
              f"`gpuws hosts edit {profile.name} --slice-price TYPE=PRICE`)")
    print(f"  resize with `gpuws resize {profile.name} type:TYPE`; catalog read {READ_ON.isoformat()}")


def _row(option: CloudOption, currency: str) -> str:
    t = option.itype
    mark = "*" if option.current else " "
    price = "?" if option.price_per_hour is None else money(option.price_per_hour, currency)
    if option.current:
        change = "now"
    elif option.change_per_hour is None:
        change = "?"
    else:
        change = ("+" if option.change_per_hour >= 0 else "") + money(option.change_per_hour, currency)
    source = " (your price)" if option.price_source == "override" else ""
    return (f"{mark} {t.name:<26} {t.fraction_text:>4} {t.card:<4} {t.framebuffer_mib:>6} MiB "
            f"{t.vcpus:>3} vCPU {t.memory_gib:>5g} GiB  {price + '/h':>10} {change:>9}{source}")
