"""Guards against a Qt binding that corrupts the interpreter (PySide6 6.12.0 on Python 3.11).

That release dropped a reference to None on every Qt call returning nothing; a dashboard
repainting at 10 fps aborts the whole app (`Fatal Python error: none_dealloc`) within minutes.
"""

from __future__ import annotations

import sys

import pytest
from PySide6.QtWidgets import QWidget

pytestmark = pytest.mark.gui


def test_void_qt_calls_keep_none_alive(qtbot: object) -> None:
    widget = QWidget()
    try:
        before = sys.getrefcount(None)
        for _ in range(2000):
            widget.update()
            widget.setVisible(False)
        after = sys.getrefcount(None)
    finally:
        widget.deleteLater()
    # Other threads may hold a few references for a moment; a leak would be thousands.
    assert after >= before - 100, f"the Qt binding leaks references to None ({before} -> {after})"
