"""A cloud host's instance-type family, priced, for `gpuws slices` and the window's Resize tab.

Read from the saved profile and the catalog alone (`core/resize/cloud.py`): no connection, so it
answers for a stopped instance too. The provider resize itself is `app/resize.py`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuws.core.models import HostProfile
from gpuws.core.resize.cloud import CloudFamily, CloudOption, cloud_family, current_instance_type

if TYPE_CHECKING:
    from gpuws.core.profiles import ProfileStore

__all__ = ["CloudFamily", "CloudOption", "cloud_family", "cloud_family_of", "current_instance_type"]


def cloud_family_of(name: str, profiles: ProfileStore | None = None) -> tuple[HostProfile, CloudFamily] | None:
    """The saved profile NAME and its priced family, or None when NAME is not a saved profile
    (the demo) or names no instance type the catalog knows. A broken profile raises its error."""
    from gpuws.core.profiles import ProfileNotFound, ProfileStore

    store = profiles if profiles is not None else ProfileStore()
    try:
        profile = store.get(name)
    except ProfileNotFound:
        return None
    family = cloud_family(profile)
    return None if family is None else (profile, family)
