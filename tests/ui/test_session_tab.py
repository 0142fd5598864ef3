"""The Session tab under pytest-qt, a view of the Workspace: cost climbing with a budget warning,
the ssh command with its jump host, per-host idle choices, and a real tunnel through sshd opened
from the tab. Saves session-tab.png in its tmp_path. (The ledger's and idle policy's own
behaviour is tested Qt-free in tests/app/test_costs.py.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QGuiApplication

from gpuws.app.costs import IdleSettings
from gpuws.app.workspace import Workspace
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.profiles import ProfileStore
from gpuws.core.session import SessionLedger
from gpuws.core.tunnels import Preset
from gpuws.remote.connection import ConnectionState
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.tabs import HostContext
from gpuws.ui.tabs.session import SessionTab
from tests.support.sshd import SshdServer

pytestmark = [
    pytest.mark.gui,
]


class FakeSession(QObject):
    """The part of HostSession the tab uses: state, its signal, and the connection."""

    state_changed = Signal(str, str)

    def __init__(self, profile: HostProfile, connection: Any = None) -> None:
        super().__init__()
        self.profile = profile
        self.state = "connected"
        self.connection = connection


def _workspace(bridge: AsyncBridge, ledger: SessionLedger) -> Workspace:
    """A Workspace as the window makes one (its hub's): work on the loop, results on the GUI thread."""
    return Workspace(lambda coro: bridge.run_async(coro), ledger=ledger, post=bridge.post)


class Opened:
    def __init__(self) -> None:
        self.urls: list[str] = []

    def open(self, url: str) -> bool:  # gpuws.ui.external.open_in_browser
        self.urls.append(url)
        return True


def test_cost_budget_and_ssh_command(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    store = ProfileStore()
    store.add(HostProfile(name="bastion", host="bastion.example", user="ops"))
    profile = HostProfile(name="a100", host="10.0.0.7", user="me", jump="bastion", price_per_hour=36.0,
                          budget=10.0, slice_profile="full", currency="EUR")
    store.add(profile)
    ledger = SessionLedger(tmp_path / "open.json")
    ledger.begin(profile, time.time() - 14 * 60)  # 14 min at 36/h = 8.40 of a 10.00 budget
    workspace = _workspace(bridge, ledger)
    workspace.add_host(profile)
    workspace.state_changed("a100", ConnectionState.CONNECTED)  # keeps the session already open
    tab = SessionTab(workspace=workspace)
    qtbot.addWidget(tab)
    session = FakeSession(profile)
    tab.set_host(HostContext(profile, session, bridge))  # type: ignore[arg-type]
    qtbot.waitUntil(lambda: tab.last_cost is not None, timeout=5000)  # read off the GUI thread
    assert tab.last_cost is not None and tab.last_cost.running == pytest.approx(8.4, abs=0.05)
    assert tab.banner.isVisibleTo(tab) and "nearing its budget" in tab.banner.text()
    first = tab.running_label.text()
    # Found: "1.18 · 9.80 / h" with no currency anywhere.
    assert first.startswith("€") and "€36.00/h" in tab.rate_label.text() and tab.month_label.text().startswith("€")
    assert "€" in tab.budget_bar.format()
    tab.refresh_cost()
    qtbot.waitUntil(lambda: float(tab.running_label.text()[1:]) > float(first[1:]), timeout=10_000)  # climbing

    # Budget controls: a daily limit already used up, and stop at 100 % (Found: no visible controls).
    assert tab.monthly_budget_spin.value() == 10.0 and tab.daily_budget_spin.value() == 0.0
    assert not tab.start_button.isEnabled() and "provider" in tab.start_button.toolTip()  # Found: enabled
    tab.daily_budget_spin.setValue(5.0)
    tab.stop_at_budget_check.setChecked(True)
    tab.save_budget_button.click()
    assert (profile.budget_daily, profile.budget, profile.budget_stop) == (5.0, 10.0, True)
    qtbot.waitUntil(lambda: "budget exceeded" in tab.banner.text(), timeout=5000)
    assert tab.daily_bar.isVisibleTo(tab) and "daily budget" in tab.daily_bar.format()
    assert "budget exceeded" in tab.banner.text() and "stopping the instance" in tab.banner.text()
    assert "no provider command" in tab.instance_status.text()  # the Workspace asked to stop it (no provider)
    qtbot.waitUntil(lambda: ProfileStore().get("a100").budget_daily == 5.0, timeout=5000)

    assert tab.ssh_label.text() == "ssh -J ops@bastion.example -l me -- 10.0.0.7"
    tab.copy_ssh_command()
    assert QGuiApplication.clipboard().text() == tab.ssh_label.text()

    workspace.state_changed("a100", ConnectionState.DISCONNECTED)  # the ledger is written off the GUI thread
    qtbot.waitUntil(lambda: tab.running_label.text() == "not running", timeout=5000)
    assert ledger.running() == {}
    csv_path = tmp_path / "history.csv"
    tab.export_csv(str(csv_path))  # written off the GUI thread
    qtbot.waitUntil(lambda: "Exported" in tab.export_status.text(), timeout=5000)
    assert csv_path.read_text().splitlines()[1].startswith("a100,")
    tab.export_csv(str(tmp_path / "no-such-dir" / "history.csv"))  # a failure is said, not raised
    qtbot.waitUntil(lambda: "Could not export" in tab.export_status.text(), timeout=5000)
    workspace.close()


@pytest.mark.sshd
def test_tunnel_from_the_tab_through_sshd(
    qtbot: Any, bridge: AsyncBridge, sshd: SshdServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys
    import urllib.request

    from gpuws.remote.connection import HostConnection
    from tests.support.sshd import free_port

    opened = Opened()
    monkeypatch.setattr("gpuws.ui.external.open_in_browser", opened.open)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_text("tab tunnel ok")
    port = free_port()
    http = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                             "--directory", str(www)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    qtbot.waitUntil(lambda: _accepts(port), timeout=30_000)  # http.server has bound (no fixed sleep)
    profile = HostProfile(name="rig", host="127.0.0.1", port=sshd.port, user=sshd.user, auth=AuthMethod.KEY,
                          key_path=str(sshd.client_key), price_per_hour=2.5, budget=400.0, slice_profile="full")
    conn = HostConnection(profile, known_host_key=sshd.host_public_key)
    bridge.run_async(conn.connect()).result(15)
    workspace = _workspace(bridge, SessionLedger(tmp_path / "open.json"))
    tab = SessionTab(workspace=workspace)
    qtbot.addWidget(tab)
    try:
        tab.set_host(HostContext(profile, FakeSession(profile, conn), bridge))  # type: ignore[arg-type]
        tab.preset_combo.setCurrentIndex(tab.preset_combo.findData(Preset.CUSTOM.value))
        tab.remote_spin.setValue(port)
        tab.open_tunnel()
        qtbot.waitUntil(lambda: tab.tunnel_table.rowCount() == 1, timeout=30_000)
        (tunnel,) = workspace.host("rig").tunnels  # type: ignore[union-attr]  # kept by the Workspace
        assert opened.urls == [tunnel.url]
        assert tab.tunnel_table.item(0, 1).text() == tunnel.display_url
        assert tab.tunnel_table.item(0, 3).text() == "open"
        with urllib.request.urlopen(tunnel.url, timeout=10) as response:
            assert response.read() == b"tab tunnel ok"

        tab.resize(980, 760)
        tab.show()
        qtbot.waitExposed(tab)
        assert tab.grab().save(str(tmp_path / "session-tab.png"))  # for a person to look at

        # Found: with no browser, "Open in browser" did nothing visible; there was no "Copy URL".
        monkeypatch.undo()
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        monkeypatch.setattr("gpuws.ui.external._launcher", lambda: None)  # no xdg-open, no browser
        tab.tunnel_table.selectRow(0)
        tab.open_selected_tunnel()
        assert "No web browser" in tab.tunnel_status.text() and "Copy URL" in tab.tunnel_status.text()
        tab.copy_url_button.click()
        assert QGuiApplication.clipboard().text() == tunnel.url

        tab.tunnel_table.selectRow(0)
        tab.close_selected_tunnel()
        assert tab.tunnel_table.rowCount() == 0 and workspace.host("rig").tunnels == []  # type: ignore[union-attr]
    finally:
        bridge.run_async(conn.close()).result(10)
        http.kill()
        http.wait()


def _accepts(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class ReadRecordingLedger(SessionLedger):
    """The real ledger, noting the thread of each read."""

    readers: list[str]

    def all_sessions(self) -> Any:
        import threading

        self.readers.append(threading.current_thread().name)
        return super().all_sessions()


def test_the_tab_shows_what_the_workspace_meters_and_keeps_idle_choices_per_host(
    qtbot: Any, bridge: AsyncBridge, tmp_path: Path
) -> None:
    import threading

    shown = HostProfile(name="shown", host="10.0.0.3")
    background = HostProfile(name="bg", host="10.0.0.4", price_per_hour=3.0)
    ledger = ReadRecordingLedger(tmp_path / "open.json")
    ledger.readers = []
    workspace = _workspace(bridge, ledger)
    tab = SessionTab(workspace=workspace)
    qtbot.addWidget(tab)
    tab.set_host(HostContext(background, FakeSession(background), bridge))  # type: ignore[arg-type]
    qtbot.waitUntil(lambda: tab.running_label.text() == "not running", timeout=5000)
    assert ledger.readers and threading.current_thread().name not in ledger.readers  # never the GUI thread
    workspace.state_changed("bg", ConnectionState.CONNECTED)  # reported by the window's hub
    qtbot.waitUntil(lambda: tab.running_label.text() != "not running", timeout=5000)  # after the write lands
    assert "bg" in ledger.running()

    tab.idle_minutes.setValue(1)
    tab.idle_check.setChecked(True)
    tab.pre_stop_edit.setText("python save.py")
    assert workspace.idle.settings("bg") == IdleSettings(stop=True, minutes=1.0, pre_stop="python save.py")
    tab.set_host(HostContext(shown, FakeSession(shown), bridge))  # type: ignore[arg-type]
    assert not tab.idle_check.isChecked() and tab.pre_stop_edit.text() == ""  # per host
    assert workspace.idle.settings("shown") == IdleSettings()  # showing a host changes nothing
    tab.set_host(HostContext(background, FakeSession(background), bridge))  # type: ignore[arg-type]
    assert tab.idle_check.isChecked() and tab.idle_minutes.value() == 1
    assert tab.pre_stop_edit.text() == "python save.py"
    tab.stop_button.setEnabled(True)
    tab.power("stop")  # no provider: refused at once, said where the user looks
    assert "no provider command" in tab.instance_status.text()
    workspace.close()
    assert ledger.running() == {}


def test_the_demo_hosts_ssh_command_comes_with_its_password(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    """Found: the demo's "Copy ssh command" could not work: its password was never shown."""
    from gpuws.ui.session_controller import HostSession

    profile = HostProfile(name="demo", host="127.0.0.1", port=2222, user="demo", auth=AuthMethod.PASSWORD,
                          simulated=True)
    session = HostSession(profile, bridge, password="throwaway-demo-pw")
    tab = SessionTab()  # shown on its own: a Workspace of its own
    qtbot.addWidget(tab)
    tab.set_host(HostContext(profile, session, bridge))
    assert not tab.start_button.isEnabled() and "demo host" in tab.start_button.toolTip()
    tab.copy_ssh_command()
    assert "throwaway-demo-pw" in tab.access_status.text()
    real = HostSession(HostProfile(name="rig", host="10.0.0.9", auth=AuthMethod.PASSWORD), bridge, password="real-pw")
    assert real.simulated_password is None  # a real host's password is never shown
    session.deleteLater()
    real.deleteLater()


def test_the_windows_hub_meters_a_host_session_from_connect_to_close(qtbot: Any, bridge: AsyncBridge,
                                                                      tmp_path: Path) -> None:
    """The path the window takes: a HostSession reported by the hub to its Workspace, which opens
    the cost session on connect and ends it on close; the tab shows it without being told."""
    from gpuws.ui.session_controller import HostSession
    from gpuws.ui.telemetry.hub import TelemetryHub
    from tests.support.local_connection import LocalConnection
    from tests.ui.test_telemetry_service import sim_host

    runner = sim_host(tmp_path)
    profile = HostProfile(name="lab", host="127.0.0.1", user="me", simulated=True, price_per_hour=2.0)
    session = HostSession(profile, bridge, connection_factory=lambda _p, **_kw: LocalConnection(runner))
    hub = TelemetryHub(bridge)
    ledger = hub.workspace.costs.ledger
    tab = SessionTab()
    qtbot.addWidget(tab)
    try:
        hub.watch_session(session)
        tab.set_host(HostContext(profile, session, bridge, hub))
        assert tab.workspace is hub.workspace  # the window's Workspace, not one of its own
        session.connect_host()
        qtbot.waitUntil(lambda: "lab" in ledger.running(), timeout=30000)
        qtbot.waitUntil(lambda: tab.running_label.text() != "not running", timeout=5000)
        session.close()
        qtbot.waitUntil(lambda: ledger.running() == {} and tab.running_label.text() == "not running",
                        timeout=15000)
    finally:
        hub.shutdown()
        qtbot.waitUntil(lambda: hub.feed("lab") is None, timeout=15000)
        session.deleteLater()
