"""`SshRunner`: a `CommandRunner` over a `HostConnection`, which never leaves orphans behind.

Why this design. sshd runs each exec request as `$SHELL -c STRING` in a new session, so that
shell is a process group leader. We send `exec sh -c WRAPPER gpuws-run ARGV...` (each argument
through `shlex.quote`; WRAPPER is our constant): `exec` keeps the pid, so the wrapper is still the
group leader, and everything the command starts is in that group unless it leaves on purpose.
The wrapper reports the group id as the first stderr line and then `exec`s the command.

- Cancel or timeout: we run `kill -s KILL -- -PGID` on a second channel of the same connection.
  Closing the channel alone would not do it: without a pty, sshd sends no signal, so `sleep 300`
  in a child shell would outlive us.
- Connection drop: nobody is left to send that kill, so the wrapper leaves a tiny watchdog behind
  that polls, once a second, whether its sshd parent still exists, and kills the group once it
  is gone. It exits with the command and inherits no output pipe, so the channel closes as soon
  as the command exits.

When the wrapper is not a group leader (an unusual server), it reports only its own pid and we
kill just that, never a group we do not own.

Output is bounded by one byte budget per connection (`gpuws.remote.budget.OutputBudget`, 64 MiB by
default, far above any real `nvidia-smi -q -x`): every remote read (a command's stdout and stderr, a stream's
pending line and stderr, the first stderr line) takes its bytes from it as it reads them and gives
them back when done, so the bytes held at once for one host stay under the cap whatever runs
concurrently and across reconnects. A streamed line is also cut at `max_line` bytes (1 MiB), and
a command whose answer is known to be small runs under its own tighter `max_output` (a child of
the connection's budget), so a flood costs a few MiB there, not the whole budget.
Output is read as bytes and decoded afterwards (UTF-8, invalid bytes replaced), so the cap is in
bytes, not characters. Past a cap the command is stopped and `RemoteOutputTooLarge` names the
host and the command, so a hostile or broken host cannot make the client read without end.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncssh

from gpuws.core.errors import GpuwsError
from gpuws.core.runner import CommandResult, CommandTimeout
from gpuws.core.terminal import printable
from gpuws.remote.budget import DEFAULT_MAX_LINE, DEFAULT_MAX_OUTPUT, OutputBudget, size_text

if TYPE_CHECKING:
    from gpuws.remote.connection import HostConnection

WRAPPER = r"""pgid=$$
if [ -r "/proc/$$/stat" ]; then read -r _ _ _ _ pgid _ < "/proc/$$/stat"; fi
if [ "$pgid" = "$$" ]; then
  printf 'gpuws-pgid %s\n' "$$" >&2
  if [ -d "/proc/$PPID" ]; then
    ( while [ -d "/proc/$$" ]; do
        [ -d "/proc/$PPID" ] || { kill -s KILL -- "-$$"; exit 0; }
        sleep 1
      done ) </dev/null >/dev/null 2>&1 &
  fi
else
  printf 'gpuws-pid %s\n' "$$" >&2
fi
exec "$@"
"""
_IDENT = re.compile(r"gpuws-(pgid|pid) (\d+)")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STDERR_TAIL = 64 * 1024  # bytes of a stream's stderr kept for error messages
_IDENT_MAX = 4096  # bytes read for the wrapper's first stderr line
_CHUNK = 256 * 1024


class RemoteCommandError(GpuwsError):
    """A command could not be started, or its channel died before it finished."""


class RemoteOutputTooLarge(RemoteCommandError):
    """A command wrote more than its cap (whole output, or one streamed line); it was stopped."""


class _Collected:
    """One stream of a command as read: its chunks (a list, never one growing buffer, which the
    allocator would copy as it grows and keep the old copies of), and the bytes they hold of the
    connection's budget until `release`."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.held = 0
        self.budget: OutputBudget | None = None

    def add(self, chunk: bytes, budget: OutputBudget, too_large: Callable[[], Exception]) -> None:
        """Keep `chunk` if the budget has room for it, else drop everything and raise `too_large()`."""
        if not chunk:
            return
        self.budget = budget
        if not budget.take(len(chunk)):
            self.chunks.clear()  # dropped now, not when the traceback goes
            raise too_large()
        self.held += len(chunk)
        self.chunks.append(chunk)

    def text(self) -> str:
        """The output decoded (UTF-8, invalid bytes replaced); the chunks are let go first."""
        data = b"".join(self.chunks)
        self.chunks.clear()
        return _decode(data)

    def release(self) -> None:
        """Give the bytes back to the budget (the decoded text now belongs to the caller)."""
        self.chunks.clear()
        if self.budget is not None:
            self.budget.give(self.held)
        self.held = 0


def _decode(data: bytes | bytearray) -> str:
    return data.decode("utf-8", "replace")


def remote_command_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The exact string sent to sshd for argv: every argument quoted, never interpreted."""
    if not argv:
        raise RemoteCommandError("empty command")
    prefix: list[str] = []
    if env:
        for name, value in env.items():
            if not _ENV_NAME.fullmatch(name):
                raise RemoteCommandError(f"invalid environment variable name {name!r}")
            prefix.append(f"{name}={value}")
        prefix.insert(0, "env")  # sshd only accepts AcceptEnv names, so env(1) sets them
    words = ["exec", "sh", "-c", shlex.quote(WRAPPER), "gpuws-run"]
    return " ".join(words + [shlex.quote(str(arg)) for arg in [*prefix, *argv]])


@dataclass
class _Remote:
    """A started remote command and how to kill it."""

    process: asyncssh.SSHClientProcess[bytes]
    argv: tuple[str, ...]
    kill_argv: list[str] | None = None
    stderr_head: bytes = b""  # stderr read with the first line that is not ours

    async def read_ident(self) -> None:
        # Read at most _IDENT_MAX bytes for the wrapper's line (readline() would buffer a line of
        # any length); what follows it, or a first line that is not ours, is kept as stderr.
        head = b""
        while b"\n" not in head and len(head) < _IDENT_MAX:
            chunk = await self.process.stderr.read(_IDENT_MAX - len(head))
            if not chunk:
                break
            head += chunk
        line, newline, rest = head.partition(b"\n")
        match = _IDENT.fullmatch(_decode(line).strip()) if newline else None
        if match is None:
            self.stderr_head = head
            return
        self.stderr_head = rest
        if match.group(1) == "pgid":
            self.kill_argv = ["kill", "-s", "KILL", "--", f"-{match.group(2)}"]
        else:
            self.kill_argv = ["kill", "-s", "KILL", match.group(2)]

    @property
    def finished(self) -> bool:
        return self.process.exit_status is not None or self.process.exit_signal is not None


class SshRunner:
    """Runs argv on the connection's host; cancel or timeout kills the remote process group."""

    def __init__(self, connection: HostConnection, *, reconnect_wait: float = 30.0,
                 max_output: int = DEFAULT_MAX_OUTPUT, max_line: int = DEFAULT_MAX_LINE) -> None:
        self._connection = connection
        self._reconnect_wait = reconnect_wait
        self.budget = OutputBudget(max_output)
        self.max_line = max_line

    @property
    def max_output(self) -> int:
        """The byte budget of this connection's output held at once."""
        return self.budget.limit

    def _too_large(self, argv: Sequence[str], what: str, cap: int) -> RemoteOutputTooLarge:
        command = printable(argv[0], 80) if argv else "?"
        return RemoteOutputTooLarge(
            f"{command} on {printable(self._connection.profile.name)} wrote {what} longer than "
            f"{size_text(cap)}; it was stopped"
        )

    async def _read_capped(self, reader: asyncssh.SSHReader[bytes], argv: Sequence[str], what: str,
                           into: _Collected, budget: OutputBudget) -> None:
        """All of `reader` into `into`, its bytes taken from `budget` as they arrive (`into` gives
        them back once the caller is done)."""
        while chunk := await reader.read(_CHUNK):
            into.add(chunk, budget, lambda: self._too_large(argv, what, budget.refused_by))

    async def _start(self, argv: Sequence[str], input: str | None,
                     env: Mapping[str, str] | None) -> _Remote:
        command = remote_command_line(argv, env)
        for attempt in (1, 2):
            conn = await self._connection.ssh(timeout=self._reconnect_wait)
            try:
                process = await conn.create_process(command, encoding=None)
                break
            except (asyncssh.ChannelOpenError, asyncssh.ConnectionLost, asyncssh.DisconnectError) as exc:
                # The link may have dropped between ssh() and the channel open: wait out the
                # reconnect once. Nothing ran yet, so retrying cannot run the command twice.
                if attempt == 1 and await _closes_soon(conn):
                    continue
                raise RemoteCommandError(f"cannot start {argv[0]} on {self._connection.profile.name}: "
                                         f"{exc.reason}") from None
        remote = _Remote(process, tuple(argv))
        if input is not None:
            process.stdin.write(input.encode("utf-8"))
        process.stdin.write_eof()
        try:
            await remote.read_ident()
        except BaseException:
            await asyncio.shield(self._stop(remote))
            raise
        return remote

    async def _stop(self, remote: _Remote) -> None:
        """Kill the remote process group (best effort: the host may be gone already)."""
        if not remote.finished and remote.kill_argv is not None:
            with contextlib.suppress(Exception):
                conn = await self._connection.ssh(timeout=2)
                await conn.run(shlex.join(remote.kill_argv), check=False, timeout=5)
        remote.process.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(remote.process.wait_closed(), 5)

    async def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int | None = None,
    ) -> CommandResult:
        """Run argv to its end; its stdout and stderr together stay under `max_output` bytes when
        given (else under the connection's budget), or `RemoteOutputTooLarge`."""
        remote: _Remote | None = None
        out, err = _Collected(), _Collected()
        budget = self.budget.child(max_output)
        try:
            async with asyncio.timeout(timeout):
                remote = await self._start(argv, input, env)
                err.add(remote.stderr_head, budget, lambda: self._too_large(argv, "an error output",
                                                                            budget.refused_by))
                readers = [asyncio.ensure_future(self._read_capped(remote.process.stdout, argv, "an output", out,
                                                                   budget)),
                           asyncio.ensure_future(self._read_capped(remote.process.stderr, argv, "an error output",
                                                                   err, budget))]
                try:
                    await asyncio.gather(*readers)
                finally:
                    for reader in readers:
                        reader.cancel()
                await remote.process.wait_closed()
                # Decoded only once the command is known to have ended (an exit status or a
                # signal): output cut short by a lost connection is dropped, never decoded.
                status = self._exit_status(remote)
                stdout, stderr = out.text(), err.text()
        except TimeoutError:
            if remote is not None:
                await asyncio.shield(self._stop(remote))
            raise CommandTimeout(f"{argv[0]} timed out after {timeout:g} s") from None
        except (asyncio.CancelledError, RemoteOutputTooLarge):
            # What was read is dropped before the (slow) kill, not held while it runs.
            out.release()
            err.release()
            if remote is not None:
                await asyncio.shield(self._stop(remote))
            raise
        except (asyncssh.ConnectionLost, asyncssh.DisconnectError):
            raise self._lost(argv) from None
        finally:
            out.release()
            err.release()
        return CommandResult(tuple(argv), status, stdout, stderr)

    def _exit_status(self, remote: _Remote) -> int:
        process = remote.process
        if process.exit_status is not None:
            return int(process.exit_status)
        if process.exit_signal is not None:
            signal_name = process.exit_signal[0]
            return -_SIGNALS.get(signal_name, 1)  # like subprocess: minus the signal number
        raise self._lost(remote.argv)

    def _lost(self, argv: Sequence[str]) -> RemoteCommandError:
        return RemoteCommandError(f"connection to {self._connection.profile.name} was lost while {argv[0]} ran")

    async def stream(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> AsyncIterator[str]:
        remote = await self._start(argv, input, env)
        budget = self.budget
        stderr_tail = bytearray(remote.stderr_head[-_STDERR_TAIL:])

        async def drain_stderr() -> None:
            # Unread stderr would fill the channel window and stall stdout too; only its tail is
            # kept, so its bytes come and go from the budget chunk by chunk.
            while chunk := await remote.process.stderr.read(_CHUNK):
                if not budget.take(len(chunk)):
                    continue  # the host's other output holds the budget: this chunk is dropped
                try:
                    stderr_tail[:] = (stderr_tail + chunk)[-_STDERR_TAIL:]
                finally:
                    budget.give(len(chunk))

        drainer = asyncio.get_running_loop().create_task(drain_stderr())
        pending = bytearray()
        held = 0  # bytes of `pending` taken from the budget
        try:
            try:
                # Lines are split here rather than with readline(), which would buffer a line
                # of any length; a partial line longer than max_line stops the command. The
                # pending bytes are held against the budget while they wait for their newline.
                while chunk := await remote.process.stdout.read(_CHUNK):
                    if not budget.take(len(chunk)):
                        raise self._too_large(argv, "an output", budget.refused_by)
                    held += len(chunk)
                    pending += chunk
                    *lines, rest = bytes(pending).split(b"\n")
                    pending[:] = rest
                    budget.give(held - len(pending))
                    held = len(pending)
                    del chunk, rest
                    for line in lines:
                        yield _decode(line).rstrip("\r")
                    lines.clear()
                    if len(pending) > self.max_line:
                        raise self._too_large(argv, "a line", self.max_line)
                if pending:
                    yield _decode(pending).rstrip("\r")
                await remote.process.wait_closed()
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError):
                raise self._lost(argv) from None
            self._exit_status(remote)  # raises when the connection died mid-stream
        finally:
            budget.give(held)
            pending.clear()
            drainer.cancel()
            if not remote.finished:
                await asyncio.shield(self._stop(remote))


async def _closes_soon(conn: asyncssh.SSHClientConnection, within: float = 1.0) -> bool:
    """Whether the connection is closing (a dropped link) rather than refusing one channel."""
    try:
        await asyncio.wait_for(conn.wait_closed(), within)
    except TimeoutError:
        return False
    return True


_SIGNALS = {"HUP": 1, "INT": 2, "QUIT": 3, "ABRT": 6, "KILL": 9, "SEGV": 11, "PIPE": 13, "ALRM": 14,
            "TERM": 15, "USR1": 10, "USR2": 12}
