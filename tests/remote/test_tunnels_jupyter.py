"""The Jupyter preset through a real sshd: find or start a server, log in through the tunnel.

The host's `jupyter` is a small stand-in (Jupyter itself is not installed in the test
environment) that behaves as the real one does for what gpuws uses: `server list --json` lists
running servers one JSON object a line, and `lab --port=P` serves on 127.0.0.1:P, accepting only
requests that carry the token it got from `JUPYTER_TOKEN`.
"""

from __future__ import annotations

import asyncio
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
from tests.support.sshd import SshdServer, free_port

pytestmark = pytest.mark.sshd

FAKE_JUPYTER = r'''
import http.server, json, os, pathlib, sys, urllib.parse
runtime = pathlib.Path(os.environ["GPUWS_SIM_STATE"]) / "jupyter-runtime"
runtime.mkdir(exist_ok=True)
args = sys.argv[1:]
if args[:2] == ["server", "list"]:
    print("Currently running servers:", file=sys.stderr)
    for f in sorted(runtime.glob("*.json")):
        print(f.read_text())
    sys.exit(0)
if args[:1] != ["lab"]:
    sys.exit(0)
port = int(next(a for a in args if a.startswith("--port=")).split("=")[1])
token = os.environ.get("JUPYTER_TOKEN", "")
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        ok = query.get("token") == [token] and token
        self.send_response(200 if ok else 403)
        self.end_headers()
        self.wfile.write(b"fake jupyter ok" if ok else b"forbidden")
    def log_message(self, *a):
        pass
server = http.server.HTTPServer(("127.0.0.1", port), Handler)
info = {"port": port, "token": "", "base_url": "/", "root_dir": os.getcwd(), "pid": os.getpid()}
(runtime / f"{os.getpid()}.json").write_text(json.dumps(info))
server.serve_forever()
'''


def install_fake_jupyter(bin_dir: Path) -> None:
    script = bin_dir / "jupyter"
    script.write_text(f"#!{sys.executable}\n{FAKE_JUPYTER}")
    script.chmod(0o755)
    (bin_dir / "jupyter-lab").symlink_to(script)


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
                assert await asyncio.to_thread(get, url) == (200, "fake jupyter ok")
                bare = f"http://127.0.0.1:{tunnel.local_port}/"
                assert (await asyncio.to_thread(get, bare))[0] == 403

            # It outlived the channel that started it, and is found (not started) next time.
            again, started_again = await find_or_start(conn.runner)
            assert not started_again and again.port == server.port
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
