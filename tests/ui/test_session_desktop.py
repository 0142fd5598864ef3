"""The Session tab's Desktop panel against the demo host (a real Xvnc), and the tab at 900 px wide:
no horizontal scroll bar, the Terminal card whole. Saves session-tab-900.png in its tmp_path."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, Signal

from gpuws.app.demo import start_demo
from gpuws.app.workspace import Workspace
from gpuws.core.paths import data_dir
from gpuws.core.session import SessionLedger
from gpuws.remote.connection import HostConnection
from gpuws.sim.server import kill_leftovers
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.tabs import HostContext
from gpuws.ui.tabs.session import SessionTab
from tests.support.vnc import greeting

# x-display: Xvnc takes the first free X display number on the machine; one at a time (issue 27).
pytestmark = [pytest.mark.gui, pytest.mark.keyring, pytest.mark.slow, pytest.mark.xdist_group("x-display")]
TAB_WIDTH_IN_900_WINDOW = 600


class FakeSession(QObject):
    """The part of HostSession the tab uses: state, its signal, and the connection."""

    state_changed = Signal(str, str)

    def __init__(self, profile: Any, connection: Any) -> None:
        super().__init__()
        self.profile = profile
        self.state = "connected"
        self.connection = connection


def _no_viewer_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """No VNC viewer of this machine pops up during a test (Xvnc's package may bring xtigervncviewer
    into /usr/bin, which the demo host needs on PATH): the viewer lookup finds none."""
    import functools

    from gpuws.app import desktop

    monkeypatch.setattr(desktop, "launch_viewer", functools.partial(desktop.launch_viewer, find=lambda *_: None))


def test_desktop_panel_checks_starts_and_stops(qtbot: Any, bridge: AsyncBridge, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUWS_SIM_FAULTS", "software-gl:0")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    _no_viewer_here(monkeypatch)
    demo = bridge.run_async(start_demo()).result(60)
    conn = HostConnection(demo.profile, password=demo.password, known_host_key=demo.known_host_key)
    bridge.run_async(conn.connect()).result(60)
    workspace = Workspace(lambda coro: bridge.run_async(coro), ledger=SessionLedger(tmp_path / "l.json"),
                          post=bridge.post)
    tab = SessionTab(workspace=workspace)
    qtbot.addWidget(tab)
    try:
        tab.set_host(HostContext(demo.profile, FakeSession(demo.profile, conn), bridge))  # type: ignore[arg-type]
        tab.check_desktop()
        qtbot.waitUntil(lambda: tab.desktop_check is not None, timeout=60_000)
        assert "VNC server: /usr/bin/Xvnc" in tab.desktop_status.text()
        assert tab.desktop_labels.isVisibleTo(tab)
        assert "software OpenGL (llvmpipe): 3D will be slow" in tab.desktop_labels.text()
        assert "H100 has no video encoder: streaming runs on the CPU" in tab.desktop_labels.text()
        assert not tab.desktop_install_button.isVisibleTo(tab)  # nothing to install, never on the demo

        tab.geometry_combo.setCurrentText("1280x800")
        tab.viewer_combo.setCurrentIndex(tab.viewer_combo.findData("external"))  # the built-in one is below
        tab.start_desktop()
        qtbot.waitUntil(lambda: tab.desktop_session is not None, timeout=60_000)
        session = tab.desktop_session
        assert session.tunnel in workspace.host("demo").tunnels  # type: ignore[union-attr]  # idle guard sees it
        assert greeting(session.local_port).startswith(b"RFB 003.00")
        # A connected viewer is activity for the idle guard (the Workspace asks its tunnels `in_use`).
        with socket.create_connection(("127.0.0.1", session.local_port), timeout=20) as viewer:
            assert viewer.recv(12).startswith(b"RFB ")
            assert session.tunnel.in_use
        assert f"at vnc://127.0.0.1:{session.local_port}" in tab.desktop_status.text()
        assert "No VNC viewer found" in tab.desktop_status.text()

        # The tab's share of a 900 px wide window: the host list takes ~230 px and the frame the rest.
        tab.resize(TAB_WIDTH_IN_900_WINDOW, 900)
        tab.show()
        qtbot.waitExposed(tab)
        qtbot.waitUntil(lambda: tab._columns == 1, timeout=5000)
        viewport = tab._scroll.viewport().width()
        body = tab._scroll.widget()
        assert body.minimumSizeHint().width() <= viewport, (
            "the tab is clipped (or would need a horizontal scroll bar) in a 900 px window")
        access = tab._cards[1]  # the Terminal card, whole: inside the body, at least its minimum width
        qtbot.waitUntil(lambda: access.geometry().right() < body.width() <= viewport, timeout=5000)
        assert access.width() >= access.minimumSizeHint().width()
        assert all(card.geometry().right() < body.width() for card in tab._cards)
        assert tab.grab().save(str(tmp_path / "session-tab-900.png"))  # for a person to look at

        # The built-in viewer (the default): the desktop in a gpuws window, which Stop desktop closes.
        tab.viewer_combo.setCurrentIndex(tab.viewer_combo.findData("builtin"))
        tab.start_desktop()
        qtbot.waitUntil(lambda: tab.viewer_window is not None, timeout=60_000)
        window = tab.viewer_window
        assert window is not None and window.sim_badge is not None
        assert "OpenGL: llvmpipe" in window.renderer.text() and "NVIDIA H100" in window.renderer.text()
        # (TigerVNC turns 127.0.0.1 away for 10 s after the bare connections above: the viewer waits it out.)
        qtbot.waitUntil(lambda: window.state_label.text() == "Connected", timeout=90_000)
        session = tab.desktop_session
        assert session is not None
        tab.stop_desktop()
        assert tab.viewer_window is None and not window.isVisible()
        qtbot.waitUntil(lambda: tab.desktop_status.text() == "Desktop stopped.", timeout=60_000)
        assert session.tunnel not in workspace.host("demo").tunnels  # type: ignore[union-attr]
    finally:
        bridge.run_async(conn.close()).result(30)
        bridge.run_async(demo.stop()).result(30)
        kill_leftovers(data_dir() / "demo-host")


def test_start_twice_in_browser_and_stop_leave_no_open_tunnel(qtbot: Any, bridge: AsyncBridge, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """#35: Start desktop, Start desktop again, In browser, Stop desktop left two rows saying "open"
    (the first VNC tunnel and the noVNC one) whose connections got EOF; each reuse click added
    another VNC tunnel row for the same desktop."""
    _no_viewer_here(monkeypatch)
    monkeypatch.setattr("gpuws.ui.external.open_in_browser", lambda _url: True)  # no browser pops up
    demo = bridge.run_async(start_demo()).result(60)
    conn = HostConnection(demo.profile, password=demo.password, known_host_key=demo.known_host_key)
    bridge.run_async(conn.connect()).result(60)
    workspace = Workspace(lambda coro: bridge.run_async(coro), ledger=SessionLedger(tmp_path / "l.json"),
                          post=bridge.post)
    tab = SessionTab(workspace=workspace)
    qtbot.addWidget(tab)

    def rows() -> list[tuple[str, str]]:
        table = tab.tunnel_table
        return [(table.item(r, 0).text(), table.item(r, 3).text()) for r in range(table.rowCount())]

    try:
        tab.set_host(HostContext(demo.profile, FakeSession(demo.profile, conn), bridge))  # type: ignore[arg-type]
        tab.start_desktop()
        qtbot.waitUntil(lambda: tab.desktop_session is not None, timeout=60_000)
        first = tab.desktop_session
        assert [label for label, _ in rows()] == ["VNC desktop"]
        tab.start_desktop()  # again: the running desktop is reused ...
        qtbot.waitUntil(lambda: tab.desktop_session is not first and tab.desktop_start_button.isEnabled(),
                        timeout=60_000)
        assert "reused" in tab.desktop_status.text()
        assert [label for label, _ in rows()] == ["VNC desktop"]  # ... and so is its one tunnel
        assert greeting(tab.desktop_session.local_port).startswith(b"RFB 003.00")  # type: ignore[union-attr]
        tab.open_desktop_in_browser()
        qtbot.waitUntil(lambda: len(rows()) == 2, timeout=60_000)
        assert sorted(label for label, _ in rows()) == ["VNC desktop", "noVNC (browser desktop)"]

        tab.stop_desktop()
        qtbot.waitUntil(lambda: tab.desktop_status.text() == "Desktop stopped.", timeout=60_000)
        assert not [row for row in rows() if "open" in row[1]], rows()
        assert rows() == []  # the desktop's tunnels went with it
        assert workspace.host("demo").tunnels == []  # type: ignore[union-attr]
    finally:
        bridge.run_async(conn.close()).result(30)
        bridge.run_async(demo.stop()).result(30)
        kill_leftovers(data_dir() / "demo-host")
