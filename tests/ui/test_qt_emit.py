"""Guards against PySide6 6.12.0's emit bug: `SignalInstance.emit()` returns True without a
reference, so each signal emitted from Python drains one reference to True until CPython aborts
("Fatal Python error: bool_dealloc"). See also test_qt_binding.py (the same release's None leak).
"""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import QObject, Signal

pytestmark = pytest.mark.gui


class _Emitter(QObject):
    text = Signal(str)


def test_emitting_keeps_true_alive() -> None:
    emitter = _Emitter()
    received: list[str] = []
    emitter.text.connect(received.append)
    before = sys.getrefcount(True)
    for _ in range(2000):
        emitter.text.emit("x")
    assert len(received) == 2000
    # A leaking binding loses exactly one per emit (2000); other threads move it by a few at most.
    assert sys.getrefcount(True) >= before - 100, "the Qt binding leaks references to True on emit"
