"""What the window and the CLI use of the remote layer, through the application layer.

The layer rule (pyproject.toml, import-linter) keeps `gpuws.ui` and `gpuws.cli` off
`gpuws.remote`: the connection, the event-loop thread, the probe, the telemetry stream, the GPU
process list and known_hosts reach them from here (stopping a process is the Workspace's verb).
One name each; nothing is wrapped twice.
"""

from __future__ import annotations

import asyncssh

from gpuws.remote.connection import HostConnection
from gpuws.remote.hostkeys import KnownHosts
from gpuws.remote.loop import LoopThread
from gpuws.remote.probe import probe
from gpuws.remote.processes import ProcessError, read_processes
from gpuws.remote.telemetry import TelemetryStream

__all__ = ["HostConnection", "LoopThread", "ProcessError", "TelemetryStream", "probe", "read_processes",
           "remember_host_key"]


def remember_host_key(host: str, port: int, key: asyncssh.SSHKey) -> None:
    """Trust `key` for host:port from now on (appended to gpuws' known_hosts; blocking file IO)."""
    KnownHosts().record(host, port, key)
