"""Remote output is bounded: a command writing past its cap is stopped with an error naming the host
and the command, for whole outputs and for streamed lines (issue 13), against a real sshd."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.remote.connection import HostConnection
from gpuws.remote.ssh_runner import DEFAULT_MAX_LINE, DEFAULT_MAX_OUTPUT, RemoteOutputTooLarge, SshRunner
from tests.remote.helpers import key_profile, remote_processes, trust
from tests.support.sshd import SshdServer

pytestmark = pytest.mark.sshd

FLOOD = ["sh", "-c", "yes gpuws-flood-output | head -c 8000000; sleep 0"]


async def test_output_past_the_cap_stops_the_command_and_names_host_and_command(
    sshd: SshdServer, isolated_home: Path
) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd, name="gpu1")) as conn:
        runner = SshRunner(conn, max_output=1024 * 1024)
        with pytest.raises(RemoteOutputTooLarge) as info:
            await runner.run(FLOOD)
        message = str(info.value)
        assert "sh on gpu1" in message and "1 MiB" in message and "\n" not in message
        assert (await runner.run(["echo", "still here"])).stdout == "still here\n"  # the connection lives
    assert remote_processes("gpuws-flood-output") == []


async def test_a_streamed_line_past_the_cap_is_an_error(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd, name="gpu1")) as conn:
        runner = SshRunner(conn, max_line=64 * 1024)
        lines: list[str] = []
        with pytest.raises(RemoteOutputTooLarge, match="a line longer than 65536 characters"):
            async for line in runner.stream(["sh", "-c", "echo first; head -c 1000000 /dev/zero | tr '\\0' x"]):
                lines.append(line)
        assert lines == ["first"]


def test_default_caps() -> None:
    assert DEFAULT_MAX_OUTPUT == 64 * 1024 * 1024 and DEFAULT_MAX_LINE == 1024 * 1024
