"""httpx, imported without its command-line client.

`import httpx` imports httpx's own CLI (`httpx._main`: rich, click, pygments) whenever those are
installed, as they are beside gpuws' test tools: ~8 MiB of memory and ~90 ms of start-up that
gpuws never uses. A None entry in `sys.modules` makes that one import fail, and httpx then
defines its documented fallback `main` instead.
"""

from __future__ import annotations

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # noqa: E402

__all__ = ["httpx"]
