"""ssh_config import at scale (issue 36): `python -m benchmarks.bench_sshconfig`.

Times `import_ssh_config` (read, resolve every alias as `ssh -G` would, validate) on generated
configs of plain `Host`/`HostName` blocks (1,000 to 10,000, with a `Host *` block) and on a
5,000-hop ProxyJump chain, and `gpuws hosts import-ssh-config --dry-run` on 10,000 hosts in a fresh
process. Target: 10,000 hosts in under 2 s; time per host flat as the count grows (linear). Before
issue 36, 1,000 hosts took 42 s of CPU and 3,000 did not finish in 120 s.

Saving the imported profiles (`hosts import-ssh-config` without --dry-run) is printed too: it is the
profile file's writer (tomlkit, gpuws/core/recordfile.py), linear, and not part of the target.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = int(os.environ.get("GPUWS_BENCH_ROUNDS", "3"))


def _plain(count: int) -> str:
    blocks = [f"Host h{i}\n  HostName 10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}\n" for i in range(count)]
    return "".join(blocks) + "Host *\n  ServerAliveInterval 30\n"


def _chain(hops: int) -> str:
    lines = ["Host j0\n  HostName 10.0.0.1\n"]
    lines += [f"Host j{i}\n  HostName 10.1.{i // 256 % 256}.{i % 256}\n  ProxyJump j{i - 1}\n" for i in range(1, hops)]
    return "".join(lines)


def _time_import(config: Path) -> tuple[float, int]:
    from gpuws.core.sshconfig import import_ssh_config

    times = []
    imported = 0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        result = import_ssh_config(config)
        times.append(time.perf_counter() - start)
        imported = len(result.profiles)
    return statistics.median(times), imported


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "HOME": str(root), "GPUWS_CONFIG_DIR": str(root / "config"),
               "XDG_CONFIG_HOME": str(root / "xdg")}
        os.environ.update(env)
        print(f"{'config':<28} {'imported':>9} {'median s':>9} {'us/host':>8}")
        for count in (1000, 3000, 10000):
            config = root / f"plain-{count}"
            config.write_text(_plain(count))
            seconds, imported = _time_import(config)
            print(f"{count:>6} Host blocks{'':<15} {imported:>9} {seconds:>9.3f} {seconds / count * 1e6:>8.1f}")
        chain = root / "chain"
        chain.write_text(_chain(5000))
        seconds, imported = _time_import(chain)
        print(f"{'5,000-hop ProxyJump chain':<28} {imported:>9} {seconds:>9.3f} {seconds / 5000 * 1e6:>8.1f}")
        config = root / "plain-10000"
        for label, extra in (("CLI --dry-run, 10,000 hosts", ["--dry-run"]), ("CLI saving 10,000 hosts", [])):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gpuws", "hosts", "import-ssh-config", str(config), "--json",
                            *extra], env=env, check=True, stdout=subprocess.DEVNULL)
            print(f"{label:<28} {'':>9} {time.perf_counter() - start:>9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
