"""The built-in VNC viewer against the demo host's real Xvnc (TigerVNC), through the SSH tunnel that
`gpuws desktop demo` holds: keys reach an xterm there, a click lands where it was aimed, the clipboard
goes both ways (xclip on the host), the remote screen follows the window (xdpyinfo on the host), a
wrong password is a clear error. The demo host runs its programs on this computer, so "on the host"
is a child process here with the desktop's DISPLAY and XAUTHORITY."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest

from gpuws.app.viewer import RfbAuthFailed, ViewerState
from gpuws.core.models import SecretKind
from gpuws.core.paths import data_dir
from gpuws.core.secrets import SecretStore
from gpuws.sim.server import kill_leftovers
from gpuws.ui.vnc.window import VncWindow

# x-display: Xvnc takes the first free X display number on the machine; one at a time (issue 27).
pytestmark = [pytest.mark.gui, pytest.mark.keyring, pytest.mark.slow, pytest.mark.xdist_group("x-display")]
HOST_TOOLS = ("Xvnc", "xterm", "xclip", "xdotool", "xdpyinfo", "openbox")
WAIT_MS = 60_000

TK_CLICKS = """
import sys, tkinter as tk
root = tk.Tk(); root.title("clicks"); root.geometry("900x650+0+0")
def clicked(e):
    with open(sys.argv[1], "a") as f:
        f.write(f"{e.num} {e.x_root} {e.y_root}\\n")
root.bind("<Button>", clicked)
root.mainloop()
"""


@dataclass
class Desktop:
    """The demo host's desktop as the viewer sees it (port: the tunnel) and as its programs do (env)."""

    port: int
    display: int
    password: str
    env: dict[str, str]

    def run(self, *argv: str, input: str | None = None) -> str:
        """A command on the host's X display; its stdout."""
        done = subprocess.run(argv, env=self.env, input=input, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self, *argv: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def size(self) -> tuple[int, int]:
        found = re.search(r"dimensions:\s+(\d+)x(\d+) pixels", self.run("xdpyinfo"))
        assert found, "xdpyinfo printed no dimensions"
        return int(found[1]), int(found[2])


@pytest.fixture
def desktop(isolated_home: Path) -> Iterator[Desktop]:
    """`gpuws desktop demo --viewer none` holding the tunnel to a 1024x768 desktop."""
    missing = [name for name in HOST_TOOLS if shutil.which(name) is None]
    assert not missing, f"install the test packages (scripts/install-deps.sh test): missing {missing}"
    state = data_dir() / "demo-host"
    proc = subprocess.Popen([sys.executable, "-m", "gpuws", "desktop", "demo", "--viewer", "none", "--json",
                             "--geometry", "1024x768"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        first = json.loads(line)
        password = SecretStore().get("demo", SecretKind.VNC_PASSWORD)
        assert password
        env = {**os.environ, "DISPLAY": f":{first['display']}",
               "XAUTHORITY": str(state / ".gpuws" / "desktop" / "Xauthority")}
        yield Desktop(int(first["local_port"]), int(first["display"]), password, env)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        subprocess.run([sys.executable, "-m", "gpuws", "desktop", "demo", "--stop"], capture_output=True, timeout=120)
        kill_leftovers(state)


def _open(qtbot: Any, desktop: Desktop, password: str | None = None) -> VncWindow:
    window = VncWindow("demo", desktop.port, desktop.password if password is None else password, simulated=True,
                       display=desktop.display)
    qtbot.addWidget(window)
    window.start()
    return window


def _connected(qtbot: Any, window: VncWindow) -> None:
    qtbot.waitUntil(lambda: window.view.session.state is ViewerState.CONNECTED, timeout=WAIT_MS)


def test_keys_and_clicks_reach_the_remote_desktop(qtbot: Any, desktop: Desktop, tmp_path: Path) -> None:
    window = _open(qtbot, desktop)
    try:
        _connected(qtbot, window)
        assert window.sim_badge is not None and window.sim_badge.text() == "SIMULATED"
        # 1:1 and not following the window: a widget pixel is a remote pixel.
        window.view.follow_window = False
        window.scale_action.setChecked(False)
        qtbot.waitUntil(lambda: window.view.size().width() == 1024, timeout=WAIT_MS)

        clicks = tmp_path / "clicks.txt"
        tk = desktop.start("python3", "-c", TK_CLICKS, str(clicks))
        try:
            # The tk window maps at +0+0 (900x650); click until it is there and has recorded the click.
            def clicked() -> bool:
                QTest.mouseClick(window.view, Qt.MouseButton.LeftButton, pos=QPoint(333, 222))
                QTest.mouseClick(window.view, Qt.MouseButton.RightButton, pos=QPoint(444, 111))
                return clicks.exists() and "3 444 111" in clicks.read_text()
            qtbot.waitUntil(clicked, timeout=WAIT_MS)
            assert "1 333 222" in clicks.read_text()
        finally:
            tk.kill()
            tk.wait()

        typed = tmp_path / "typed.txt"
        xterm = desktop.start("xterm", "-geometry", "80x10+0+0", "-e", "sh", "-c", f"stty -echo; cat > {typed}")
        try:
            desktop.run("xdotool", "search", "--sync", "--onlyvisible", "--class", "xterm")
            window.view.setFocus()

            def arrived() -> bool:
                QTest.mouseClick(window.view, Qt.MouseButton.LeftButton, pos=QPoint(100, 60))  # focus the xterm
                QTest.keyClicks(window.view, "Hello, World@42~")
                QTest.keyClick(window.view, Qt.Key.Key_Return)
                return typed.exists() and "Hello, World@42~" in typed.read_text()
            qtbot.waitUntil(arrived, timeout=WAIT_MS)
        finally:
            xterm.kill()
            xterm.wait()
    finally:
        window.close()


def test_clipboard_both_ways_resize_and_wrong_password(qtbot: Any, desktop: Desktop) -> None:
    window = _open(qtbot, desktop)
    try:
        _connected(qtbot, window)
        clipboard = QGuiApplication.clipboard()
        # Host -> here: xclip owns the host's CLIPBOARD; Xvnc sends it as ServerCutText.
        host_text = "copied on the host: café € 日本"  # past Latin-1: Extended Clipboard, UTF-8
        xclip = subprocess.Popen(["xclip", "-selection", "clipboard", "-loops", "5"], env=desktop.env,
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert xclip.stdin is not None
        xclip.stdin.write(host_text.encode())
        xclip.stdin.close()
        qtbot.waitUntil(lambda: clipboard.text() == host_text, timeout=WAIT_MS)
        xclip.kill()
        xclip.wait()
        # Here -> host: ClientCutText; Xvnc then owns the host's clipboard.
        local_text = "copied in gpuws: naïve ✓ Ελ"
        clipboard.setText(local_text)
        qtbot.waitUntil(lambda: desktop.run("xclip", "-o", "-selection", "clipboard") == local_text, timeout=WAIT_MS)

        # The remote desktop follows the window's size: at once (it started at 1024x768), and after a resize.
        def follows() -> bool:
            return desktop.size() == (window.view.width(), window.view.height())
        qtbot.waitUntil(follows, timeout=WAIT_MS)
        before = desktop.size()
        assert before != (1024, 768)
        window.resize(900, 640)
        qtbot.waitUntil(lambda: follows() and desktop.size() != before, timeout=WAIT_MS)
        fb = window.view.session.framebuffer
        assert fb is not None
        qtbot.waitUntil(lambda: (fb.width, fb.height) == desktop.size() or
                        window.view.session.framebuffer is not fb, timeout=WAIT_MS)
    finally:
        window.close()

    wrong = ("x" if desktop.password[0] != "x" else "y") + desktop.password[1:]
    refused = _open(qtbot, desktop, wrong)
    try:
        qtbot.waitUntil(lambda: refused.view.session.state is ViewerState.FAILED, timeout=WAIT_MS)
        assert isinstance(refused.view.session.error, RfbAuthFailed)
        assert "VNC authentication failed" in refused.state_label.text()
        assert desktop.password not in refused.state_label.text() + refused.state_label.toolTip()
    finally:
        refused.close()


def test_gpuws_desktop_viewer_builtin_holds_the_tunnel_until_the_window_closes(isolated_home: Path) -> None:
    state = data_dir() / "demo-host"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen([sys.executable, "-m", "gpuws", "desktop", "demo", "--viewer", "builtin", "--json",
                             "--geometry", "800x600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        first = json.loads(line)
        assert first["reused"] is False and isinstance(first["local_port"], int)
        assert proc.stderr is not None
        while "viewer open" not in (said := proc.stderr.readline()):
            assert said, "gpuws exited before the viewer opened"
        proc.send_signal(signal.SIGINT)  # closes the viewer window, then the tunnel; the desktop stays
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        again = subprocess.run([sys.executable, "-m", "gpuws", "desktop", "demo", "--stop", "--json"],
                               capture_output=True, text=True, timeout=120)
        assert json.loads(again.stdout) == {"stopped": True}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_leftovers(state)
