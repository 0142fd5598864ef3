"""The "Check this host" offer shown right after a host's first connection in this window.

One click runs `gpuws bench NAME --check`'s run (under two minutes): is the GPU the one paid for,
at the speed its datasheet promises, computing correctly, not throttled?
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget


class CheckOffer(QWidget):
    """A one-line offer with "Check this host" and "Not now"; each host is offered once."""

    check_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.offered: set[str] = set()
        self.label = QLabel("", self)
        self.label.setWordWrap(True)
        self.check_button = QPushButton("Check this host", self)
        self.check_button.setToolTip("Under 2 minutes: model and memory as sold, link, sustained GEMM and memory "
                                     "bandwidth against the datasheet, correctness, throttling; a report to send "
                                     "to the provider")
        self.check_button.clicked.connect(self._on_check)
        self.later_button = QPushButton("Not now", self)
        self.later_button.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.check_button)
        layout.addWidget(self.later_button)
        self.hide()

    def connected(self, host: str) -> bool:
        """A host is connected: offer the check if this is its first connection here."""
        if host in self.offered:
            return False
        self.offered.add(host)
        self.label.setText(f"First connection to {host}: check that its GPUs are what you pay for.")
        self.show()
        return True

    def _on_check(self) -> None:
        self.hide()
        self.check_requested.emit()
