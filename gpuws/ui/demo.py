"""The built-in simulated host for `gpuws --demo` and the empty state's "Open demo" button.

The demo server runs in-process on the bridge's loop thread; its profile lives only in memory
(never saved) and its password and host key are handed to the connection directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuws.core.models import HostProfile
from gpuws.sim.server import DEMO_PROFILE_NAME

DEMO_NAME = DEMO_PROFILE_NAME
DEMO_GPUS = "h100,a100,l40s,vgpu"


@dataclass
class RunningDemo:
    """A started demo server and what it takes to connect to it."""

    server: Any  # gpuws.sim.server.DemoHost
    profile: HostProfile
    password: str
    known_host_key: str


async def start_demo(gpus: str = DEMO_GPUS) -> RunningDemo:
    """Start the simulated host on 127.0.0.1 (a free port) and describe how to reach it."""
    from gpuws.core.paths import data_dir
    from gpuws.sim.server import DemoHost, demo_profile

    state_dir = data_dir() / "demo-host"
    state_dir.mkdir(parents=True, exist_ok=True)
    server = DemoHost(gpus=gpus, port=0, state_dir=state_dir)
    info = await server.start()
    return RunningDemo(server, demo_profile(info), info.password, _key_from_known_hosts_line(info.known_hosts_line))


def _key_from_known_hosts_line(line: str) -> str:
    """'[127.0.0.1]:2222 ssh-ed25519 AAAA…' -> 'ssh-ed25519 AAAA…' (the key alone)."""
    parts = line.split()
    return " ".join(parts[1:3]) if len(parts) >= 3 else line
