"""The GPU process table and the host's load, parsed from what the host prints (no I/O here).

A row joins three sources: `nvidia-smi --query-compute-apps` (pid, GPU, memory), `ps -o
pid=,user=,args=` (who runs it and its whole command line) and `nvidia-smi pmon -s u` (per-process
SM utilisation, where the driver gives it). The host's CPU count, load averages and memory come
from `nproc`, `/proc/loadavg` and `/proc/meminfo`. Missing pieces stay None ("—"), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuws.core.nvsmi.compute_apps import ComputeApp


@dataclass(frozen=True)
class GpuProcess:
    """One process holding GPU memory."""

    pid: int
    gpu: str  # "0", or the GPU's UUID when the index is not known
    name: str  # nvidia-smi's process name
    used_mib: int | None
    user: str | None = None  # None: not visible on the host (another pid namespace, a container)
    command: str | None = None  # the full command line
    sm_pct: float | None = None  # per-process SM utilisation, where NVML reports it

    @property
    def shown_command(self) -> str:
        return self.command or self.name


@dataclass(frozen=True)
class HostLoad:
    """CPU, load and memory of the host."""

    cpus: int | None = None
    load: tuple[float, float, float] | None = None
    mem_total_mib: float | None = None
    mem_available_mib: float | None = None

    def text(self) -> str:
        """'16 CPUs · load 0.52 0.40 0.33 · RAM 12.3 of 62.8 GiB used'."""
        parts = []
        if self.cpus is not None:
            parts.append(f"{self.cpus} CPUs")
        if self.load is not None:
            parts.append("load " + " ".join(f"{v:.2f}" for v in self.load))
        if self.mem_total_mib is not None and self.mem_available_mib is not None:
            used = (self.mem_total_mib - self.mem_available_mib) / 1024
            parts.append(f"RAM {used:.1f} of {self.mem_total_mib / 1024:.1f} GiB used")
        return " · ".join(parts) or "host load not available"


def parse_ps(text: str) -> dict[int, tuple[str, str]]:
    """`ps -o pid=,user=,args=` lines -> {pid: (user, command line)}."""
    rows: dict[int, tuple[str, str]] = {}
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0].isdigit():
            rows[int(parts[0])] = (parts[1], parts[2].strip() if len(parts) == 3 else "")
    return rows


def parse_pmon(text: str) -> dict[int, float]:
    """`nvidia-smi pmon -c 1 -s u` -> {pid: SM %}; '-' (not reported) is left out."""
    sm: dict[int, float] = {}
    header: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            names = line.lstrip("#").split()
            if "pid" in names and "sm" in names:
                header = names
            continue
        cells = line.split()
        if not header or len(cells) < len(header):
            continue
        row = dict(zip(header, cells, strict=False))
        pid, value = row.get("pid", ""), row.get("sm", "-")
        try:
            sm[int(pid)] = float(value)
        except ValueError:
            continue
    return sm


def parse_load(nproc: str, loadavg: str, meminfo: str) -> HostLoad:
    cpus = int(nproc.strip()) if nproc.strip().isdigit() else None
    load: tuple[float, float, float] | None = None
    fields = loadavg.split()
    try:
        load = (float(fields[0]), float(fields[1]), float(fields[2]))
    except (IndexError, ValueError):
        load = None
    mem: dict[str, float] = {}
    for line in meminfo.splitlines():
        key, _, rest = line.partition(":")
        value = rest.split()
        if value and value[0].isdigit():
            mem[key.strip()] = int(value[0]) / 1024  # kB -> MiB
    return HostLoad(cpus, load, mem.get("MemTotal"), mem.get("MemAvailable"))


def join_processes(apps: Sequence[ComputeApp], gpu_index: Mapping[str, str], ps: Mapping[int, tuple[str, str]],
                   sm: Mapping[int, float]) -> list[GpuProcess]:
    """The table's rows, biggest memory first."""
    rows = []
    for app in apps:
        user, command = ps.get(app.pid, (None, None))
        gpu = gpu_index.get(app.gpu_uuid or "", app.gpu_uuid or "?")
        rows.append(GpuProcess(app.pid, gpu, app.process_name, app.used_memory_mib, user, command or None,
                               sm.get(app.pid)))
    rows.sort(key=lambda p: -(p.used_mib or 0))
    return rows
