"""Connect + probe 50 simulated GPU hosts concurrently vs one after another.

Run: `python -m benchmarks.bench_connect [--hosts 50] [--repeats 3] [--latency-ms 30]`.

Each host is an in-process asyncssh server on 127.0.0.1 with its own host key. It runs every exec
request with /bin/sh, as sshd does, with a `nvidia-smi` that prints a real capture
(`tests/fixtures/real/nvidia-smi-xml/`), so the probe does all of its real work: key exchange,
auth, one channel, the probe script, XML parsing. Loopback has no network delay, so each host
adds `--latency-ms` before answering auth and before each command, standing in for the round
trips to a cloud host; concurrency is what hides them. Prints the medians and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import asyncssh

from gpuws.core.models import AuthMethod, HostProfile
from gpuws.remote.connection import HostConnection
from gpuws.remote.hostkeys import KnownHosts
from gpuws.remote.probe import probe
from tests.support.real_fixtures import REAL_FIXTURES

FIXTURE = REAL_FIXTURES / "nvidia-smi-xml" / "dual_2070-v13.xml"
PASSWORD = "bench"


class _Server(asyncssh.SSHServer):
    def __init__(self, latency: float) -> None:
        self._latency = latency

    async def begin_auth(self, username: str) -> bool:
        await asyncio.sleep(self._latency)  # the auth round trip
        return True

    def password_auth_supported(self) -> bool:
        return True

    def validate_password(self, username: str, password: str) -> bool:
        return password == PASSWORD


def _handler(env: dict[str, str], latency: float):  # type: ignore[no-untyped-def]
    async def handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
        await asyncio.sleep(latency)  # the channel-open round trip
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", process.command or "true", stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True)
        out, err = await proc.communicate()
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(proc.returncode or 0)

    return handle


async def _start_hosts(count: int, latency: float, bin_dir: Path) -> list[tuple[asyncssh.SSHAcceptor, int, str]]:
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LC_ALL": "C"}
    hosts = []
    for _ in range(count):
        key = asyncssh.generate_private_key("ssh-ed25519")
        acceptor = await asyncssh.create_server(
            lambda: _Server(latency), "127.0.0.1", 0, server_host_keys=[key],
            process_factory=_handler(env, latency), encoding=None)
        hosts.append((acceptor, acceptor.sockets[0].getsockname()[1], key.export_public_key().decode()))
    return hosts


async def _connect_and_probe(port: int, host_key: str, known: KnownHosts) -> int:
    profile = HostProfile(name=f"bench{port}", host="127.0.0.1", port=port, user="bench", auth=AuthMethod.PASSWORD)
    async with HostConnection(profile, password=PASSWORD, known_host_key=host_key, known_hosts=known) as conn:
        inventory = await probe(conn.runner, require_driver=True)
    return len(inventory.gpus)


async def _measure(hosts: list[tuple[asyncssh.SSHAcceptor, int, str]], known: KnownHosts,
                   concurrent: bool) -> float:
    start = time.perf_counter()
    if concurrent:
        counts = await asyncio.gather(*(_connect_and_probe(port, key, known) for _, port, key in hosts))
    else:
        counts = [await _connect_and_probe(port, key, known) for _, port, key in hosts]
    elapsed = time.perf_counter() - start
    assert all(c == 2 for c in counts), counts  # every host really probed (the capture has 2 GPUs)
    return elapsed


async def main_async(count: int, repeats: int, latency_ms: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = Path(tmp) / "bin"
        bin_dir.mkdir()
        smi = bin_dir / "nvidia-smi"
        smi.write_text(f'#!/bin/sh\nexec cat "{FIXTURE}"\n')
        smi.chmod(0o755)
        known = KnownHosts([Path(tmp) / "known_hosts"])
        hosts = await _start_hosts(count, latency_ms / 1000, bin_dir)
        try:
            await _measure(hosts[:2], known, concurrent=False)  # warm up imports and caches
            sequential, concurrent = [], []
            for _ in range(repeats):  # interleaved, so drift affects both alike
                sequential.append(await _measure(hosts, known, concurrent=False))
                concurrent.append(await _measure(hosts, known, concurrent=True))
        finally:
            for acceptor, _, _ in hosts:
                acceptor.close()
    seq, conc = statistics.median(sequential), statistics.median(concurrent)
    print(f"connect+probe {count} simulated hosts (latency {latency_ms:g} ms/round trip, "
          f"median of {repeats}, {os.cpu_count()} CPUs)")
    print(f"  one after another: {seq:7.2f} s  ({seq / count * 1000:.0f} ms/host)")
    print(f"  concurrently:      {conc:7.2f} s")
    print(f"  ratio:             {seq / conc:7.1f}x faster concurrently")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=30.0)
    args = parser.parse_args(argv)
    if not FIXTURE.is_file():
        raise SystemExit(f"fixture missing: {FIXTURE}")
    asyncio.run(main_async(args.hosts, args.repeats, args.latency_ms))


if __name__ == "__main__":
    main()
