"""Run every benchmark in turn and print its figures: `python -m benchmarks [NAME ...]`.

Each benchmark measures its alternatives side by side in one run and prints medians and ratios;
absolute times depend on the machine and its load, ratios much less.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = (
    "bench_cli", "bench_telemetry", "bench_ssh_client", "bench_latency", "bench_dashboard", "bench_connect",
    "bench_gui_responsiveness", "bench_fleet", "bench_advice", "bench_checksum", "bench_transfer",
    "bench_sshconfig",
    "bench_cloud_resize",
    "bench_vnc_viewer",
)


def main(argv: list[str]) -> int:
    """Each benchmark in a fresh interpreter: process-wide figures (RSS, imported modules, Qt's
    state) must not carry what an earlier benchmark loaded (the fleet's RSS read 362 MiB after the
    others had run in the same process, 115 MiB on its own)."""
    names = argv or list(BENCHMARKS)
    env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen")}
    root = Path(__file__).resolve().parents[1]
    failed = []
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        start = time.monotonic()
        code = subprocess.call([sys.executable, "-m", f"benchmarks.{name}"], cwd=root, env=env)
        if code != 0:
            failed.append(name)
        print(f"({name} took {time.monotonic() - start:.0f} s{'' if code == 0 else f', exit status {code}'})",
              flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
