"""Running commands on a host, as argument lists: the seam between logic and transport.

Benchmark, resize and telemetry logic talk to a `CommandRunner`; the remote layer provides one
over SSH, and `LocalRunner` runs the same argv on this machine (tests use it with the simulated
`nvidia-smi` on PATH). Commands are always argument lists: no shell string is ever built from
user input.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left: exit status and decoded output."""

    argv: tuple[str, ...]
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class CommandTimeout(Exception):
    """A command ran past its timeout; it was stopped (its whole process group on the host)."""


class CommandRunner(Protocol):
    """Runs argv on one host. Implementations stop the remote process on cancel or timeout."""

    async def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int | None = None,
    ) -> CommandResult:
        """Run argv to its end. `max_output`: the bytes of remote output this answer may take (a
        tighter cap than the connection's, for answers known to be small); past it the command is
        stopped with an error."""
        ...

    def stream(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> AsyncIterator[str]:
        """Yield stdout lines (without newline) until the command exits; cancel to stop it."""
        ...


class LocalRunner:
    """A `CommandRunner` for this machine (tests, and hosts reached without SSH)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = dict(os.environ if env is None else env)

    def _merged_env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        merged = dict(self._env)
        if env:
            merged.update(env)
        return merged

    async def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int | None = None,
    ) -> CommandResult:
        """Run argv here. `max_output` caps remote output only: this machine's commands are ours."""
        del max_output
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._merged_env(env),
            start_new_session=True,  # own process group, so cancel kills children too
        )
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(input.encode() if input is not None else None), timeout
            )
        except (TimeoutError, asyncio.CancelledError) as exc:
            _kill_group(proc)
            await proc.wait()
            if isinstance(exc, TimeoutError):
                raise CommandTimeout(f"{argv[0]} timed out after {timeout:g} s") from None
            raise
        assert proc.returncode is not None
        return CommandResult(
            tuple(argv), proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        )

    async def stream(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> AsyncIterator[str]:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=self._merged_env(env),
            start_new_session=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            if input is not None:
                # A command that exits without reading its stdin is no error of ours: its output and
                # exit status say what happened.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    proc.stdin.write(input.encode())
                    await proc.stdin.drain()
            proc.stdin.close()
            while line := await proc.stdout.readline():
                yield line.decode(errors="replace").rstrip("\r\n")
            await proc.wait()
        finally:
            if proc.returncode is None:
                _kill_group(proc)
                await proc.wait()


def raise_if_cancelling() -> None:
    """Re-raise a cancel that was lost on the way out of a stream.

    Unwatching cancels the task; but a cancel can be swallowed before it reaches the loop: 3.11's
    `asyncio.wait_for` returns a result that was ready at the same moment, and a stream's cleanup
    may raise an ordinary error in place of the CancelledError (caught as a failed stream). A
    retry loop would then go on for good, for nobody: call this where such a loop resumes."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
