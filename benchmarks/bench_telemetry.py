"""Telemetry benchmarks: `python -m benchmarks.bench_telemetry` prints medians and ratios.

1. store ingest rate (GPU-samples/s on one core; target >= 50,000)
2. memory for 24 h of 1 Hz history on 64 GPUs (target < 150 MB resident)
3. a dashboard frame's store reads: 64 GPUs, 1 h window (target: the whole frame < 10 ms)
4. sample-to-ready latency p95 at 10 Hz through a loopback OpenSSH sshd (target < 200 ms)
5. per-sample cost of the agent stream vs `nvidia-smi --query-gpu` once per sample, both as a new
   exec over an existing SSH connection and as a fresh `ssh` process per sample

Everything runs on this machine (loopback sshd), so machine-wide CPU time per sample is the whole
cost: client, sshd, and the host side. The host's nvidia-smi here is the gpuws emulator (Python),
which starts slower than the real binary; the ratio is indicative, the absolute figures are local.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from gpuws.core.telemetry.sample import GpuSample
from gpuws.core.telemetry.smi_query import QUERY_FIELDS
from gpuws.core.telemetry.store import METRICS, TelemetryStore

GPUS = 64


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _busy_jiffies() -> int:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4]  # all but idle and iowait


def _samples(n: int) -> list[GpuSample]:
    return [GpuSample(t=0.0, gpu=i, util_gpu_pct=50.0, util_mem_pct=20.0, mem_used_mib=1000.0, temp_c=60.0,
                      power_w=300.0, sm_clock_mhz=1800.0, mem_clock_mhz=2600.0, pcie_rx_kib_s=100.0,
                      pcie_tx_kib_s=100.0, fan_pct=None, enc_util_pct=0.0, dec_util_pct=0.0) for i in range(n)]


def bench_ingest(rounds: int = 5, batches: int = 2000) -> float:
    rates = []
    samples = _samples(GPUS)
    for _ in range(rounds):
        store = TelemetryStore()
        t0 = 1.7e9
        start = time.perf_counter()
        for k in range(batches):
            t = t0 + k * 0.1
            for s in samples:
                s.t = t
            store.ingest_samples("h", samples)
        rates.append(batches * GPUS / (time.perf_counter() - start))
    rate = statistics.median(rates)
    print(f"ingest: {rate:,.0f} GPU-samples/s (median of {rounds}; target >= 50,000)")
    return rate


def bench_memory_and_frame() -> None:
    gc.collect()
    before = _rss_mib()
    store = TelemetryStore()
    samples = _samples(GPUS)
    t0 = 1.7e9
    start = time.perf_counter()
    for k in range(24 * 3600):
        t = t0 + k
        for s in samples:
            s.t = t
            s.util_gpu_pct = float(k % 100)
        store.ingest_samples("h", samples)
    fill_s = time.perf_counter() - start
    gc.collect()
    after = _rss_mib()
    print(f"memory: 24 h at 1 Hz on {GPUS} GPUs: store arrays {store.memory_bytes() / 2**20:.1f} MiB, "
          f"process RSS {after:.1f} MiB (+{after - before:.1f} MiB for the store; target < 150 MB); "
          f"filled in {fill_s:.0f} s")
    end = t0 + 24 * 3600
    keys = store.device_keys("h")
    plotted = METRICS[:4]
    for label, window in (("1 h", 3600.0), ("24 h", 86400.0), ("10 min", 600.0)):
        times = []
        for _ in range(30):
            start = time.perf_counter()
            for key in keys:
                w = store.window("h", key, end - window, end)
                for metric in plotted:
                    w.column(metric)
            store.latest("h")
            times.append(time.perf_counter() - start)
        print(f"frame (store part): {GPUS} GPUs x {len(plotted)} series, {label} window: "
              f"{statistics.median(times) * 1000:.2f} ms median, {max(times) * 1000:.2f} ms max "
              f"({len(w.t)} points per series)")


async def _cpu_per_call(label: str, n: int, call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    jiffies = _busy_jiffies()
    start = time.perf_counter()
    for _ in range(n):
        await call()
    wall = (time.perf_counter() - start) / n
    cpu = (_busy_jiffies() - jiffies) / os.sysconf("SC_CLK_TCK") / n
    print(f"  {label}: {cpu * 1000:.1f} ms CPU and {wall * 1000:.1f} ms wall per sample")
    return cpu, wall


async def bench_ssh(workdir: Path) -> None:
    from gpuws.core.models import AuthMethod, HostProfile
    from gpuws.remote.connection import HostConnection
    from gpuws.remote.telemetry import TelemetryStream
    from tests.remote.telemetry_hosts import start_simulated_nvml_host

    server, python = start_simulated_nvml_host(workdir)
    profile = HostProfile(name="bench", host="127.0.0.1", port=server.port, user=server.user,
                          auth=AuthMethod.KEY, key_path=str(server.client_key))
    try:
        async with HostConnection(profile, known_host_key=server.host_public_key) as conn:
            latencies = []
            stream = TelemetryStream(conn.runner, hz=10, python=python)
            async with stream:
                async for batch in stream:
                    latencies.append(time.time() - batch.t)
                    if len(latencies) >= 100:
                        break
            latencies = sorted(latencies[5:])  # skip start-up
            p95 = latencies[int(0.95 * (len(latencies) - 1))]
            print(f"latency sample-to-ready at 10 Hz over loopback sshd ({stream.source}, 4 GPUs): "
                  f"median {statistics.median(latencies) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms (target < 200 ms)")

            print("per-sample cost (all 4 GPUs of the simulated host):")
            stream = TelemetryStream(conn.runner, hz=20, python=python)
            iterator = stream.__aiter__()
            async with stream:
                await iterator.__anext__()  # started
                agent_cpu, _ = await _cpu_per_call("agent stream at 20 Hz", 100, iterator.__anext__)
            query = ["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits"]
            exec_cpu, _ = await _cpu_per_call("new exec per sample over the open connection", 20,
                                              lambda: conn.runner.run(query, timeout=30))
        ssh = ["ssh", "-i", str(server.client_key), "-p", str(server.port), "-o", "BatchMode=yes",
               "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
               f"{server.user}@127.0.0.1", " ".join(query)]

        async def fresh_ssh() -> None:
            await asyncio.to_thread(subprocess.run, ssh, check=True, capture_output=True)

        ssh_cpu, _ = await _cpu_per_call("fresh ssh process per sample", 20, fresh_ssh)
        print(f"  ratio: exec-per-sample costs {exec_cpu / agent_cpu:.1f}x the agent stream, "
              f"fresh ssh per sample {ssh_cpu / agent_cpu:.1f}x (CPU per sample)")
    finally:
        server.stop()


def main() -> None:
    bench_ingest()
    bench_memory_and_frame()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench_ssh(Path(tmp)))


if __name__ == "__main__":
    main()
