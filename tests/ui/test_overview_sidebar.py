"""The sidebar and the Overview tab, fed real inventories parsed from real nvidia-smi captures."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuws.core.models import HostProfile
from gpuws.ui.formatting import TIMES
from gpuws.ui.sidebar import HostSidebar
from gpuws.ui.tabs.overview import OverviewTab
from tests.ui.conftest import fixture_inventory

pytestmark = pytest.mark.gui


def _profiles() -> list[HostProfile]:
    return [
        HostProfile(name="a100-box", host="10.0.0.5", user="ubuntu", price_per_hour=1.89),
        HostProfile(name="demo", host="127.0.0.1", port=2222, simulated=True),
    ]


def test_sidebar_lists_hosts_with_price_and_badge(qtbot: Any) -> None:
    sidebar = HostSidebar()
    qtbot.addWidget(sidebar)
    sidebar.set_profiles(_profiles())
    entries = {e.name: e for e in sidebar.entries()}
    assert entries["a100-box"].price == "$1.89/h"
    assert entries["a100-box"].address == "ubuntu@10.0.0.5"
    assert entries["demo"].simulated and not entries["a100-box"].simulated
    assert entries["demo"].address == "127.0.0.1:2222"
    assert sidebar.current_name() == "a100-box"  # the first host is selected


@pytest.mark.parametrize(
    "state", ["connecting", "connected", "reconnecting", "auth_failed", "host_key_changed", "unreachable", "no_driver"]
)
def test_sidebar_reflects_each_state(qtbot: Any, state: str) -> None:
    sidebar = HostSidebar()
    qtbot.addWidget(sidebar)
    sidebar.set_profiles(_profiles())
    sidebar.set_state("a100-box", state, "why it is so")
    assert sidebar.entry("a100-box").state == state  # type: ignore[union-attr]
    assert sidebar.entry("demo").state == "disconnected"  # type: ignore[union-attr]
    item = sidebar.list_widget().item(0)
    assert "why it is so" in item.toolTip()
    sidebar.resize(300, 200)
    sidebar.show()
    image = sidebar.grab().toImage()  # the delegate paints without error in every state
    assert not image.isNull()


def test_sidebar_gpu_summary_from_real_inventory(qtbot: Any) -> None:
    sidebar = HostSidebar()
    qtbot.addWidget(sidebar)
    sidebar.set_profiles(_profiles())
    inventory = fixture_inventory("a100-sxm4-v12.xml")
    sidebar.set_inventory("a100-box", inventory)
    n = len(inventory.gpus)
    assert sidebar.entry("a100-box").summary == f"{n}{TIMES} A100-SXM4-80GB"  # type: ignore[union-attr]
    # States and summaries survive a reload of the profile list.
    sidebar.set_state("a100-box", "connected")
    sidebar.set_profiles(_profiles())
    assert sidebar.entry("a100-box").state == "connected"  # type: ignore[union-attr]
    assert sidebar.entry("a100-box").summary.endswith("A100-SXM4-80GB")  # type: ignore[union-attr]


def test_overview_renders_real_fixture(qtbot: Any) -> None:
    tab = OverviewTab()
    qtbot.addWidget(tab)
    inventory = fixture_inventory("a100-sxm4-v12.xml")
    tab.show_inventory(inventory)
    assert len(tab.gpu_cards) == len(inventory.gpus) >= 1
    gpu = inventory.gpus[0]
    grid = tab.gpu_cards[0].grid
    assert grid.value("Driver / CUDA") == f"{gpu.driver_version} / {gpu.cuda_version}"
    assert gpu.driver_version and gpu.driver_version in grid.value("Driver / CUDA")  # type: ignore[operator]
    assert tab.gpu_cards[0].uuid_label.text() == gpu.uuid
    assert grid.value("MIG", ).startswith(gpu.mig_mode or "Not supported")  # type: ignore[union-attr]
    assert grid.value("Power limit") == f"{gpu.power_limit_w:.0f} W"
    assert tab.facts_card is not None and tab.facts_card.grid.value("CPUs") == "32"
    assert "✓ PyTorch" in (tab.facts_card.grid.value("Tools") or "")
    assert not tab.simulated_banner.isVisible()  # a real capture is never labelled simulated


def test_overview_warns_about_a_degraded_link(qtbot: Any) -> None:
    tab = OverviewTab()
    qtbot.addWidget(tab)
    inventory = fixture_inventory("a100-sxm4-v12.xml")
    healthy = replace(inventory.gpus[0], pcie_width_current=16, pcie_width_max=16, pcie_gen_current=4, pcie_gen_max=4)
    degraded = replace(healthy, index=1, pcie_width_current=8)
    inventory.gpus = [healthy, degraded]
    tab.show_inventory(inventory)
    assert tab.gpu_cards[0].warning is None
    assert tab.gpu_cards[1].warning is not None
    assert "x8 of x16" in tab.gpu_cards[1].warning.text()
    assert tab.gpu_cards[1].grid.value("PCIe link") == "Gen4 x8 (max Gen4 x16)"


def test_overview_labels_a_simulated_host(qtbot: Any) -> None:
    tab = OverviewTab()
    qtbot.addWidget(tab)
    tab.show()
    inventory = fixture_inventory("tesla-t4.xml")
    inventory.host.simulated = True
    tab.show_inventory(inventory)
    assert tab.simulated_banner.isVisible()
    assert "SIMULATED" in tab.simulated_banner.text()
    tab.show_inventory(None)
    assert tab.gpu_cards == [] and "Select a host" in tab.message.text()


def test_secondary_text_follows_a_palette_switch(qtbot: Any) -> None:
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    from gpuws.ui.theme import dark_palette, is_dark, light_palette

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    original = app.palette()
    tab = OverviewTab()
    qtbot.addWidget(tab)
    tab.show()  # Qt propagates palette changes to shown widgets
    tab.show_inventory(fixture_inventory())
    key = tab.gpu_cards[0].grid.findChildren(type(tab.message))[0]  # a muted key label
    try:
        app.setPalette(light_palette())
        qtbot.wait(10)
        light_text = key.palette().color(QPalette.ColorRole.WindowText).lightness()
        app.setPalette(dark_palette())
        qtbot.wait(10)
        assert is_dark()
        dark_text = key.palette().color(QPalette.ColorRole.WindowText).lightness()
        window = app.palette().color(QPalette.ColorRole.Window).lightness()
        assert dark_text > light_text  # re-derived: light grey on dark, dark grey on light
        assert abs(dark_text - window) > 60  # and still readable against the background
    finally:
        app.setPalette(original)


def test_a_short_card_keeps_its_title_at_the_top_beside_a_taller_one(qtbot: Any) -> None:
    """Found in a screenshot: a GPU card sharing a row with a MIG card (taller, its devices listed)
    spread the extra height as bands above and below its title."""
    from gpuws.core.inventory import Inventory

    inventory = fixture_inventory("a100-sxm4-v12.xml")
    with_mig = inventory.gpus[0]
    without = replace(with_mig, index=1, mig_devices=[], mig_mode="Disabled")
    tab = OverviewTab()
    qtbot.addWidget(tab)
    tab.resize(1100, 900)
    tab.show()
    tab.show_inventory(Inventory(inventory.host, [with_mig, without]))
    qtbot.waitUntil(lambda: len(tab.gpu_cards) == 2 and tab.gpu_cards[1].height() > 0)
    tall, short = tab.gpu_cards
    qtbot.waitUntil(lambda: short.height() == tall.height())  # one grid row
    assert short.grid.geometry().top() <= tall.grid.geometry().top() + 1  # facts start at the same height
