"""Find a running Jupyter server on the host, or start one detached, for the Jupyter tunnel.

Finding: `jupyter server list --json` (jupyter_server, Lab 3+), then `jupyter notebook list
--json` (classic). Starting: a new token is generated here and handed to the server through
stdin and the `JUPYTER_TOKEN` environment variable, so it never appears in a command line on
the host (`ps`) or in any log. The server is started with `setsid nohup` so it outlives the SSH
channel (our runner kills the channel's process group when the channel closes), on a free
loopback port of the host: it is reachable only through the tunnel.
"""

from __future__ import annotations

import asyncio
import secrets
import time

from gpuws.core.errors import GpuwsError
from gpuws.core.runner import CommandRunner, CommandTimeout
from gpuws.core.tunnels import JupyterServer, parse_jupyter_list


class JupyterError(GpuwsError):
    """No Jupyter server could be found or started on the host."""


LIST_COMMANDS = (["jupyter", "server", "list", "--json"], ["jupyter", "notebook", "list", "--json"])
FREE_PORT_CODE = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
# $1: the directory to serve; the rest: the jupyter command. The token arrives on stdin.
START_SCRIPT = r"""IFS= read -r JUPYTER_TOKEN || exit 90
export JUPYTER_TOKEN
cd "$1" || exit 91
shift
log="${TMPDIR:-/tmp}/$0-$(id -u).log"
if command -v setsid >/dev/null 2>&1; then
  setsid nohup "$@" >"$log" 2>&1 </dev/null &
else
  nohup "$@" >"$log" 2>&1 </dev/null &
fi
echo "$!"
"""
FLAVOURS = (("jupyter-lab", "lab"), ("jupyter-notebook", "notebook"), ("jupyter-server", "server"))


async def find_servers(runner: CommandRunner, timeout: float = 30.0) -> list[JupyterServer]:
    """Jupyter servers the host's user is running (empty when none, or Jupyter is not installed)."""
    found: list[JupyterServer] = []
    for argv in LIST_COMMANDS:
        try:
            result = await runner.run(argv, timeout=timeout)
        except (CommandTimeout, OSError):
            continue
        for server in parse_jupyter_list(result.stdout):
            if all(s.port != server.port for s in found):
                found.append(server)
    return found


async def _flavour(runner: CommandRunner) -> str:
    """The `jupyter` subcommand to start: lab, else notebook, else server."""
    for program, sub in FLAVOURS:
        result = await runner.run(["sh", "-c", 'command -v "$1"', "gpuws-which", program], timeout=30)
        if result.ok and result.stdout.strip():
            return sub
    raise JupyterError("Jupyter is not installed on the host (pip install jupyterlab there, or start it yourself)")


async def free_remote_port(runner: CommandRunner) -> int:
    """A TCP port nobody listens on, on the host's loopback (asked of the host's python3)."""
    result = await runner.run(["python3", "-c", FREE_PORT_CODE], timeout=30)
    text = result.stdout.strip()
    if not result.ok or not text.isdigit():
        raise JupyterError("could not find a free port on the host (is python3 installed there?)")
    return int(text)


async def start_server(
    runner: CommandRunner,
    *,
    root_dir: str = "~",
    port: int | None = None,
    timeout: float = 60.0,
) -> JupyterServer:
    """Start Jupyter detached on the host's loopback with a fresh token; wait until it is listed."""
    flavour = await _flavour(runner)
    port = port or await free_remote_port(runner)
    token = secrets.token_hex(24)
    argv = [
        "sh", "-c", START_SCRIPT, "gpuws-jupyter", _host_dir(root_dir),
        "jupyter", flavour, "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--port-retries=0",
    ]
    result = await runner.run(argv, input=token + "\n", timeout=30)
    if not result.ok:
        raise JupyterError(f"could not start Jupyter on the host: {result.stderr.strip() or result.exit_status}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for server in await find_servers(runner):
            if server.port == port:
                # Our token, when the list hides it (older servers list "" for env tokens).
                if server.token:
                    return server
                return JupyterServer(port, token, server.base_url, server.root_dir, server.pid)
        await asyncio.sleep(1.0)
    raise JupyterError(f"Jupyter did not come up on the host's port {port} within {timeout:g} s "
                       "(see ${TMPDIR:-/tmp}/gpuws-jupyter-UID.log there)")


def _host_dir(path: str) -> str:
    """A directory argument for the host: commands start in the login directory, so "~" is "."."""
    if path in ("", "~", "~/"):
        return "."
    return path[2:] if path.startswith("~/") else path


async def start_tensorboard(runner: CommandRunner, logdir: str, port: int = 6006) -> None:
    """Start `tensorboard --logdir LOGDIR` detached on the host's loopback `port`."""
    check = await runner.run(["sh", "-c", 'command -v tensorboard'], timeout=30)
    if not check.ok or not check.stdout.strip():
        raise JupyterError("TensorBoard is not installed on the host (pip install tensorboard there)")
    argv = ["sh", "-c", START_SCRIPT, "gpuws-tensorboard", ".",
            "tensorboard", f"--logdir={_host_dir(logdir)}", "--host=127.0.0.1", f"--port={port}"]
    result = await runner.run(argv, input="\n", timeout=30)  # no token: an empty line for `read`
    if not result.ok:
        raise JupyterError(f"could not start TensorBoard on the host: {result.stderr.strip() or result.exit_status}")


async def find_or_start(
    runner: CommandRunner, *, start: bool = True, root_dir: str = "~"
) -> tuple[JupyterServer, bool]:
    """A running server (the first listed), or a new one if `start`; returns (server, started)."""
    servers = await find_servers(runner)
    if servers:
        return servers[0], False
    if not start:
        raise JupyterError("no Jupyter server is running on the host (use --start to start one)")
    return await start_server(runner, root_dir=root_dir), True
