"""A `HostSession` connection whose runner runs commands on this machine (tests of the window
against the simulated host's tools, without an sshd)."""

from __future__ import annotations

from gpuws.core.runner import LocalRunner


class LocalConnection:
    """A connection whose runner runs commands here (the simulated host's tools first on PATH)."""

    def __init__(self, runner: LocalRunner) -> None:
        self.runner = runner

    async def connect(self) -> None:
        return None

    async def close(self) -> None:
        return None
