"""Copies and tunnels against OpenSSH, side by side: `python -m benchmarks.bench_transfer`.

One real OpenSSH sshd on loopback (tests/support/sshd.py, clean login). For each file size
(`GPUWS_BENCH_COPY_MB`, default "256,2048"; run "32" first on a busy machine) and each repeat
(`GPUWS_BENCH_REPEATS`, default 3), interleaved so load changes hit both alike, what
`GPUWS_BENCH_TRANSFER` names (default "cp,tunnel"; "cp-down" or "cp-up": one copy direction only):

- `gpuws cp` (the command a user runs, a fresh interpreter each time) against `scp` (OpenSSH's,
  which speaks SFTP since 9.0), host -> here and here -> host; the destination is removed first
  and checked byte for byte after (size and a SHA-256 of both ends, once per size).
- `gpuws tunnel` against `ssh -N -L`, client -> host and host -> client: a loopback client sends
  (or receives) the bytes through the forwarded port to a loopback server "on the host".

Throughput is the payload over wall time. CPU is the client's: for a copy the whole command's
user + system time (its own startup and connection included, as for scp and its ssh; gpuws with its
bytecode cached, as installed: one untimed run first), for a tunnel
the tunnel process's CPU over the transfer only (/proc/PID/stat). Prints medians, the ratios
gpuws / OpenSSH, and the load average at the start of each size.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES_MB = [int(s) for s in os.environ.get("GPUWS_BENCH_COPY_MB", "256,2048").split(",") if s.strip()]
REPEATS = int(os.environ.get("GPUWS_BENCH_REPEATS", "3"))
WHAT = os.environ.get("GPUWS_BENCH_TRANSFER", "cp,tunnel").split(",")
COPY_WAYS = [way for way, names in (("host -> here", {"cp", "cp-down"}), ("here -> host", {"cp", "cp-up"}))
             if names & set(WHAT)]
_TICK = os.sysconf("SC_CLK_TCK")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass
class Figures:
    """Wall seconds and client CPU seconds of the runs of one thing at one size."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def rate(self, size: int) -> float:
        """Median MB/s."""
        return size / 1e6 / statistics.median(self.wall)

    def cpu_per_gb(self, size: int) -> float:
        """Median client CPU seconds per GB."""
        return statistics.median(self.cpu) / (size / 1e9)


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run `argv`; (wall s, CPU s of it and its children). Raises on a non-zero exit."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} {' '.join(argv[1:3])}... exited {proc.returncode}: {err.decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _make_file(path: Path, size: int) -> None:
    block = os.urandom(1 << 22)
    with path.open("wb") as f:
        written = 0
        while written < size:
            part = block[: min(len(block), size - written)]
            # Each block differs (its offset in front), so nothing can dedupe or compress it away.
            f.write(written.to_bytes(8, "little") + part[8:] if len(part) > 8 else part)
            written += len(part)


class Bench:
    """The sshd, the profile `bench` for gpuws, and OpenSSH's options for the same server."""

    def __init__(self, work: Path) -> None:
        sys.path.insert(0, str(ROOT))
        from tests.support.sshd import SshdServer

        self.work = work
        self.server = SshdServer(work / "sshd", clean_login=True)
        self.server.start()
        home = work / "home"
        (home / ".ssh").mkdir(parents=True)
        known = home / ".ssh" / "known_hosts"
        known.write_text(self.server.known_hosts_line())
        self.env = {**os.environ, "HOME": str(home), "GPUWS_CONFIG_DIR": str(work / "config"),
                    "XDG_CONFIG_HOME": str(work / "xdg"), "PYTHONPATH": str(ROOT)}
        # As installed: bytecode cached (a checkout run with PYTHONDONTWRITEBYTECODE compiles ~200
        # modules from source on every start, half a second of CPU an installed gpuws never spends).
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.gpuws = [sys.executable, "-m", "gpuws"]
        subprocess.run([*self.gpuws, "hosts", "add", "bench", "--host", "127.0.0.1", "--port",
                        str(self.server.port), "--user", self.server.user, "--key", str(self.server.client_key)],
                       env=self.env, check=True, stdout=subprocess.DEVNULL)
        warm = work / "warm.txt"
        warm.write_text("warm-up")
        subprocess.run([*self.gpuws, "cp", str(warm), f"bench:{work}/warm-copy.txt"], env=self.env, check=True,
                       stdout=subprocess.DEVNULL)  # writes the bytecode once, untimed
        self.ssh_opts = ["-o", f"UserKnownHostsFile={known}", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                         "-i", str(self.server.client_key), "-F", "/dev/null"]
        self.login = f"{self.server.user}@127.0.0.1"

    def close(self) -> None:
        self.server.stop()

    # -- copies -------------------------------------------------------------------------------

    def copies(self, size: int) -> dict[str, Figures]:
        src = self.work / "host" / "source.bin"
        here = self.work / "here" / "source.bin"
        src.parent.mkdir(exist_ok=True)
        here.parent.mkdir(exist_ok=True)
        _make_file(src, size)
        _make_file(here, size)
        down = self.work / "here" / "down.bin"
        up = self.work / "host" / "up.bin"
        port = str(self.server.port)
        runs = {
            "gpuws cp host -> here": [*self.gpuws, "cp", "--no-resume", f"bench:{src}", str(down)],
            "scp host -> here": ["scp", "-q", "-P", port, *self.ssh_opts, f"{self.login}:{src}", str(down)],
            "gpuws cp here -> host": [*self.gpuws, "cp", "--no-resume", str(here), f"bench:{up}"],
            "scp here -> host": ["scp", "-q", "-P", port, *self.ssh_opts, str(here), f"{self.login}:{up}"],
        }
        runs = {name: argv for name, argv in runs.items() if name.endswith(tuple(COPY_WAYS))}
        figures = {name: Figures() for name in runs}
        digests = {"host -> here": (_sha256(src), down), "here -> host": (_sha256(here), up)}
        for repeat in range(REPEATS):
            for name, argv in runs.items():
                dest = down if "host -> here" in name else up
                dest.unlink(missing_ok=True)
                wall, cpu = _timed(argv, self.env)
                figures[name].wall.append(wall)
                figures[name].cpu.append(cpu)
                if repeat == 0:
                    expected, path = digests["host -> here" if "host -> here" in name else "here -> host"]
                    if _sha256(path) != expected:
                        raise RuntimeError(f"{name}: the copy differs from its source")
        for path in (src, here, down, up):
            path.unlink(missing_ok=True)
        return figures

    # -- tunnels ------------------------------------------------------------------------------

    def tunnels(self, size: int) -> dict[str, Figures]:
        figures: dict[str, Figures] = {}
        for repeat in range(REPEATS):
            del repeat
            for label, start in (("gpuws tunnel", self._gpuws_tunnel), ("ssh -L", self._ssh_tunnel)):
                for direction in ("client -> host", "host -> client"):
                    with _Endpoint(size, upload=direction == "client -> host") as endpoint:
                        proc, local = start(endpoint.port)
                        try:
                            wall, cpu = endpoint.transfer(local, proc.pid)
                        finally:
                            proc.terminate()
                            proc.wait(10)
                    entry = figures.setdefault(f"{label} {direction}", Figures())
                    entry.wall.append(wall)
                    entry.cpu.append(cpu)
        return figures

    def _ssh_tunnel(self, remote: int) -> tuple[subprocess.Popen[bytes], int]:
        local = _free_port()
        proc = subprocess.Popen(["ssh", "-N", "-p", str(self.server.port), *self.ssh_opts, "-o",
                                 "ExitOnForwardFailure=yes", "-L", f"{local}:127.0.0.1:{remote}", self.login],
                                env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        _wait_forwarding(local, proc)
        return proc, local

    def _gpuws_tunnel(self, remote: int) -> tuple[subprocess.Popen[bytes], int]:
        proc = subprocess.Popen([*self.gpuws, "tunnel", "bench", "--remote", str(remote), "--no-browser", "--json"],
                                env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        local = int(json.loads(line)["local_port"])
        _wait_forwarding(local, proc)
        return proc, local


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_forwarding(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the tunnel exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError("the tunnel did not listen in time")


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


class _Endpoint:
    """A loopback server "on the host" that receives (upload) or sends (download) `size` bytes."""

    BLOCK = 1 << 20

    def __init__(self, size: int, *, upload: bool) -> None:
        self.size = size
        self.upload = upload
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.done = threading.Event()
        self.moved = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def __enter__(self) -> _Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()

    def _serve(self) -> None:
        # The tunnel's own readiness check connects and closes first: serve the connection that sends
        # or reads data, skip the empty ones.
        while not self.done.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                if self.upload:
                    buf = bytearray(self.BLOCK)
                    view = memoryview(buf)
                    while n := conn.recv_into(view):
                        self.moved += n
                    if self.moved:
                        self.done.set()
                else:
                    conn.settimeout(5)
                    try:
                        first = conn.recv(1)  # the client says "go" so probes are told apart
                    except OSError:
                        continue
                    if not first:
                        continue
                    data = memoryview(os.urandom(self.BLOCK))
                    sent = 0
                    conn.settimeout(None)
                    while sent < self.size:
                        n = min(self.BLOCK, self.size - sent)
                        conn.sendall(data[:n])
                        sent += n
                    self.moved = sent
                    self.done.set()

    def transfer(self, local: int, pid: int) -> tuple[float, float]:
        """Move the bytes through the tunnel at `local`; (wall s, CPU s of process `pid`)."""
        cpu0 = _cpu_of(pid)
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", local)) as sock:
            if self.upload:
                data = memoryview(os.urandom(self.BLOCK))
                sent = 0
                while sent < self.size:
                    n = min(self.BLOCK, self.size - sent)
                    sock.sendall(data[:n])
                    sent += n
                sock.shutdown(socket.SHUT_WR)
                sock.recv(1)  # the far end closes once it has read everything
            else:
                sock.sendall(b"g")
                buf = bytearray(self.BLOCK)
                view = memoryview(buf)
                got = 0
                while got < self.size and (n := sock.recv_into(view)):
                    got += n
                if got != self.size:
                    raise RuntimeError(f"received {got} of {self.size} bytes through the tunnel")
        if not self.done.wait(60):
            raise RuntimeError("the far end did not see the whole transfer")
        wall = time.monotonic() - start
        if self.moved != self.size:
            raise RuntimeError(f"moved {self.moved} of {self.size} bytes")
        return wall, _cpu_of(pid) - cpu0


def _report(title: str, figures: dict[str, Figures], size: int, pairs: list[tuple[str, str]]) -> None:
    print(title)
    for name, fig in figures.items():
        print(f"  {name:28s} {fig.rate(size):7.1f} MB/s  {fig.cpu_per_gb(size):6.2f} s CPU/GB  "
              f"(walls {', '.join(f'{w:.2f}' for w in fig.wall)} s)")
    for ours, theirs in pairs:
        a, b = figures[ours], figures[theirs]
        print(f"  {ours} vs {theirs}: throughput {a.rate(size) / b.rate(size):.2f}x, "
              f"CPU per GB {a.cpu_per_gb(size) / b.cpu_per_gb(size):.2f}x")


def main() -> None:
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)  # the options are environment variables; a bare run takes minutes
        return
    with tempfile.TemporaryDirectory(dir=os.environ.get("GPUWS_BENCH_DIR")) as tmp:
        bench = Bench(Path(tmp))
        try:
            for mb in SIZES_MB:
                size = mb * 1024 * 1024
                if COPY_WAYS:
                    load = _load()
                    figures = bench.copies(size)
                    _report(f"copy {mb} MB, medians of {REPEATS} (load at start {load}, at end {_load()}):",
                            figures, size, [(f"gpuws cp {way}", f"scp {way}") for way in COPY_WAYS])
                if "tunnel" in WHAT:
                    load = _load()
                    figures = bench.tunnels(size)
                    _report(f"tunnel {mb} MB, medians of {REPEATS} (load at start {load}, at end {_load()}):",
                            figures, size, [("gpuws tunnel client -> host", "ssh -L client -> host"),
                                            ("gpuws tunnel host -> client", "ssh -L host -> client")])
        finally:
            bench.close()


if __name__ == "__main__":
    main()
