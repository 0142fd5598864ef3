"""The Resize tab for a cloud host (issue 31): the instance-type family as `gpuws slices` lists it,
the price change shown in the comparison card above the typed confirmation, the current type not
offered. The host is the simulated G6f guest (1/4 of an L4) behind a real HostSession."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTableWidgetItem

from gpuws.core.models import HostProfile, ProviderInfo
from gpuws.core.runner import LocalRunner
from gpuws.sim.state import SimStateStore
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.session_controller import HostSession
from gpuws.ui.tabs import HostContext
from gpuws.ui.tabs.resize import ResizeTab
from tests.support.local_connection import LocalConnection
from tests.support.sshd import install_sim_nvidia_smi

pytestmark = pytest.mark.gui

SHOTS = Path("/tmp/gpuws-shots")


def _tab(qtbot: Any, bridge: AsyncBridge, tmp_path: Path, profile: HostProfile) -> tuple[ResizeTab, HostSession]:
    bin_dir = tmp_path / "bin"
    install_sim_nvidia_smi(bin_dir)
    store = SimStateStore(tmp_path / "state", "l4/4")
    store.load()
    runner = LocalRunner(dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", GPUWS_SIM_STATE=str(store.dir)))
    session = HostSession(profile, bridge, connection_factory=lambda _p, **_kw: LocalConnection(runner))
    widget = ResizeTab()
    widget.resize(1100, 820)
    session.connect_host()
    qtbot.waitUntil(lambda: session.state == "connected", timeout=15000)
    widget.set_host(HostContext(profile, session, bridge))
    qtbot.waitUntil(lambda: bool(widget.gpus), timeout=15000)
    return widget, session


@pytest.fixture
def cloud_tab(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> Iterator[ResizeTab]:
    """The tab on 'l4-dev': an AWS g6f.2xlarge in us-east-2, priced in USD, no price of its own."""
    profile = HostProfile(name="l4-dev", host="127.0.0.1", user="me", simulated=True, currency="USD",
                          slice_profile="g6f.2xlarge",
                          provider=ProviderInfo(kind="aws", instance_id="i-0abc123", region="us-east-2"))
    widget, session = _tab(qtbot, bridge, tmp_path, profile)
    yield widget
    qtbot.waitUntil(lambda: bridge.pending_count == 0, timeout=15000)
    widget.set_host(None)
    widget.close()
    widget.deleteLater()
    session.close()
    session.deleteLater()


def _item(tab: ResizeTab, row: int, col: int) -> QTableWidgetItem:
    item = tab.picker.cloud_table.item(row, col)
    assert item is not None
    return item


def _cells(tab: ResizeTab) -> dict[str, list[str]]:
    table = tab.picker.cloud_table
    rows = {}
    for row in range(table.rowCount()):
        name = str(_item(tab, row, 0).data(Qt.ItemDataRole.UserRole))
        rows[name] = [_item(tab, row, col).text() for col in range(table.columnCount())]
    return rows


def test_the_tab_offers_every_fraction_and_the_whole_card_with_prices(cloud_tab: ResizeTab) -> None:
    rows = _cells(cloud_tab)
    assert list(rows) == ["g6f.large", "g6f.xlarge", "g6f.2xlarge", "g6f.4xlarge",
                          "g6.xlarge", "g6.2xlarge", "g6.4xlarge"]
    assert [r[1] for r in rows.values()] == ["1/8", "1/8", "1/4", "1/2", "full", "full", "full"]
    assert rows["g6f.2xlarge"][0].startswith("\u25cf ")  # the current type is marked...
    current = _item(cloud_tab, 2, 0)
    assert not current.flags() & Qt.ItemFlag.ItemIsSelectable  # ...and not offered as a target
    assert rows["g6f.4xlarge"][3] == "$0.95" and rows["g6f.4xlarge"][4] == "+$0.47"
    assert rows["g6f.large"][3] == "—" and rows["g6f.large"][4] == ""
    assert "no published price" in cloud_tab.picker.cloud_note.text()
    assert not cloud_tab.picker.select_instance_type("g6f.2xlarge")


def test_the_price_change_is_shown_before_the_typed_confirmation(qtbot: Any, cloud_tab: ResizeTab) -> None:
    assert cloud_tab.picker.select_instance_type("g6f.4xlarge")
    qtbot.waitUntil(lambda: cloud_tab.provider_plan is not None, timeout=5000)
    assert cloud_tab.provider_plan is not None and cloud_tab.provider_plan.instance_type == "g6f.4xlarge"
    comparison = cloud_tab.comparison
    assert comparison.difference.text() == "+$0.47/h"
    assert comparison.before.title.text() == "g6f.2xlarge" and comparison.after.title.text() == "g6f.4xlarge"
    assert "1/2 of an L4 (NVIDIA L4-12Q)" in comparison.after.hint.text()
    assert "catalog" in comparison.price_source.text()
    # Above the confirmation, which still needs the host's name typed.
    cloud_tab.show()
    qtbot.waitExposed(cloud_tab)
    assert comparison.isVisible() and cloud_tab.confirmation.isVisible()
    assert comparison.geometry().bottom() < cloud_tab.confirmation.geometry().top()
    assert not cloud_tab.confirmation.apply_button.isEnabled()
    cloud_tab.confirmation.field.setText("l4-dev")
    assert cloud_tab.confirmation.apply_button.isEnabled()
    SHOTS.mkdir(exist_ok=True)
    assert cloud_tab.grab().save(str(SHOTS / "resize-cloud.png"))


def test_a_host_priced_in_euros_shows_no_dollar_figures(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    profile = HostProfile(name="l4-eu", host="127.0.0.1", user="me", simulated=True, currency="EUR",
                          slice_profile="g6.xlarge", slice_prices={"g6f.4xlarge": 0.8}, price_per_hour=1.0,
                          provider=ProviderInfo(kind="aws", instance_id="i-0abc123", region="us-east-1"))
    widget, session = _tab(qtbot, bridge, tmp_path, profile)
    try:
        rows = _cells(widget)
        assert rows["g6f.4xlarge"][3] == "$0.80*"  # the host's own price (the tab's money is $-only)
        assert rows["g6f.2xlarge"][3] == "—"  # the catalog's dollars are not this host's euros
        assert "priced in EUR" in widget.picker.cloud_note.text()
    finally:
        qtbot.waitUntil(lambda: bridge.pending_count == 0, timeout=15000)
        widget.set_host(None)
        widget.close()
        session.close()


def test_a_cloud_host_not_connected_still_offers_its_types(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    # A stopped instance: no connection, no GPUs read; its type can change all the same.
    profile = HostProfile(name="l4-off", host="203.0.113.9", user="me", currency="USD", slice_profile="g6f.large",
                          provider=ProviderInfo(kind="aws", instance_id="i-0abc123", region="us-east-2"))
    session = HostSession(profile, bridge)  # never connected: nothing is dialled
    widget = ResizeTab()
    widget.resize(1100, 820)
    try:
        widget.set_host(HostContext(profile, session, bridge))
        assert widget.stack.currentIndex() == 1 and not widget.gpus
        assert list(_cells(widget))[:2] == ["g6f.large", "g6f.xlarge"]
        assert widget.picker.mig_section.isHidden()
        assert widget.picker.select_instance_type("g6f.4xlarge")
        assert widget.provider_plan is not None and widget.provider_plan.instance_type == "g6f.4xlarge"
        assert widget.comparison.difference.text() == "—"  # no price known for g6f.large: no made-up change
    finally:
        qtbot.waitUntil(lambda: bridge.pending_count == 0, timeout=15000)
        widget.set_host(None)
        widget.close()
        session.close()


def test_at_the_pickers_minimum_width_the_price_and_change_stay_in_view(qtbot: Any) -> None:
    from gpuws.core.resize.cloud import cloud_family
    from gpuws.ui.resize.target_picker import CLOUD_COLUMNS, TargetPicker

    profile = HostProfile(name="l4", host="203.0.113.9", currency="USD", slice_profile="g6f.2xlarge",
                          provider=ProviderInfo(kind="aws", region="us-east-2"))
    picker = TargetPicker()
    qtbot.addWidget(picker)
    picker.set_provider("aws")
    picker.set_cloud_family(cloud_family(profile))
    picker.resize(234, 600)  # what a 900 px window gives it
    picker.show()
    qtbot.waitExposed(picker)
    table = picker.cloud_table
    qtbot.waitUntil(lambda: table.horizontalHeader().length() <= table.viewport().width())
    for title in ("Instance type", "$ / h", "vs now"):
        assert not table.isColumnHidden(CLOUD_COLUMNS.index(title)), title
    assert not table.horizontalScrollBar().isVisible()
