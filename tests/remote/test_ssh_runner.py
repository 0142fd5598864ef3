"""SshRunner against the real sshd: quoting, I/O, and no process left behind on the host."""

from __future__ import annotations

import asyncio
import shlex
import time
from pathlib import Path

import pytest

from gpuws.core.runner import CommandTimeout
from gpuws.remote.connection import HostConnection
from gpuws.remote.ssh_runner import RemoteCommandError, remote_command_line
from tests.remote.helpers import key_profile, remote_processes, trust, wait_gone
from tests.support.sshd import SshdServer

pytestmark = pytest.mark.sshd

# A child shell that starts a grandchild: killing only the direct child would leave `sleep`.
SLEEPER = "sleep {n} & sleep {n}; echo never"


async def wait_running(pattern: str, count: int, timeout: float = 15.0) -> int:
    """How many processes match `pattern`, polled until `count` do or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while len(found := remote_processes(pattern)) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return len(found)


def test_command_line_quotes_every_argument() -> None:
    line = remote_command_line(["echo", "$(id)", "a'b"], env={"CUDA_VISIBLE_DEVICES": "0;reboot"})
    words = shlex.split(line)
    assert words[:3] == ["exec", "sh", "-c"]
    assert words[4:] == ["gpuws-run", "env", "CUDA_VISIBLE_DEVICES=0;reboot", "echo", "$(id)", "a'b"]
    with pytest.raises(RemoteCommandError):
        remote_command_line(["true"], env={"A;B": "x"})
    with pytest.raises(RemoteCommandError):
        remote_command_line([])


async def test_input_env_exit_status_and_stderr(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd)) as conn:
        result = await conn.runner.run(
            ["sh", "-c", 'read -r line; echo "$line:$GPUWS_X"; echo oops >&2; exit 3'],
            input="hello\n", env={"GPUWS_X": "$(not run)"},
        )
    assert (result.exit_status, result.stdout, result.stderr) == (3, "hello:$(not run)\n", "oops\n")


async def test_many_commands_multiplexed_on_one_connection(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd)) as conn:
        results = await asyncio.gather(*(conn.runner.run(["echo", str(i)]) for i in range(20)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(20)]


async def test_timeout_kills_the_whole_remote_group(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd)) as conn:
        with pytest.raises(CommandTimeout):
            await conn.runner.run(["sh", "-c", SLEEPER.format(n=311)], timeout=1)
        assert wait_gone("sleep 311") == []


async def test_cancel_kills_the_whole_remote_group(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd)) as conn:
        task = asyncio.ensure_future(conn.runner.run(["sh", "-c", SLEEPER.format(n=312)]))
        # Really running before the cancel (polled: the start takes longer on a busy machine).
        assert await wait_running("^sleep 312$", 2) == 2
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert wait_gone("sleep 312") == []
        assert (await conn.runner.run(["true"])).ok  # the connection is still fine


async def test_stream_yields_lines_and_stopping_it_kills_the_group(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd)) as conn:
        lines = [line async for line in conn.runner.stream(["printf", "a\\nb b\\n\\nc"])]
        assert lines == ["a", "b b", "", "c"]
        script = "sleep 313 & i=0; while :; do i=$((i+1)); echo $i; echo noise >&2; sleep 0.05; done"
        seen: list[str] = []
        stream = conn.runner.stream(["sh", "-c", script])
        async for line in stream:
            seen.append(line)
            if len(seen) == 5:
                break
        await stream.aclose()  # type: ignore[attr-defined]
        assert seen == ["1", "2", "3", "4", "5"]
        assert wait_gone("sleep 313") == []


async def test_dropped_connection_leaves_no_orphans(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    conn = HostConnection(key_profile(sshd))
    await conn.connect()
    try:
        task = asyncio.ensure_future(conn.runner.run(["sh", "-c", SLEEPER.format(n=314)]))
        assert await wait_running("^sleep 314$", 2) == 2
        sshd.kill_sessions()  # the link dies: no one can send a kill any more
        assert await asyncio.to_thread(wait_gone, "sleep 314", 5.0) == []  # the watchdog did it
        with pytest.raises(RemoteCommandError, match="lost"):
            await task
    finally:
        await conn.close()
