"""The Session tab under pytest-qt: cost climbing with a budget warning, the ssh command with its
jump host, and a real tunnel through sshd opened from the tab. Saves /tmp/gpuws-shots/session-tab.png."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QGuiApplication

from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.profiles import ProfileStore
from gpuws.core.session import SessionLedger
from gpuws.core.tunnels import Preset
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.tabs import HostContext
from gpuws.ui.tabs.session import SessionTab
from tests.support.sshd import SshdServer

pytestmark = [
    pytest.mark.gui,
]
SHOTS = Path("/tmp/gpuws-shots")


class FakeSession(QObject):
    """The part of HostSession the tab uses: state, its signal, and the connection."""

    state_changed = Signal(str, str)

    def __init__(self, profile: HostProfile, connection: Any = None) -> None:
        super().__init__()
        self.profile = profile
        self.state = "connected"
        self.connection = connection


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
    tab = SessionTab(ledger=ledger)
    qtbot.addWidget(tab)
    session = FakeSession(profile)
    tab.set_host(HostContext(profile, session, bridge))  # type: ignore[arg-type]
    assert tab.last_cost is not None and tab.last_cost.running == pytest.approx(8.4, abs=0.05)
    assert tab.banner.isVisibleTo(tab) and "nearing its budget" in tab.banner.text()
    first = tab.running_label.text()
    # Found: "1.18 · 9.80 / h" with no currency anywhere.
    assert first.startswith("€") and "€36.00/h" in tab.rate_label.text() and tab.month_label.text().startswith("€")
    assert "€" in tab.budget_bar.format()
    time.sleep(1.1)
    tab.refresh_cost()
    assert float(tab.running_label.text()[1:]) > float(first[1:])  # climbing

    # Budget controls: a daily limit already used up, and stop at 100 % (Found: no visible controls).
    assert tab.monthly_budget_spin.value() == 10.0 and tab.daily_budget_spin.value() == 0.0
    assert not tab.start_button.isEnabled() and "provider" in tab.start_button.toolTip()  # Found: enabled
    tab.daily_budget_spin.setValue(5.0)
    tab.stop_at_budget_check.setChecked(True)
    tab.save_budget_button.click()
    assert (profile.budget_daily, profile.budget, profile.budget_stop) == (5.0, 10.0, True)
    assert tab.daily_bar.isVisibleTo(tab) and "daily budget" in tab.daily_bar.format()
    assert "budget exceeded" in tab.banner.text() and "stopping the instance" in tab.banner.text()
    assert "a100" in tab._budget_stopped and tab.instance_status.text()  # asked the provider (none here)
    qtbot.waitUntil(lambda: ProfileStore().get("a100").budget_daily == 5.0, timeout=5000)

    assert tab.ssh_label.text() == "ssh -J ops@bastion.example -l me -- 10.0.0.7"
    tab.copy_ssh_command()
    assert QGuiApplication.clipboard().text() == tab.ssh_label.text()

    session.state = "disconnected"
    session.state_changed.emit("disconnected", "")
    assert ledger.running() == {} and tab.running_label.text() == "not running"
    csv_path = tmp_path / "history.csv"
    tab.export_csv(str(csv_path))
    assert csv_path.read_text().splitlines()[1].startswith("a100,")


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
    profile = HostProfile(name="rig", host="127.0.0.1", port=sshd.port, user=sshd.user, auth=AuthMethod.KEY,
                          key_path=str(sshd.client_key), price_per_hour=2.5, budget=400.0, slice_profile="full")
    conn = HostConnection(profile, known_host_key=sshd.host_public_key)
    bridge.run_async(conn.connect()).result(15)
    tab = SessionTab(ledger=SessionLedger(tmp_path / "open.json"))
    qtbot.addWidget(tab)
    try:
        tab.set_host(HostContext(profile, FakeSession(profile, conn), bridge))  # type: ignore[arg-type]
        tab.preset_combo.setCurrentIndex(tab.preset_combo.findData(Preset.CUSTOM.value))
        tab.remote_spin.setValue(port)
        time.sleep(0.3)  # http.server binds
        tab.open_tunnel()
        qtbot.waitUntil(lambda: tab.tunnel_table.rowCount() == 1, timeout=10_000)
        tunnel = tab.tunnels["rig"][0]
        assert opened.urls == [tunnel.url]
        assert tab.tunnel_table.item(0, 1).text() == tunnel.display_url
        assert tab.tunnel_table.item(0, 3).text() == "open"
        with urllib.request.urlopen(tunnel.url, timeout=10) as response:
            assert response.read() == b"tab tunnel ok"

        tab.resize(980, 760)
        tab.show()
        qtbot.waitExposed(tab)
        SHOTS.mkdir(parents=True, exist_ok=True)
        assert tab.grab().save(str(SHOTS / "session-tab.png"))

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
        assert tab.tunnel_table.rowCount() == 0
    finally:
        bridge.run_async(conn.close()).result(10)
        http.kill()
        http.wait()


class BridgedSession(FakeSession):
    """A session that offers its bridge, as HostSession does: the ledger is written off the GUI thread."""

    def __init__(self, profile: HostProfile, bridge: AsyncBridge) -> None:
        super().__init__(profile)
        self.bridge = bridge
        self.state = "disconnected"


def test_cost_ledger_is_written_off_the_gui_thread_in_order(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    import threading

    profile = HostProfile(name="h100", host="10.0.0.9", price_per_hour=4.0)
    ledger = SessionLedger(tmp_path / "open.json")
    writers: list[str] = []
    begin = ledger.begin

    def recording_begin(*args: Any, **kwargs: Any) -> Any:
        writers.append(threading.current_thread().name)
        return begin(*args, **kwargs)

    ledger.begin = recording_begin  # type: ignore[method-assign]
    tab = SessionTab(ledger=ledger)
    qtbot.addWidget(tab)
    session = BridgedSession(profile, bridge)
    tab.set_host(HostContext(profile, session, bridge))  # type: ignore[arg-type]
    for state in ("connected", "disconnected", "connected"):
        session.state = state
        session.state_changed.emit(state, "")
    qtbot.waitUntil(lambda: len(writers) == 2 and "h100" in ledger.running(), timeout=5000)
    assert threading.main_thread().name not in writers
    qtbot.waitUntil(lambda: tab.running_label.text() != "not running", timeout=5000)


def test_a_replaced_session_is_followed_and_exit_ends_open_sessions(qtbot: Any, bridge: AsyncBridge,
                                                                     tmp_path: Path) -> None:
    profile = HostProfile(name="h", host="10.0.0.2", price_per_hour=2.0)
    ledger = SessionLedger(tmp_path / "open.json")
    tab = SessionTab(ledger=ledger)
    qtbot.addWidget(tab)
    first = BridgedSession(profile, bridge)
    tab.track(first)
    first.state = "connected"
    first.state_changed.emit("connected", "")
    qtbot.waitUntil(lambda: "h" in ledger.running(), timeout=5000)
    first.state = "disconnected"
    first.state_changed.emit("disconnected", "")
    qtbot.waitUntil(lambda: ledger.running() == {}, timeout=5000)

    second = BridgedSession(profile, bridge)  # the profile was edited: a new session, same name
    tab.track(second)
    second.state = "connected"
    second.state_changed.emit("connected", "")
    qtbot.waitUntil(lambda: "h" in ledger.running(), timeout=5000)
    first.state_changed.emit("disconnected", "")  # the old session's late signals change nothing
    tab.close_ledger()
    assert ledger.running() == {}  # quitting gpuws ends the running session: no billing while closed


def test_idle_stop_acts_on_a_background_host_with_its_own_settings(qtbot: Any, bridge: AsyncBridge,
                                                                   tmp_path: Path) -> None:
    from gpuws.core.idle import GpuActivity

    shown = HostProfile(name="shown", host="10.0.0.3")
    background = HostProfile(name="bg", host="10.0.0.4", price_per_hour=3.0)
    tab = SessionTab(ledger=SessionLedger(tmp_path / "open.json"))
    qtbot.addWidget(tab)
    bg_session = BridgedSession(background, bridge)
    tab.track(bg_session)
    tab.set_host(HostContext(background, bg_session, bridge))  # type: ignore[arg-type]
    tab.idle_minutes.setValue(1)
    tab.idle_check.setChecked(True)
    tab.pre_stop_edit.setText("python save.py")
    tab.set_host(HostContext(shown, FakeSession(shown), bridge))  # type: ignore[arg-type]
    assert not tab.idle_check.isChecked() and tab.pre_stop_edit.text() == ""  # per host
    stopped: list[tuple[str, str]] = []
    tab.power = lambda action, session=None: stopped.append((action, session.profile.name))  # type: ignore[method-assign]
    idle = [GpuActivity(0.0, 50.0, 700.0)]
    t0 = time.time()
    assert tab.feed_activity(background, t0, idle, False) is None
    event = tab.feed_activity(background, t0 + 61, idle, False)
    assert event is not None and stopped == [("stop", "bg")]
    assert tab.auto_stop == {"bg": "python save.py"} and "bg" in tab.idle_warnings


def test_the_demo_hosts_ssh_command_comes_with_its_password(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    """Found: the demo's "Copy ssh command" could not work: its password was never shown."""
    from gpuws.ui.session_controller import HostSession

    profile = HostProfile(name="demo", host="127.0.0.1", port=2222, user="demo", auth=AuthMethod.PASSWORD,
                          simulated=True)
    session = HostSession(profile, bridge, password="throwaway-demo-pw")
    tab = SessionTab(ledger=SessionLedger(tmp_path / "open.json"))
    qtbot.addWidget(tab)
    tab.set_host(HostContext(profile, session, bridge))
    assert not tab.start_button.isEnabled() and "demo host" in tab.start_button.toolTip()
    tab.copy_ssh_command()
    assert "throwaway-demo-pw" in tab.access_status.text()
    real = HostSession(HostProfile(name="rig", host="10.0.0.9", auth=AuthMethod.PASSWORD), bridge, password="real-pw")
    assert real.simulated_password is None  # a real host's password is never shown
    session.deleteLater()
    real.deleteLater()
