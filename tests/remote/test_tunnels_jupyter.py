"""The Jupyter preset through a real sshd: find or start a server, log in through the tunnel.

The host's `jupyter` is the simulated host's stand-in (gpuws.sim.jupyter; Jupyter itself is not
installed in the test environment), which behaves as the real one does for what gpuws uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gpuws.core.tunnels import Preset, TunnelSpec
from gpuws.remote.connection import HostConnection
from gpuws.remote.jupyter import JupyterError, find_or_start
from gpuws.remote.tunnels import Tunnel
from tests.remote.helpers import key_profile, trust
from tests.support.sshd import REPO_ROOT, SshdServer, free_port

pytestmark = pytest.mark.sshd

def install_fake_jupyter(bin_dir: Path) -> None:
    """The simulated host's Jupyter (gpuws.sim.jupyter) as the host's `jupyter` and `jupyter-lab`."""
    for name, sub in (("jupyter", ""), ("jupyter-lab", " lab")):
        script = bin_dir / name
        command = f'exec "{sys.executable}" -m gpuws.sim.jupyter{sub} "$@"'
        script.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO_ROOT}" {command}\n')
        script.chmod(0o755)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), str(response.read().decode())
    except urllib.error.HTTPError as exc:
        return exc.code, ""


async def test_no_jupyter_on_the_host_is_a_clear_error(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd)) as conn:
        with pytest.raises(JupyterError, match="no Jupyter server is running"):
            await find_or_start(conn.runner, start=False)
        with pytest.raises(JupyterError, match="Jupyter is not installed on the host"):
            await find_or_start(conn.runner)


async def test_start_jupyter_and_open_it_through_the_tunnel(
    sshd: SshdServer, isolated_home: Path, tmp_path: Path
) -> None:
    trust(sshd, isolated_home)
    install_fake_jupyter(tmp_path / "simhost" / "bin")
    pid = None
    try:
        async with HostConnection(key_profile(sshd)) as conn:
            server, started = await find_or_start(conn.runner)
            pid = server.pid
            assert started and len(server.token) >= 32
            assert server.token not in repr(server)
            # The token never reached a command line on the host.
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
            assert server.token not in cmdline and f"--port={server.port}" in cmdline

            spec = TunnelSpec(remote_port=server.port, local_port=free_port(), preset=Preset.JUPYTER)
            async with Tunnel(conn, spec, token=server.token) as tunnel:
                await tunnel.wait_ready(10)
                url = server.url(tunnel.local_port or 0)
                assert url == tunnel.url
                assert server.token not in tunnel.display_url and "token=***" in tunnel.display_url
                status, page = await asyncio.to_thread(get, url)
                assert status == 200 and "<h1>JupyterLab</h1>" in page and "SIMULATED" in page
                bare = f"http://127.0.0.1:{tunnel.local_port}/"
                assert (await asyncio.to_thread(get, bare))[0] == 403

            # It outlived the channel that started it, and is found (not started) next time.
            again, started_again = await find_or_start(conn.runner)
            assert not started_again and again.port == server.port
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)


def test_the_cli_says_how_to_see_a_hidden_token(
    sshd: SshdServer, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gpuws tunnel NAME --preset jupyter` prints the URL with `token=***`; it says in the same
    breath that --show-token prints it, and with --show-token prints the real one."""
    import json
    import subprocess

    from gpuws.core.models import AuthMethod, HostProfile
    from gpuws.core.profiles import ProfileStore

    monkeypatch.setenv("HOME", str(isolated_home))
    trust(sshd, isolated_home)
    ProfileStore().add(HostProfile(name="rig", host="127.0.0.1", port=sshd.port, user=sshd.user, auth=AuthMethod.KEY,
                                   key_path=str(sshd.client_key)))
    install_fake_jupyter(tmp_path / "simhost" / "bin")
    env = {**os.environ, "HOME": str(isolated_home), "PYTHONPATH": str(REPO_ROOT)}
    pids: list[int] = []
    try:
        for extra in ([], ["--show-token"]):
            proc = subprocess.Popen(
                [sys.executable, "-m", "gpuws", "tunnel", "rig", "--preset", "jupyter", "--no-browser",
                 "--local", str(free_port()), *extra],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
            )
            assert proc.stdout is not None
            line = proc.stdout.readline()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
            assert line.startswith("Jupyter"), (line, err)
            if extra:
                assert "token=***" not in line and "token=" in line
                assert "--show-token" not in err
            else:
                assert "token=***" in line
                assert "--show-token prints the URL with it" in err
    finally:
        # The server the first run started outlives it (as a real one would): stop it.
        for entry in (tmp_path / "simhost" / "state" / "jupyter-runtime").glob("*.json"):
            pids.append(int(json.loads(entry.read_text())["pid"]))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
