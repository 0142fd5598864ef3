"""What the window and the CLI use of the remote layer, through the application layer.

The layer rule (pyproject.toml, import-linter) keeps `gpuws.ui` and `gpuws.cli` off
`gpuws.remote`: the connection, the event-loop thread, the probe, telemetry streams, the GPU
process list and known_hosts reach them from here. One name each; nothing is wrapped twice.
"""

from __future__ import annotations

import asyncssh

from gpuws.remote.connection import ConnectionState, HostConnection
from gpuws.remote.hostkeys import KnownHosts
from gpuws.remote.loop import LoopThread
from gpuws.remote.probe import probe
from gpuws.remote.processes import ProcessError, read_processes, stop_process
from gpuws.remote.telemetry import TelemetryStream, describe_source
from gpuws.remote.telemetry_service import HostFeed, TelemetryService

__all__ = ["ConnectionState", "HostConnection", "HostFeed", "LoopThread", "ProcessError", "TelemetryService",
           "TelemetryStream", "describe_source", "probe", "read_processes", "remember_host_key", "stop_process"]


def remember_host_key(host: str, port: int, key: asyncssh.SSHKey) -> None:
    """Trust `key` for host:port from now on (appended to gpuws' known_hosts; blocking file IO)."""
    KnownHosts().record(host, port, key)
