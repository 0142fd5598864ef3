"""The built-in simulated host for `gpuws --demo` and the empty state's "Open demo" button.

Wired in one place, `gpuws.app.demo`; this module only names it for the window.
"""

from __future__ import annotations

from gpuws.app.demo import DEMO_GPUS, DEMO_NAME, RunningDemo, start_demo

__all__ = ["DEMO_GPUS", "DEMO_NAME", "RunningDemo", "start_demo"]
