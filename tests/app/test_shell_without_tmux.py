"""`gpuws shell` on a host without tmux (a real OpenSSH sshd whose PATH has no tmux): a plain shell and
a clear warning that its work will not survive a drop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gpuws.app.desktop import ShellSession, run_in_shell
from gpuws.core.desktop import NO_TMUX_WARNING, DesktopError
from gpuws.remote.connection import HostConnection
from gpuws.sim.server import path_without
from tests.remote.helpers import key_profile, trust
from tests.support.sshd import SshdServer


@pytest.fixture
def sshd_without_tmux(tmp_path: Path) -> Iterator[SshdServer]:
    farm = path_without(frozenset({"tmux"}), tmp_path / "path-without-tmux")
    server = SshdServer(tmp_path / "sshd", env={"PATH": str(farm)}, clean_login=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_plain_shell_with_a_warning(sshd_without_tmux: SshdServer, isolated_home: Path) -> None:
    trust(sshd_without_tmux, isolated_home)

    async def scenario() -> None:
        async with HostConnection(key_profile(sshd_without_tmux)) as conn:
            with pytest.raises(DesktopError, match="tmux is not installed"):
                await run_in_shell(conn, ["true"])
            output: list[bytes] = []
            notices: list[str] = []
            keys: asyncio.Queue[bytes] = asyncio.Queue()

            async def keyboard() -> AsyncIterator[bytes]:
                while data := await keys.get():
                    yield data

            session = ShellSession(conn, output=output.append, notice=notices.append)
            running = asyncio.create_task(session.run(keyboard()))
            keys.put_nowait(b"echo PLAIN-$((1+1))\r")
            async with asyncio.timeout(60):
                while b"PLAIN-2" not in b"".join(output):
                    await asyncio.sleep(0.05)
            keys.put_nowait(b"exit\r")
            assert await asyncio.wait_for(running, 30) == 0
            assert session.tmux is False and notices[0] == NO_TMUX_WARNING
            assert "will not survive a dropped connection" in NO_TMUX_WARNING

    asyncio.run(scenario())
