"""A tidy "coming soon" page for tabs whose feature is not built yet."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from gpuws.ui.tabs import HostContext
from gpuws.ui.widgets import heading, muted_label


class PlaceholderTab(QWidget):
    """A centred title and one line saying what the tab will do."""

    def __init__(self, title: str, blurb: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.context: HostContext | None = None
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        self.title_label = heading(title, 1.3, self)
        self.blurb_label = muted_label(blurb, self)
        self.blurb_label.setWordWrap(True)
        for label in (self.title_label, self.blurb_label):
            label.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            layout.addWidget(label)
        layout.addStretch(2)

    def set_host(self, context: HostContext | None) -> None:
        self.context = context
