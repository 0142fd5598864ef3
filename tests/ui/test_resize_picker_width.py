"""The Resize tab's target table keeps $ / h in view at its narrowest (a 900 px window, issue 27):
columns that do not fit are left out (Compute, then "vs now"), never pushed behind a scroll bar."""

from __future__ import annotations

from typing import Any

import pytest

from gpuws.core.resize.pricing import PriceBook
from gpuws.core.resize.state import GpuMigState
from gpuws.ui.resize.target_picker import COLUMNS, TargetPicker

pytestmark = pytest.mark.gui

PRICES = PriceBook(2.45, {"full": 2.45, "1g.10gb": 0.30, "1g.20gb": 0.42, "2g.20gb": 0.62, "3g.40gb": 0.95,
                          "4g.40gb": 1.30, "7g.80gb": 2.45})  # fmt: skip
PRICE = COLUMNS.index("$ / h")


def _picker(qtbot: Any, width: int) -> TargetPicker:
    picker = TargetPicker()
    qtbot.addWidget(picker)
    picker.resize(width, 500)
    picker.show()
    qtbot.waitExposed(picker)
    picker.show_targets(GpuMigState(0, "NVIDIA A100-SXM4-80GB", None, "Disabled", "Disabled"), PRICES)
    return picker


def _fits(picker: TargetPicker) -> None:
    table, header = picker.table, picker.table.horizontalHeader()
    assert not table.horizontalScrollBar().isVisible()
    assert header.length() <= table.viewport().width()
    for col in range(len(COLUMNS)):
        if not table.isColumnHidden(col):  # every shown column is as wide as its widest text
            assert header.sectionSize(col) >= table.sizeHintForColumn(col), COLUMNS[col]


def test_at_its_minimum_width_price_stays_in_view(qtbot: Any) -> None:
    picker = _picker(qtbot, 234)  # what a 900 px window gives it (issue 27: $ / h was scrolled off)
    _fits(picker)
    table = picker.table
    assert not table.isColumnHidden(PRICE) and not table.isColumnHidden(0)
    assert table.item(1, PRICE).text().startswith("$")
    assert "$ / h: " in table.item(1, 0).toolTip()  # what is left out is in the row's tooltip
    assert "Compute: " in table.item(1, 0).toolTip()


def test_with_room_every_column_is_shown_and_narrowing_refits(qtbot: Any) -> None:
    picker = _picker(qtbot, 520)
    assert not any(picker.table.isColumnHidden(col) for col in range(len(COLUMNS)))
    _fits(picker)
    picker.resize(234, 500)
    qtbot.waitUntil(lambda: picker.table.width() <= 234)
    _fits(picker)
    assert not picker.table.isColumnHidden(PRICE)
