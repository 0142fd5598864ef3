"""`gpuws shell`: a real tmux session on the demo host survives a killed SSH connection, and the
terminal attaches to it again by itself."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gpuws.app.desktop import ShellSession
from gpuws.app.targets import open_target
from gpuws.cli.main import main
from gpuws.core.paths import data_dir
from gpuws.remote.connection import ReconnectPolicy
from gpuws.sim.server import kill_leftovers
from tests.support.waiting import until

pytestmark = pytest.mark.slow
FAST_RETRY = ReconnectPolicy(base_delay=0.2, max_delay=1.0, max_retries=30)


@pytest.fixture
def demo_state(isolated_home: Path) -> Iterator[Path]:
    assert shutil.which("tmux"), "install tmux (scripts/install-deps.sh test)"
    state = data_dir() / "demo-host"
    try:
        yield state
    finally:
        kill_leftovers(state)


def test_marker_survives_a_killed_connection(demo_state: Path) -> None:
    async def scenario() -> None:
        async with open_target("demo", reconnect=FAST_RETRY) as conn:
            output: list[bytes] = []
            notices: list[str] = []
            keys: asyncio.Queue[bytes] = asyncio.Queue()

            async def keyboard() -> AsyncIterator[bytes]:
                while data := await keys.get():
                    yield data

            session = ShellSession(conn, output=output.append, notice=notices.append, size=(100, 30))
            running = asyncio.create_task(session.run(keyboard()))
            await until(lambda: session.attaches == 1 and output, 60, what="the first attach")
            keys.put_nowait(b"echo SURVIVES-$((6*7))\r")
            await until(lambda: b"SURVIVES-42" in b"".join(output), 60, what="the marker")
            assert session.tmux is True

            seen = len(output)
            (await conn.ssh()).abort()  # the connection is killed under the terminal
            await until(lambda: session.attaches == 2, 60, what="the attach after the drop")
            # tmux redraws the same session's screen: the marker is still on it.
            await until(lambda: b"SURVIVES-42" in b"".join(output[seen:]), 60, what="the marker after the drop")
            assert any("attaching again" in n for n in notices)

            keys.put_nowait(b"\x02d")  # tmux: detach; the session lives on
            assert await asyncio.wait_for(running, 30) == 0

    asyncio.run(scenario())
    # Still there for the next terminal (and for a script): the window runs its shell.
    assert main(["shell", "demo", "--", "tmux", "display", "-p", "ok"]) == 0
    assert main(["shell", "demo", "--list", "--json"]) == 0


def test_shell_command_runs_next_to_the_session(demo_state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["shell", "demo", "--", "tmux", "display", "-p", "ok"]) == 0
    assert capsys.readouterr().out == "ok\n"
    assert main(["shell", "demo", "--list", "--json"]) == 0
    listed = capsys.readouterr().out
    assert '"session": "gpuws"' in listed and '"index": 0' in listed
