"""The SSH client's cost under many streaming hosts: `python -m benchmarks.bench_ssh_client`.

N connections (default 50) to a real OpenSSH sshd on loopback, each streaming the telemetry agent
(one simulated GPU, fake NVML, clean login) into one TelemetryStore, as the app does for N hosts.
Measured on the client only (this process; the hosts' agents are other processes): CPU per
sample, side by side with the cipher asyncssh would pick by default (chacha20-poly1305) and the
one gpuws now prefers (AES-GCM), then where the client's CPU goes (cProfile, by package).

Before/after for the agent protocol itself (one write per period, deltas) is in bench_telemetry:
bytes and CPU per sample against the nvidia-smi stream; the issue measured the old protocol at
2,507 bytes and 0.79 ms client CPU per 4-GPU sample.
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HOSTS = int(os.environ.get("GPUWS_BENCH_HOSTS", "50"))
HZ = 2.0
SECONDS = float(os.environ.get("GPUWS_BENCH_SECONDS", "12"))
CIPHERS = (("chacha20-poly1305 (asyncssh's default)", ("chacha20-poly1305@openssh.com",)),
           ("aes128-gcm (gpuws' first choice)", ("aes128-gcm@openssh.com",)))


async def _phase(server: Any, python: str, ciphers: tuple[str, ...], profile: bool) -> tuple[float, int, Any]:
    import gpuws.remote.connection as connection
    from gpuws.core.models import AuthMethod, HostProfile
    from gpuws.core.telemetry.store import TelemetryStore
    from gpuws.remote.ciphers import encryption_options
    from gpuws.remote.connection import HostConnection
    from gpuws.remote.telemetry import TelemetryStream

    connection.encryption_options = lambda: encryption_options(ciphers)  # type: ignore[assignment]
    host = HostProfile(name="bench", host="127.0.0.1", port=server.port, user=server.user,
                       auth=AuthMethod.KEY, key_path=str(server.client_key))
    store = TelemetryStore()
    conns = [HostConnection(host, known_host_key=server.host_public_key) for _ in range(HOSTS)]
    await asyncio.gather(*(c.connect() for c in conns))
    counted = [0]
    measuring = asyncio.Event()
    started = [0]

    async def run(i: int, conn: Any) -> None:
        stream = TelemetryStream(conn.runner, hz=HZ, python=python, prefer="nvml", measure_skew=False)
        async with stream:
            first = True
            async for batch in stream:
                store.ingest(f"h{i}", batch)
                if first:
                    started[0] += 1
                    first = False
                if measuring.is_set():
                    counted[0] += 1

    tasks = [asyncio.create_task(run(i, c)) for i, c in enumerate(conns)]
    while started[0] < HOSTS:
        await asyncio.sleep(0.2)
    await asyncio.sleep(2.0)  # every agent past its start-up
    profiler = cProfile.Profile() if profile else None
    measuring.set()
    cpu0 = time.process_time()
    if profiler:
        profiler.enable()
    await asyncio.sleep(SECONDS)
    if profiler:
        profiler.disable()
    cpu = time.process_time() - cpu0
    measuring.clear()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
    return cpu, counted[0], profiler


def _by_package(profiler: cProfile.Profile) -> list[tuple[str, float]]:
    stats = pstats.Stats(profiler)
    totals: dict[str, float] = {}
    for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if "select.epoll" in name or name == "<method 'poll' of 'select.epoll' objects>":
            continue  # waiting, not working
        if "asyncssh" in filename:
            key = "asyncssh (packets, channels)"
            if "crypto" in filename or "encryption" in filename or "mac" in filename:
                key = "asyncssh ciphers and MACs"
        elif "asyncio" in filename or "selectors" in filename or "socket" in name:
            key = "asyncio event loop and sockets"
        elif "gpuws" in filename:
            key = "gpuws (decode, store)"
        elif "numpy" in filename:
            key = "numpy"
        elif "json" in filename:
            key = "json"
        elif filename == "~":
            key = "builtins (C calls: crypto, recv, json ...)"
        else:
            key = "other"
        totals[key] = totals.get(key, 0.0) + tottime
    total = sum(totals.values()) or 1.0
    return sorted(((k, v / total) for k, v in totals.items()), key=lambda kv: -kv[1])


async def run(workdir: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.remote.telemetry_hosts import start_simulated_nvml_host

    server, python = start_simulated_nvml_host(workdir, gpus="h100", clean_login=True)
    try:
        results = []
        for label, ciphers in CIPHERS:
            cpu, samples, profiler = await _phase(server, python, ciphers, profile=False)
            results.append((label, cpu, samples))
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print(f"client CPU with {HOSTS} hosts streaming at {HZ:g} Hz ({SECONDS:g} s each; load {load}):")
        for label, cpu, samples in results:
            print(f"  {label}: {1000 * cpu / max(1, samples):.3f} ms per sample ({samples} samples, "
                  f"{100 * cpu / SECONDS:.0f} % of a core)")
        (_, before, n0), (_, after, n1) = results
        print(f"  AES-GCM vs chacha20: {(after / max(1, n1)) / (before / max(1, n0)):.2f}x the client CPU per sample")
        _, _, profiler = await _phase(server, python, CIPHERS[1][1], profile=True)
        print("where the client's CPU goes (AES-GCM, cProfile own time by package):")
        for key, share in _by_package(profiler)[:7]:
            print(f"  {share * 100:5.1f} %  {key}")
    finally:
        server.stop()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp)))


if __name__ == "__main__":
    main()
