"""`gpuws desktop` end to end through the demo host, with the real parts: Xvnc (TigerVNC), vncpasswd,
openbox, xsetroot, websockify + noVNC, a real VNC client (vncdotool) through the SSH tunnel."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core.desktop import SOFTWARE_GL_LABEL
from gpuws.core.models import SecretKind
from gpuws.core.paths import data_dir
from gpuws.core.secrets import SecretStore
from gpuws.sim.server import kill_leftovers, leftover_pids
from tests.support.vnc import capture, greeting, listen_addresses, vnc_auth

# x-display: Xvnc takes the first free X display number on the machine; one at a time (issue 27).
pytestmark = [pytest.mark.keyring, pytest.mark.slow, pytest.mark.xdist_group("x-display")]
REAL_PARTS = ("Xvnc", "vncpasswd", "openbox", "xsetroot", "websockify", "glxinfo", "tmux")
BLUE = (0x33, 0x66, 0xCC)


@pytest.fixture
def demo_state(isolated_home: Path) -> Iterator[Path]:
    """The demo host's state directory for this test; what it left running is killed afterwards."""
    missing = [name for name in REAL_PARTS if shutil.which(name) is None]
    assert not missing, f"install the test packages (scripts/install-deps.sh test): missing {missing}"
    state = data_dir() / "demo-host"
    try:
        yield state
    finally:
        kill_leftovers(state)


def _hold_desktop(*extra: str) -> tuple[subprocess.Popen[str], dict[str, object]]:
    """`gpuws desktop demo --viewer none --json` in the background; its first line."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuws", "desktop", "demo", "--viewer", "none", "--json", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(30)
        raise AssertionError(f"no first line; stderr: {proc.stderr.read() if proc.stderr else ''}")
    return proc, json.loads(line)


def _release(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out, err


def _live_xvnc(state: Path) -> list[int]:
    """The demo user's Xvnc processes still running (a zombie waiting for its reaper is gone)."""
    live = []
    for pid in leftover_pids(state):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        comm, status = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2]
        if comm == "Xvnc" and status != "Z":
            live.append(pid)
    return live


def _cmdlines() -> bytes:
    blobs = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                blobs.append((entry / "cmdline").read_bytes())
            except OSError:
                continue
    return b"\n".join(blobs)


def test_desktop_start_view_reuse_and_stop(demo_state: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["desktop", "demo", "--check", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["vnc_server"] and os.path.basename(found["vnc_server"]) == "Xvnc"
    assert found["virtualgl"] is True and "(SIMULATED)" in found["opengl_renderer"]
    assert {"gpu": 0, "name": "NVIDIA H100 80GB HBM3", "nvenc": False} in found["nvenc"]
    assert "H100 has no video encoder: streaming runs on the CPU" in found["labels"]
    assert found["desktop_session"] == "openbox" and found["install_command"] is None

    first, line = _hold_desktop("--geometry", "800x600")
    try:
        assert list(line) == ["url", "local_port", "display", "reused"]
        port, display = line["local_port"], line["display"]
        assert isinstance(port, int) and isinstance(display, int)
        assert line["url"] == f"vnc://127.0.0.1:{port}" and line["reused"] is False
        assert greeting(port).startswith(b"RFB 003.00")
        # Xvnc listens on the host's loopback only (127.0.0.1 is 0100007F in /proc/net/tcp).
        assert listen_addresses(5900 + display) == {"0100007F"}

        password = SecretStore().get("demo", SecretKind.VNC_PASSWORD)
        assert password and len(password) == 8
        wrong = ("x" if password[0] != "x" else "y") + password[1:]
        assert vnc_auth(port, wrong) == 1  # refused
        assert vnc_auth(port, password) == 0

        # The X display takes only clients with its key (other users of the host cannot open it).
        draw = ["xsetroot", "-display", f":{display}", "-solid", "#3366cc"]
        assert main(["shell", "demo", "--", "env", "-u", "XAUTHORITY", "HOME=/nonexistent", *draw]) != 0
        # Draw on the desktop through the host, then look at it through the tunnel with vncdotool.
        xauthority = demo_state / ".gpuws" / "desktop" / "Xauthority"
        assert main(["shell", "demo", "--", "env", f"XAUTHORITY={xauthority}", *draw]) == 0
        shot = tmp_path / "screen.png"
        capture(port, password, shot)
        from PIL import Image

        with Image.open(shot) as image:
            assert image.size == (800, 600)
            rgb = image.convert("RGB")
            assert rgb.getpixel((10, 10)) == BLUE and rgb.getpixel((790, 590)) == BLUE  # (the pointer is mid-screen)

        second, again = _hold_desktop()
        try:
            assert again["reused"] is True and again["display"] == display
            assert again["local_port"] != port  # a tunnel of its own, to the same desktop
            assert greeting(int(again["local_port"])).startswith(b"RFB 003.00")  # type: ignore[call-overload]
        finally:
            out2, err2 = _release(second)
        # The password never reaches a command line, an output or a log.
        assert password.encode() not in _cmdlines()
    finally:
        out1, err1 = _release(first)
    logs = b"".join(p.read_bytes() for p in Path(os.environ["GPUWS_CONFIG_DIR"]).rglob("*")
                    if p.is_file() and p.suffix in (".log", ".txt", ".json", ""))
    assert password.encode() not in logs
    assert password not in out1 + err1 + out2 + err2

    assert main(["desktop", "demo", "--stop", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"stopped": True}
    assert _live_xvnc(demo_state) == []


def test_novnc_answers_a_websocket_upgrade_through_the_tunnel(demo_state: Path) -> None:
    from gpuws.app import desktop
    from gpuws.app.targets import open_target

    async def scenario() -> None:
        async with open_target("demo") as conn:
            session = await desktop.open_desktop(conn, geometry="640x480")
            browser = await desktop.open_browser_tunnel(conn)
            try:
                page = await _http(browser.local_port or 0, "GET /vnc.html HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert page.startswith("HTTP/1.1 200") or page.startswith("HTTP/1.0 200")
                upgrade = await _http(browser.local_port or 0, (
                    "GET /websockify HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Protocol: binary\r\n\r\n"))
                assert upgrade.split("\r\n")[0].split()[1] == "101", upgrade
                assert "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in upgrade  # RFC 6455's accept for that key
            finally:
                await browser.close()
                await session.tunnel.close()
                assert await desktop.stop(conn) is True

    asyncio.run(scenario())
    assert _live_xvnc(demo_state) == []


async def _http(port: int, request: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request.encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    writer.close()
    return head.decode("latin-1")


def test_no_vnc_fault_shows_the_missing_server_path(demo_state: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GPUWS_SIM_FAULTS", "no-vnc:0")
    assert main(["desktop", "demo", "--check", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["vnc_server"] is None and "vnc_server" in found["missing"]
    assert "tigervnc-standalone-server" in found["install_command"]  # this machine is Debian
    assert main(["desktop", "demo", "--viewer", "none", "--json"]) == 1
    err = capsys.readouterr().err
    assert "no VNC server" in err and "--check" in err and "Traceback" not in err
    # --install is the user's yes, but never on the simulated host: that would install on this computer.
    assert main(["desktop", "demo", "--install"]) == 2
    assert "installs nothing here" in capsys.readouterr().err
    assert _live_xvnc(demo_state) == []


def test_software_gl_fault_shows_llvmpipe_honestly(demo_state: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GPUWS_SIM_FAULTS", "software-gl:0")
    assert main(["desktop", "demo", "--check"]) == 0
    out = capsys.readouterr().out
    assert "llvmpipe" in out and "VirtualGL:        no" in out
    assert f"warning: {SOFTWARE_GL_LABEL}" in out and "VirtualGL" in out.split(SOFTWARE_GL_LABEL)[1]
