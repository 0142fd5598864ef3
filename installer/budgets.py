"""Measures and prints the packaging budgets (run by the installer scripts; stdlib only).

- Installed size: the bytes of the tree a package installs (target: under 250 MB).
- Start-up: the frozen app against gpuws run from the venv, in the same run, alternating so both
  see the same machine load. Two timings, medians of --runs each:
  `--version` (process start: bootloader or interpreter, then the CLI), and
  `--demo --screenshot` (start to first window: the main window connected to the built-in
  simulated host, rendered offscreen, then exit).

    python installer/budgets.py --tree build/deb/gpuws_0.1.0_amd64 --exclude DEBIAN \
        --frozen build/frozen/gpuws/gpuws [--venv-python .venv/bin/python] [--runs 3] [--json out.json]

Reports only; tests/packaging enforces the size budget. Start-up times are never enforced: the
machine's load decides them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

SIZE_BUDGET_BYTES = 250 * 1000 * 1000
STARTUP_TIMEOUT_S = 120.0


def tree_size(root: Path, exclude: Sequence[str] = ()) -> int:
    """Bytes of the regular files under ROOT (symlinks count as nothing, like an installed tree)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d not in exclude]
        for name in filenames:
            path = Path(dirpath) / name
            if not path.is_symlink():
                total += path.stat().st_size
    return total


def _timed_run(argv: Sequence[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, timeout=STARTUP_TIMEOUT_S, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {' / '.join(tail)}")
    return elapsed


def startup_medians(commands: dict[str, list[str]], args: Sequence[str], runs: int) -> dict[str, float]:
    """Median seconds per command label for `COMMAND ARGS`, rounds alternating between commands.

    `{shot}` in ARGS becomes a fresh screenshot path. Each run gets empty config and data
    folders (as a first start does) and renders offscreen.
    """
    times: dict[str, list[float]] = {label: [] for label in commands}
    with tempfile.TemporaryDirectory(prefix="gpuws-budgets-") as tmp:
        for round_no in range(runs):
            for label, command in commands.items():
                run_dir = Path(tmp) / f"{label}-{round_no}"
                env = {
                    **os.environ,
                    "QT_QPA_PLATFORM": "offscreen",
                    "GPUWS_CONFIG_DIR": str(run_dir / "config"),
                    "XDG_CONFIG_HOME": str(run_dir / "xdg-config"),
                    "XDG_DATA_HOME": str(run_dir / "xdg-data"),
                    "XDG_CACHE_HOME": str(run_dir / "xdg-cache"),
                }
                argv = [*command, *(a.replace("{shot}", str(run_dir / "shot.png")) for a in args)]
                times[label].append(_timed_run(argv, env))
    return {label: statistics.median(values) for label, values in times.items()}


def _ratio(frozen: float, venv: float) -> str:
    return f"{frozen / venv:.2f}x the venv" if venv > 0 else "n/a"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="the tree the package installs")
    parser.add_argument("--exclude", action="append", default=[], help="top-level folder of TREE to leave out")
    parser.add_argument("--frozen", type=Path, required=True, help="the frozen gpuws launcher")
    parser.add_argument(
        "--venv-python",
        type=Path,
        default=Path(sys.executable),
        help="python of the venv to compare with (default: this one)",
    )
    parser.add_argument("--package", type=Path, help="the built package file (its size is reported)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    installed = tree_size(args.tree, args.exclude)
    commands = {"frozen": [str(args.frozen)], "venv": [str(args.venv_python), "-m", "gpuws"]}
    version = startup_medians(commands, ["--version"], args.runs)
    window = startup_medians(commands, ["--demo", "--screenshot", "{shot}"], args.runs)

    ok = installed < SIZE_BUDGET_BYTES
    lines = [
        "== budgets",
        f"installed size: {installed / 1e6:.1f} MB (budget {SIZE_BUDGET_BYTES / 1e6:.0f} MB): {'OK' if ok else 'OVER'}",
    ]
    if args.package:
        lines.append(f"package file: {args.package.stat().st_size / 1e6:.1f} MB ({args.package.name})")
    lines += [
        f"start-up, --version (median of {args.runs}): frozen {version['frozen']:.2f} s, "
        f"venv {version['venv']:.2f} s ({_ratio(version['frozen'], version['venv'])})",
        f"start to first window, --demo --screenshot (median of {args.runs}): frozen {window['frozen']:.2f} s, "
        f"venv {window['venv']:.2f} s ({_ratio(window['frozen'], window['venv'])})",
    ]
    print("\n".join(lines))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "installed_bytes": installed,
                    "installed_budget_bytes": SIZE_BUDGET_BYTES,
                    "package_bytes": args.package.stat().st_size if args.package else None,
                    "startup_version_s": version,
                    "first_window_s": window,
                    "runs": args.runs,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
