"""Read a host's GPU process table and load, and stop a process (SIGTERM, then SIGKILL).

Stopping follows the resize's remote-kill rules (gpuws.remote.resize): a pid from nvidia-smi is
signalled only when the host shows a process of that name under it (a container has its own pid
namespace: never signal the wrong process), with `sudo -n` when the process is not the login
user's. SIGKILL is a separate, confirmed step: `stop_process` sends one signal and says whether
the process is gone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from gpuws.core.errors import GpuwsError
from gpuws.core.nvsmi.compute_apps import parse_compute_apps
from gpuws.core.processes import GpuProcess, HostLoad, join_processes, parse_load, parse_pmon, parse_ps
from gpuws.core.runner import CommandResult, CommandRunner

_APP_FIELDS = ("pid", "process_name", "gpu_uuid", "used_memory")
_PS_FORM = ("ps", "-o", "pid=,user=,args=", "-p")


class ProcessError(GpuwsError):
    """A process could not be listed or stopped (the message says why)."""


async def _run(runner: CommandRunner, argv: Sequence[str], timeout: float = 15.0) -> CommandResult | None:
    try:
        return await runner.run(list(argv), timeout=timeout)
    except (OSError, GpuwsError):
        return None  # a missing tool (pmon on an old driver, nproc) leaves its columns empty


async def read_processes(runner: CommandRunner) -> tuple[list[GpuProcess], HostLoad]:
    """Every process holding GPU memory, with user, command and SM %, and the host's load."""
    apps_r, gpus_r, pmon_r, nproc_r, load_r, mem_r = await asyncio.gather(
        _run(runner, ["nvidia-smi", f"--query-compute-apps={','.join(_APP_FIELDS)}", "--format=csv,noheader,nounits"]),
        _run(runner, ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"]),
        _run(runner, ["nvidia-smi", "pmon", "-c", "1", "-s", "u"]),
        _run(runner, ["nproc"]),
        _run(runner, ["cat", "/proc/loadavg"]),
        _run(runner, ["cat", "/proc/meminfo"]),
    )
    if apps_r is None or not apps_r.ok:
        detail = (apps_r.stderr.strip().splitlines() or [""])[0] if apps_r is not None else "not found"
        raise ProcessError(f"nvidia-smi --query-compute-apps failed: {detail}")
    apps = parse_compute_apps(apps_r.stdout, _APP_FIELDS)
    index: dict[str, str] = {}
    if gpus_r is not None and gpus_r.ok:
        for line in gpus_r.stdout.splitlines():
            number, _, uuid = (part.strip() for part in line.partition(","))
            if number and uuid:
                index[uuid] = number
    ps: dict[int, tuple[str, str]] = {}
    if apps:
        ps_r = await _run(runner, [*_PS_FORM, ",".join(str(a.pid) for a in apps)])
        if ps_r is not None:  # ps exits 1 when some pid is not visible: keep what it printed
            ps = parse_ps(ps_r.stdout)
    sm = parse_pmon(pmon_r.stdout) if pmon_r is not None and pmon_r.ok else {}
    load = parse_load(*(r.stdout if r is not None and r.ok else "" for r in (nproc_r, load_r, mem_r)))
    return join_processes(apps, index, ps, sm), load


async def _visible(runner: CommandRunner, pid: int) -> tuple[str, str] | None:
    result = await _run(runner, [*_PS_FORM, str(pid)])
    return parse_ps(result.stdout).get(pid) if result is not None else None


async def stop_process(runner: CommandRunner, process: GpuProcess, signal_name: str = "TERM",
                       wait_s: float = 10.0) -> bool:
    """Send SIGTERM (or SIGKILL) to `process`; True once it is gone, False while it still runs."""
    if signal_name not in ("TERM", "KILL"):
        raise ProcessError(f"unsupported signal {signal_name!r}")
    seen = await _visible(runner, process.pid)
    expected = process.name.split()[0].rsplit("/", 1)[-1] if process.name else ""
    command = seen[1] if seen is not None else ""
    shown = command.split()[0].rsplit("/", 1)[-1] if command else ""
    if seen is None:
        raise ProcessError(f"cannot stop pid {process.pid} ({process.name}): no such process is visible on the "
                           "host (is it in a container?); stop it there")
    if expected and not (shown.startswith(expected[:15]) or expected.startswith(shown[:15])):
        raise ProcessError(f"pid {process.pid} is now {shown!r}, not {expected!r}: not signalled")
    result = await _run(runner, ["kill", f"-{signal_name}", str(process.pid)])
    if result is None or not result.ok:
        # Not the login user's process: as the resize does, only with sudo that asks no password.
        result = await _run(runner, ["sudo", "-n", "kill", f"-{signal_name}", str(process.pid)])
        if result is None or not result.ok:
            raise ProcessError(f"cannot signal pid {process.pid}: permission denied (and no `sudo -n`)")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if await _visible(runner, process.pid) is None:
            return True
        await asyncio.sleep(0.3)
    return False
