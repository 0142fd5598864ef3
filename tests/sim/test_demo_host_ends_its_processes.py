"""Issue 36 item 9: `gpuws demo-host` ends every process it started when it stops.

A real `gpuws demo-host` process; on it, through real SSH, what gpuws starts on a host: the
desktop (the desktop agent's Xvnc and window manager), the shell's tmux session, Jupyter and
TensorBoard (both the way `gpuws.remote.jupyter` starts them: `setsid nohup`). Then the host is
stopped by SIGTERM, by SIGINT, or by its parent's death, and no process it started may be left.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from gpuws.remote.desktop import agent_source
from gpuws.remote.jupyter import START_SCRIPT
from gpuws.sim.server import DemoHostInfo, kill_leftovers, leftover_pids

# x-display: Xvnc takes the first free X display number on the machine; one at a time.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("x-display")]
REPO = Path(__file__).resolve().parents[2]
REAL_PARTS = ("Xvnc", "vncpasswd", "openbox", "tmux")

# The parent a demo host dies with: starts it (stdout passed through), writes its pid, waits.
PARENT = r"""
import pathlib, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-m", "gpuws", "demo-host", "--state-dir", sys.argv[1]],
                         stderr=subprocess.DEVNULL)
pathlib.Path(sys.argv[2]).write_text(str(child.pid))
time.sleep(3600)
"""

# A stand-in for TensorBoard (not installed on the test machine): a server that runs until killed.
TENSORBOARD = f"""#!/bin/sh
exec "{sys.executable}" -c 'import time
while True: time.sleep(60)' "$@"
"""


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its reaper."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] not in ("Z", "X")


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    missing = [name for name in REAL_PARTS if shutil.which(name) is None]
    assert not missing, f"install the test packages (scripts/install-deps.sh test): missing {missing}"
    state = tmp_path / "demo"
    (state / "bin").mkdir(parents=True)
    (state / "bin" / "tensorboard").write_text(TENSORBOARD)
    (state / "bin" / "tensorboard").chmod(0o755)
    try:
        yield state
    finally:
        kill_leftovers(state)  # whatever a failing run left


def _start(state: Path, *, via_parent: bool) -> tuple[subprocess.Popen[str], int, DemoHostInfo]:
    """The demo host, started directly or by a parent process; (the process we hold, the demo
    host's pid, how to reach it)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if via_parent:
        pid_file = state.parent / "demo.pid"
        proc = subprocess.Popen([sys.executable, "-c", PARENT, str(state), str(pid_file)], stdout=subprocess.PIPE,
                                text=True, env=env)
    else:
        proc = subprocess.Popen([sys.executable, "-m", "gpuws", "demo-host", "--state-dir", str(state)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "the demo host did not start"
    info = DemoHostInfo(**{k: v for k, v in json.loads(line).items() if k != "simulated"})
    host_pid = int(pid_file.read_text()) if via_parent else proc.pid
    return proc, host_pid, info


async def _start_everything(info: DemoHostInfo) -> None:
    known = asyncssh.import_known_hosts(info.known_hosts_line + "\n")
    async with asyncssh.connect(info.host, info.port, username=info.user, password=info.password,
                                known_hosts=known, client_keys=None, agent_path=None) as conn:
        desktop = await conn.run(f"python3 -c {_quote(agent_source())} start --geometry 800x600",
                                 input="secret-pw\n", check=True)
        assert '"display"' in str(desktop.stdout), desktop.stdout
        await conn.run("tmux new-session -d -s gpuws", check=True)  # what `gpuws shell` makes
        await conn.run(f"sh -c {_quote(START_SCRIPT)} gpuws-jupyter . jupyter lab --port=0 --no-browser",
                       input="token\n", check=True)
        await conn.run(f"sh -c {_quote(START_SCRIPT)} gpuws-tensorboard . tensorboard --logdir=.",
                       input="\n", check=True)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _started_parts(state: Path) -> dict[str, int]:
    """The processes the demo host's commands left running, by what they are (waits for them)."""
    found: dict[str, int] = {}
    for _ in range(300):
        for pid in leftover_pids(state):
            if not _alive(pid):
                continue
            comm, cmd = _comm(pid), _cmdline(pid)
            if comm == "Xvnc":
                found["Xvnc"] = pid
            elif comm == "openbox":
                found["window manager"] = pid
            elif comm.startswith("tmux"):
                found["tmux"] = pid
            elif b"gpuws.sim.jupyter" in cmd:
                found["Jupyter"] = pid
            elif b"--logdir=" in cmd:
                found["TensorBoard"] = pid
        if len(found) == 5:
            break
        time.sleep(0.1)
    return found


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "its parent's death"])
def test_the_demo_host_ends_everything_it_started(state: Path, how: str) -> None:
    # Found: after SIGTERM to `gpuws demo-host`, its Xvnc, openbox, tmux and Jupyter kept running.
    proc, host_pid, info = _start(state, via_parent=how == "its parent's death")
    try:
        asyncio.run(asyncio.wait_for(_start_everything(info), 120))
        parts = _started_parts(state)
        assert set(parts) == {"Xvnc", "window manager", "tmux", "Jupyter", "TensorBoard"}, parts
        if how == "its parent's death":
            proc.kill()  # SIGKILL: the parent gets no chance to pass anything on
        else:
            proc.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGINT)
        proc.wait(60)
        for _ in range(600):  # the host stops, then ends what it started (SIGTERM, SIGKILL after 3 s)
            if not _alive(host_pid):
                break
            time.sleep(0.1)
        assert not _alive(host_pid), "the demo host did not stop"
        left = {what: pid for what, pid in parts.items() if _alive(pid)}
        assert left == {}, f"still running after the demo host stopped ({how})"
        assert [pid for pid in leftover_pids(state) if _alive(pid)] == []
    finally:
        if _alive(host_pid):
            os.kill(host_pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
