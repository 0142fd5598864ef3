"""The remote layer: everything that talks SSH (asyncssh), on its own asyncio loop thread.

Importing asyncssh looks for two optional C libraries (liboqs for post-quantum key exchange,
nettle for UMAC) with `ctypes.util.find_library`, which on Linux falls back to linking a test
program with `gcc` for each name it does not find in the ldconfig cache: five names, up to two
`gcc` + `collect2` + `ld` runs, ~0.1 s of CPU (more under load) in child processes on every
`gpuws cp` or `gpuws tunnel` start, for libraries almost never installed. `_lean_find_library`
keeps the two lookups that find a library the dynamic loader can load (the ldconfig cache, then
`ld` on the loader's search path and LD_LIBRARY_PATH) and drops the `gcc` one, which searches the
same system folders plus gcc's own.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def _lean_find_library() -> None:
    """Put `find_library` without the gcc fallback in place on Linux (see the module's doc)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes.util

    ldconfig: Callable[[str], str | None] | None = getattr(ctypes.util, "_findSoname_ldconfig", None)
    ld: Callable[[str], str | None] | None = getattr(ctypes.util, "_findLib_ld", None)
    soname: Callable[[str | None], str | None] | None = getattr(ctypes.util, "_get_soname", None)
    if ldconfig is None or ld is None or soname is None or getattr(ctypes.util.find_library, "_gpuws", False):
        return  # a Python whose ctypes differs: its own find_library, unchanged

    def find_library(name: str) -> str | None:
        """The soname of library `name` from the ldconfig cache, else from `ld`; None if neither."""
        return ldconfig(name) or soname(ld(name))

    find_library._gpuws = True  # type: ignore[attr-defined]
    ctypes.util.find_library = find_library


_lean_find_library()
