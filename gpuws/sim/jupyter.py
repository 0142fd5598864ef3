"""A simulated Jupyter server for the simulated GPU host, so the demo's Jupyter tunnel works.

It answers what gpuws uses of the real `jupyter` command: `server list --json` (and
`notebook list --json`) lists running servers one JSON object a line, and `lab|notebook|server
--port=P` serves on 127.0.0.1:P, accepting only requests that carry the token from
`JUPYTER_TOKEN` (as real Jupyter does: `?token=` once, then a cookie). The page it serves says
plainly that it is a simulation. Servers register in `$GPUWS_SIM_STATE/jupyter-runtime/`.
"""

from __future__ import annotations

import html
import http.server
import json
import os
import secrets
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from gpuws.core.simulation import SIM_LABEL, SIM_STATE_ENV_VAR

COOKIE = "gpuws-sim-jupyter"
#: The pid of the demo host that started it: the server ends when that process does.
HOST_PID_ENV = "GPUWS_SIM_HOST_PID"
WATCH_INTERVAL_S = 1.0


def runtime_dir() -> Path:
    path = Path(os.environ.get(SIM_STATE_ENV_VAR, ".")) / "jupyter-runtime"
    path.mkdir(parents=True, exist_ok=True)
    return path


def is_simulated_jupyter(pid: int) -> bool:
    """Whether `pid` is a running simulated Jupyter (not some later process that reused its number)."""
    try:
        return b"gpuws.sim.jupyter" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _start_time(pid: int) -> str | None:
    """The process's start time (from /proc), None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _die_with_host(entry: Path) -> None:
    """End this server when the demo host that started it ends (killed, even with SIGKILL):
    it runs detached (setsid nohup), so nothing else would stop it."""
    text = os.environ.get(HOST_PID_ENV, "")
    if not text.isdigit():
        return
    host = int(text)
    born = _start_time(host)

    def watch() -> None:
        # The same process: alive, and not a later one that reused its number.
        while born is not None and _start_time(host) == born:
            time.sleep(WATCH_INTERVAL_S)
        entry.unlink(missing_ok=True)
        os._exit(0)

    threading.Thread(target=watch, name="die-with-demo-host", daemon=True).start()


def list_servers() -> list[dict[str, object]]:
    """Registered servers whose process is still alive (stale entries are removed)."""
    alive = []
    for entry in sorted(runtime_dir().glob("*.json")):
        try:
            info = json.loads(entry.read_text())
            running = is_simulated_jupyter(int(info["pid"]))
        except (ValueError, KeyError, TypeError):
            running = False
        if not running:
            entry.unlink(missing_ok=True)
            continue
        alive.append(info)
    return alive


def _page(root: Path) -> bytes:
    files = sorted(p.name for p in root.iterdir() if not p.name.startswith("."))[:50]
    items = "".join(f"<li>{html.escape(name)}</li>" for name in files) or "<li><em>(empty)</em></li>"
    return (
        "<!doctype html><html><head><title>JupyterLab (simulated)</title></head>"
        "<body style='font-family:sans-serif;margin:2em'>"
        f"<p style='background:#fde68a;padding:.5em'><b>{SIM_LABEL}</b>: this is the gpuws demo host's "
        "stand-in for JupyterLab, reached through a real SSH tunnel. A real host runs real Jupyter.</p>"
        f"<h1>JupyterLab</h1><h2>{html.escape(str(root))}</h2><ul>{items}</ul></body></html>"
    ).encode()


def serve(port: int, token: str, root: Path) -> None:
    session = secrets.token_hex(16)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            cookie_ok = f"{COOKIE}={session}" in (self.headers.get("Cookie") or "")
            token_ok = bool(token) and query.get("token") == [token]
            if not (token_ok or cookie_ok):
                self.send_response(403)
                self.end_headers()
                self.wfile.write(b"403 Forbidden: a token is required")
                return
            body = _page(root)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Set-Cookie", f"{COOKIE}={session}; HttpOnly; Path=/")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # never log request lines: they carry the token

    server = http.server.HTTPServer(("127.0.0.1", port), Handler)
    entry = runtime_dir() / f"jpserver-{os.getpid()}.json"
    # Like jupyter_server's runtime file: the token is listed to its owner only (mode 0600).
    info = {"port": port, "token": token, "base_url": "/", "root_dir": str(root), "pid": os.getpid(),
            "simulated": True}
    fd = os.open(entry, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(info))
    _die_with_host(entry)
    try:
        server.serve_forever()
    finally:
        entry.unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["server"], ["notebook"]) and args[1:2] == ["list"]:
        print("Currently running servers:", file=sys.stderr)
        for info in list_servers():
            print(json.dumps(info))
        return 0
    if args[:1] in (["lab"], ["notebook"], ["server"]):
        ports = [a.split("=", 1)[1] for a in args if a.startswith("--port=")]
        if not ports or not ports[0].isdigit():
            print("jupyter (simulated): --port=N is required", file=sys.stderr)
            return 2
        serve(int(ports[0]), os.environ.get("JUPYTER_TOKEN", ""), Path.cwd())
        return 0
    print(f"jupyter ({SIM_LABEL.lower()} stand-in): supports `server list --json` and `lab --port=N`", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
