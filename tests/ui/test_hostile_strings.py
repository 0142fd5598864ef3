"""Walk the window with hostile strings in every remote field: no widget may interpret them as
rich text (labels are plain text, tooltips are escaped) (issue 13)."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QLabel, QListView, QWidget

from gpuws.core.inventory import GpuInfo, HostFacts, Inventory, MigDevice
from gpuws.core.models import HostProfile
from gpuws.core.profiles import ProfileStore
from gpuws.ui.tabs.overview import OverviewTab

pytestmark = pytest.mark.gui

MARK = "<b>HOSTILE</b>"
HOSTILE = f"{MARK}<img src='file:///etc/passwd'><a href='x'>click</a>\n\u202eevil\u200b&amp;"


def hostile_inventory() -> Inventory:
    gpu = GpuInfo(
        index=0, name=f"NVIDIA A100 {HOSTILE}", uuid=f"GPU-{HOSTILE}", pci_bus_id=HOSTILE, memory_total_mib=81920,
        driver_version=HOSTILE, cuda_version=HOSTILE, compute_capability=HOSTILE, mig_mode=HOSTILE,
        mig_devices=[MigDevice(index=0, gpu_instance_id=1, compute_instance_id=0, profile=HOSTILE,
                               memory_total_mib=9856, sm_count=14, uuid=HOSTILE)],
        virtualization_mode=HOSTILE, ecc_mode=HOSTILE, persistence_mode=HOSTILE, product_brand=HOSTILE,
        serial=HOSTILE,
    )
    facts = HostFacts(hostname=HOSTILE, os=HOSTILE, kernel=HOSTILE, cpu_count=8, ram_mib=64_000)
    return Inventory(facts, [gpu])


def interpreting_widgets(root: QWidget) -> list[str]:
    """Widgets that would render MARK as markup: a non-plain label or an unescaped tooltip."""
    bad: list[str] = []
    for widget in [root, *root.findChildren(QWidget)]:
        if isinstance(widget, QLabel) and MARK in widget.text() \
                and widget.textFormat() != Qt.TextFormat.PlainText:
            bad.append(f"label {widget.objectName() or type(widget).__name__}: {widget.text()[:40]!r}")
        if MARK in widget.toolTip():
            bad.append(f"tooltip of {type(widget).__name__}: {widget.toolTip()[:40]!r}")
        if isinstance(widget, QAbstractItemView) and widget.model() is not None:
            model = widget.model()
            root_index = widget.rootIndex()
            for row in range(model.rowCount(root_index)):
                columns = 1 if isinstance(widget, QListView) else model.columnCount(root_index)
                for column in range(columns):
                    tip = model.index(row, column).data(Qt.ItemDataRole.ToolTipRole)
                    if isinstance(tip, str) and MARK in tip:
                        bad.append(f"item tooltip in {type(widget).__name__}: {tip[:40]!r}")
    return bad


def shown_text(root: QWidget) -> str:
    return "\n".join(w.text() for w in root.findChildren(QLabel))


def test_plain_tooltip_escapes_markup() -> None:
    from gpuws.ui.widgets import plain_tooltip

    tip = plain_tooltip(HOSTILE)
    assert MARK not in tip and "&lt;b&gt;HOSTILE&lt;/b&gt;" in tip
    assert plain_tooltip("") == ""


def test_overview_tab_shows_hostile_inventory_as_plain_text(qtbot: Any) -> None:
    tab = OverviewTab()
    qtbot.addWidget(tab)
    tab.show_inventory(hostile_inventory())
    assert MARK in shown_text(tab)  # the values are there, literally
    assert interpreting_widgets(tab) == []


def test_window_with_hostile_profile_state_and_inventory(make_window: Any, qtbot: Any) -> None:
    ProfileStore().add(HostProfile(name="rig", host="rig.example", notes=HOSTILE, tags=["t"]))
    window = make_window()
    window.sidebar.set_state("rig", "unreachable", HOSTILE)
    window.sidebar.set_inventory("rig", hostile_inventory())
    for tab in window.findChildren(OverviewTab):
        tab.show_inventory(hostile_inventory())
    qtbot.wait(10)
    assert interpreting_widgets(window) == []
