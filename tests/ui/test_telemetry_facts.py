"""The painted facts block of a GPU card: texts, wrapping and the height that follows it."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtGui import QColor, QImage

from gpuws.ui.telemetry.facts import FactsBlock
from gpuws.ui.telemetry.metrics import NOT_SUPPORTED

pytestmark = pytest.mark.gui


def test_values_wrap_and_the_height_follows(qtbot: Any) -> None:
    block = FactsBlock(["Fan", "Processes"])
    qtbot.addWidget(block)
    block.resize(260, 40)
    assert block.text("Fan") == NOT_SUPPORTED
    short = block.heightForWidth(260)
    block.set_text("Processes", ", ".join(f"python3 ({pid}) 12.5 GiB" for pid in range(4240, 4246)))
    assert block.heightForWidth(260) >= short + 2 * block.fontMetrics().height()  # wrapped to more lines
    assert block.heightForWidth(2000) == short  # one line when there is room
    block.resize(260, block.heightForWidth(260))
    image = QImage(block.size(), QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    block.render(image)
    white = QColor("white")
    inked = {y for y in range(image.height()) for x in range(image.width()) if image.pixelColor(x, y) != white}
    assert max(inked) > 3 * block.fontMetrics().height()  # the wrapped lines are painted, not cut off
