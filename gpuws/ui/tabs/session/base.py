"""What every card of the Session tab shares: the shown host, the Workspace, its connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtWidgets import (
    QLabel,
    QVBoxLayout,
    QWidget,
)

from gpuws.app.workspace import Workspace
from gpuws.core.models import HostProfile
from gpuws.ui.tabs import HostContext
from gpuws.ui.widgets import Banner, Card, heading

if TYPE_CHECKING:
    from gpuws.app.hostio import HostConnection


class SessionBase(QWidget):
    """The state and helpers the Session tab's cards share; `SessionTab` builds it."""

    context: HostContext | None
    workspace: Workspace | None
    tunnel_status: QLabel
    access_status: QLabel
    banner: Banner  # the tab's warning strip (budget, idle)

    @property
    def profile(self) -> HostProfile | None:
        """The shown host's profile, if any."""
        return self.context.profile if self.context is not None else None

    def _card(self, parent: QWidget, title: str) -> tuple[Card, QVBoxLayout]:
        card = Card(parent)
        box = QVBoxLayout(card)
        box.setContentsMargins(16, 14, 16, 14)
        box.setSpacing(8)
        box.addWidget(heading(title, 1.1, card))
        return card, box

    def _connection(self) -> HostConnection | None:
        """The shown host's connection, or None (and each card says to connect first)."""
        if self.context is None or self.context.session.connection is None:
            self.tunnel_status.setText("Connect to the host first.")
            self.access_status.setText("Connect to the host first.")
            return None
        connection: HostConnection = self.context.session.connection
        return connection

