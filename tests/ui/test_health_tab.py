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
    assert any(name == "remapped_rows" and "remapped_row_pending=Yes" in detail for name, _, detail in rows)
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
