"""The tray menu: one entry per host with state and running cost, and actions that call back."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gpuws.ui.tray import GpuwsTray, TrayHost

pytestmark = pytest.mark.gui


def test_menu_lists_hosts_with_cost_and_actions_call_back(qtbot: Any) -> None:
    calls: list[tuple[str, str]] = []
    tray = GpuwsTray(
        open_window=lambda: calls.append(("open", "")),
        connect_host=lambda name: calls.append(("connect", name)),
        stop_host=lambda name: calls.append(("stop", name)),
        quit_app=lambda: calls.append(("quit", "")),
    )
    try:
        tray.update_hosts([TrayHost("a100", "connected", 1.25, idle=True, currency="USD"),
                           TrayHost("h100", "unreachable", None)])
        texts = [a.text() for a in tray.menu.actions()]
        assert texts[0] == "Open gpuws"
        assert "a100 — Connected · $1.25 · idle" in texts and "h100 — Unreachable" in texts
        assert tray.toolTip() == "gpuws — 1 running, $1.25 so far"
        tray.update_hosts([TrayHost("gpu", "auth_failed", None)])  # Found: raw "auth_failed"
        assert "gpu — Authentication failed" in [a.text() for a in tray.menu.actions()]
        tray.update_hosts([TrayHost("a100", "connected", 1.25, idle=True, currency="USD"),
                           TrayHost("h100", "unreachable", None)])

        h100 = next(a for a in tray.menu.actions() if a.text().startswith("h100")).menu()
        connect, _stop = h100.actions()
        assert connect.isEnabled()  # not connected: offer to connect
        connect.trigger()
        a100 = next(a for a in tray.menu.actions() if a.text().startswith("a100")).menu()
        a100_connect, a100_stop = a100.actions()
        assert not a100_connect.isEnabled() and a100_stop.text() == "Stop instance (idle)"
        a100_stop.trigger()
        tray.menu.actions()[0].trigger()
        quit_action = tray.menu.actions()[-1]
        assert quit_action.text() == "Quit gpuws"  # Found: the tray had no Quit
        quit_action.trigger()
        assert calls == [("connect", "h100"), ("stop", "a100"), ("open", ""), ("quit", "")]
    finally:
        tray.hide()
        tray.menu.deleteLater()
        tray.deleteLater()


@contextlib.contextmanager
def _window_with_a_metered_host(make_window: Any, qtbot: Any) -> Iterator[Any]:
    """A window with host "a100" at 6/h whose cost session began ten minutes ago (in the ledger
    `gpuws cost` reads), and a tray of its own; the tray goes at the end."""
    from gpuws.core.models import HostProfile
    from gpuws.core.session import SessionLedger

    profile = HostProfile(name="a100", host="10.0.0.7", price_per_hour=6.0)
    window = make_window()
    window.store.add(profile)
    window.reload_profiles()
    qtbot.waitUntil(lambda: "a100" in window.sessions, timeout=5000)
    SessionLedger(window.workspace.costs.ledger.path).begin(profile, time.time() - 600)
    window.tray = GpuwsTray(open_window=lambda: None, connect_host=lambda _n: None, stop_host=lambda _n: None)
    try:
        yield window
    finally:
        tray, window.tray = window.tray, None
        tray.menu.deleteLater()
        tray.deleteLater()


def _shows_ten_minutes_at_six_an_hour(window: Any, qtbot: Any) -> None:
    qtbot.waitUntil(lambda: bool(window.tray.hosts), timeout=5000)  # costs are read off the GUI thread
    (host,) = window.tray.hosts
    assert host.name == "a100" and host.running_cost is not None and 0.99 < host.running_cost < 1.1


def test_window_feeds_the_tray_with_hosts_and_running_cost(make_window: Any, qtbot: Any) -> None:
    with _window_with_a_metered_host(make_window, qtbot) as window:
        window._check_idle_and_tray()
        _shows_ten_minutes_at_six_an_hour(window, qtbot)


def test_the_tray_follows_the_workspace_without_waiting_for_the_clock(make_window: Any, qtbot: Any) -> None:
    from gpuws.remote.connection import ConnectionState

    with _window_with_a_metered_host(make_window, qtbot) as window:
        window._idle_clock.stop()  # only the Workspace's news may refresh it now
        window.workspace.state_changed("a100", ConnectionState.CONNECTING)  # as the hub reports it
        _shows_ten_minutes_at_six_an_hour(window, qtbot)
