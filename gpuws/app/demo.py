"""The composition module of the demo: the one place that wires the simulated host to a connection.

`gpuws --demo`, the window's "Open demo" button and CLI commands given NAME "demo" (without a
saved profile of that name) all start the simulated GPU host here, in-process, on 127.0.0.1.
Its state persists under `data_dir()/"demo-host"` so MIG layouts survive runs; its profile lives
only in memory (never saved) and its password and host key go to the connection directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from gpuws.core.models import HostProfile
from gpuws.core.simulation import DEMO_ALIAS

if TYPE_CHECKING:
    from gpuws.sim.server import DemoHost

DEMO_NAME: Final = DEMO_ALIAS  # = gpuws.sim.server.DEMO_PROFILE_NAME (checked by a test)
DEMO_GPUS: Final = "h100,a100,l40s,vgpu"


@dataclass
class RunningDemo:
    """A started demo server and what it takes to connect to it."""

    server: DemoHost
    profile: HostProfile
    password: str
    known_host_key: str  # "ssh-ed25519 AAAA…" (the key alone)

    async def stop(self) -> None:
        """Stop the demo server."""
        await self.server.stop()


async def start_demo(gpus: str = DEMO_GPUS) -> RunningDemo:
    """Start the simulated host on 127.0.0.1 (a free port) and describe how to reach it."""
    from gpuws.core.paths import data_dir
    from gpuws.sim.server import DemoHost, demo_profile

    state_dir = data_dir() / "demo-host"
    state_dir.mkdir(parents=True, exist_ok=True)
    server = DemoHost(gpus=gpus, port=0, state_dir=state_dir)
    info = await server.start()
    return RunningDemo(server, demo_profile(info), info.password, key_from_known_hosts_line(info.known_hosts_line))


def key_from_known_hosts_line(line: str) -> str:
    """'[127.0.0.1]:2222 ssh-ed25519 AAAA…' -> 'ssh-ed25519 AAAA…' (the key alone)."""
    parts = line.split()
    return " ".join(parts[1:3]) if len(parts) >= 3 else line
