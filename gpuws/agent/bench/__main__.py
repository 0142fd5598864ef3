"""`python3 -m gpuws.agent.bench` (or `python3 gpuws_bench.pyz`, as gpuws runs it on a host)."""

from __future__ import annotations

import sys

from .runner import main

if __name__ == "__main__":
    sys.exit(main())
