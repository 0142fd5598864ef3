"""The Health tab under pytest-qt against the simulated GPU host's real tools on this machine
(`LocalRunner` runs the same health script the host would get)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QGuiApplication

from gpuws.core.models import HostProfile
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.tabs import HostContext
from gpuws.ui.tabs.health import HealthTab
from tests.ui.test_benchmarks_tab import FakeConnection, FakeSession, host_runner

pytestmark = pytest.mark.gui


def make_tab(qtbot: Any, bridge: AsyncBridge, root: Path, **env: str) -> HealthTab:
    tab = HealthTab()
    qtbot.addWidget(tab)
    profile = HostProfile(name="demo", host="127.0.0.1", simulated=True)
    session = FakeSession(profile, FakeConnection(host_runner(root, simulated=True, **env)))
    tab.set_host(HostContext(profile, session, bridge))  # type: ignore[arg-type]
    return tab


def test_health_tab_lists_the_verdicts_and_copies_the_report(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    tab = make_tab(qtbot, bridge, tmp_path, GPUWS_SIM_FAULTS="remap-pending:1")
    assert tab.check_button.isEnabled() and not tab.copy_button.isEnabled()
    tab.check_button.click()
    qtbot.waitUntil(lambda: tab.health is not None, timeout=30000)
    rows = tab.items()
    assert rows[0][:2] == ("host", "\u2715 unhealthy")
    assert any(name.startswith("GPU 1") and verdict == "\u2715 unhealthy" for name, verdict, _ in rows)
    assert any(name == "Remapped memory rows" and "remapped_row_pending=Yes" in detail for name, _, detail in rows)
    assert "UNHEALTHY" in tab.summary.text() and tab.sim_badge.isVisibleTo(tab)
    tab.copy_button.click()
    assert "remapped_rows unhealthy" in QGuiApplication.clipboard().text()


def test_health_tab_needs_a_connection(qtbot: Any, bridge: AsyncBridge) -> None:
    tab = HealthTab()
    qtbot.addWidget(tab)
    profile = HostProfile(name="gpu-a", host="gpu-a.example.com")
    tab.set_host(HostContext(profile, FakeSession(profile, None), bridge))  # type: ignore[arg-type]
    assert not tab.check_button.isEnabled() and "Connect" in tab.check_button.toolTip()
    tab.start()  # does nothing without a connection
    assert tab.health is None


def test_showing_the_tab_checks_a_connected_host_once(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    tab = make_tab(qtbot, bridge, tmp_path)
    assert tab.health is None
    tab.show()  # what selecting the tab does: a user never meets an empty table
    qtbot.waitUntil(lambda: tab.health is not None, timeout=30000)
    assert tab.items()[0][:2] == ("host", "\u2713 healthy")
    first = tab.health
    tab.hide()
    tab.show()
    assert tab.health is first and tab._running_for is None  # shown again: the result stays, no new run


def test_checks_are_named_in_words_and_the_kernel_log_is_not_healthy_beside_an_xid(
        qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    """#35: rows read `remapped_rows`, `pcie_replays`; "kernel_log ✓ healthy … 1 XID lines" beside
    GPU 0 UNHEALTHY for that XID."""
    tab = make_tab(qtbot, bridge, tmp_path, GPUWS_SIM_FAULTS="xid-79:0")
    tab.check_button.click()
    qtbot.waitUntil(lambda: tab.health is not None, timeout=30000)
    rows = tab.items()
    names = [name for name, _, _ in rows]
    assert not [n for n in names if "_" in n], names  # no raw identifier
    assert "PCIe replays" in names and "XID errors" in names
    assert any(name.startswith("GPU 0") and verdict == "\u2715 unhealthy" for name, verdict, _ in rows)
    kernel = next(row for row in rows if row[0] == "Kernel log")
    assert "healthy" not in kernel[1] and "1 XID line" in kernel[2], kernel


def test_selecting_another_host_clears_the_last_hosts_summary(qtbot: Any, bridge: AsyncBridge,
                                                              tmp_path: Path) -> None:
    """#35: with host A's result shown, selecting B emptied the tree but kept "A: UNHEALTHY - driver …"."""
    tab = make_tab(qtbot, bridge, tmp_path, GPUWS_SIM_FAULTS="remap-pending:1")
    tab.check_button.click()
    qtbot.waitUntil(lambda: tab.health is not None, timeout=30000)
    assert tab.summary.text().startswith("demo: UNHEALTHY")
    other = HostProfile(name="gpu-b", host="gpu-b.example.com")
    tab.set_host(HostContext(other, FakeSession(other, None), bridge))  # type: ignore[arg-type]
    assert "demo" not in tab.summary.text() and "UNHEALTHY" not in tab.summary.text()
    assert tab.items() == [] and not tab.copy_button.isEnabled()


def test_the_open_tab_checks_a_host_that_is_selected_or_connects(qtbot: Any, bridge: AsyncBridge,
                                                                tmp_path: Path) -> None:
    """#35: the Health tab restored as the open tab showed an empty table for a host selected or
    connecting while it was open (only showing the tab ran the check)."""
    tab = HealthTab()
    qtbot.addWidget(tab)
    tab.show()  # already the open tab, no host yet
    profile = HostProfile(name="demo", host="127.0.0.1", simulated=True)
    session = FakeSession(profile, None)  # selected while still connecting
    tab.set_host(HostContext(profile, session, bridge))  # type: ignore[arg-type]
    assert tab.health is None and tab._running_for is None
    session.connection = FakeConnection(host_runner(tmp_path / "a", simulated=True))
    session.state = "connected"
    session.state_changed.emit("connected", "")
    qtbot.waitUntil(lambda: tab.health is not None, timeout=30000)  # it connected: checked
    assert tab.items()[0][:2] == ("host", "\u2713 healthy")

    other = HostProfile(name="demo-2", host="127.0.0.1", simulated=True)
    connected = FakeSession(other, FakeConnection(host_runner(tmp_path / "b", simulated=True)))
    tab.set_host(HostContext(other, connected, bridge))  # type: ignore[arg-type]
    qtbot.waitUntil(lambda: tab.health is not None and tab.health.host == "demo-2", timeout=30000)
