"""Run every benchmark in turn and print its figures: `python -m benchmarks [NAME ...]`.

Each benchmark measures its alternatives side by side in one run and prints medians and ratios;
absolute times depend on the machine and its load, ratios much less.
"""

from __future__ import annotations

import importlib
import os
import sys
import time

BENCHMARKS = (
    "bench_cli", "bench_telemetry", "bench_ssh_client", "bench_latency", "bench_dashboard", "bench_connect",
    "bench_gui_responsiveness", "bench_fleet", "bench_advice",
)


def main(argv: list[str]) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    names = argv or list(BENCHMARKS)
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        print(f"\n=== {name} ===", flush=True)
        start = time.monotonic()
        module.main([]) if name == "bench_connect" else module.main()
        print(f"({name} took {time.monotonic() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
