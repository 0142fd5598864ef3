"""The "Check this host" offer after a host's first connection, driven through the Benchmarks tab."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuws.core.bench.results import ResultStore
from gpuws.core.runner import LocalRunner
from gpuws.ui.bridge import AsyncBridge
from tests.ui.test_benchmarks_tab import FakeConnection, host_runner, make_tab, wait_idle

pytestmark = pytest.mark.gui


def test_first_connect_offers_the_check_and_one_click_runs_it(qtbot: Any, bridge: AsyncBridge,
                                                              tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "store")
    tab, session = make_tab(qtbot, bridge, store, "gpu-1", simulated=True)
    tab.show()
    assert not tab.check_offer.isVisible()  # not connected yet
    session.connection = FakeConnection(host_runner(tmp_path / "host", simulated=True))
    session.state = "connected"
    session.state_changed.emit("connected", "")
    assert tab.check_offer.isVisible() and "gpu-1" in tab.check_offer.label.text()
    tab.check_offer.check_button.click()
    assert tab.running and not tab.check_offer.isVisible()
    wait_idle(qtbot, tab)
    assert tab.last_result is not None and tab.last_result.run is not None
    assert tab.last_result.run.mode == "check" and tab.last_result.run.simulated
    report = tab.last_result.check_report
    assert report is not None and report.is_file() and report.with_suffix(".json").is_file()
    assert str(report) in tab.run_panel.status_label.text()
    # Offered once per host: a reconnect does not ask again.
    session.state_changed.emit("connected", "")
    assert not tab.check_offer.isVisible()


def test_not_now_hides_the_offer(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    tab, _ = make_tab(qtbot, bridge, ResultStore(tmp_path / "store"), "gpu-2",
                            LocalRunner(), simulated=False)
    tab.show()
    assert tab.check_offer.isVisible()  # the host was already connected when selected
    tab.check_offer.later_button.click()
    assert not tab.check_offer.isVisible() and not tab.running
