"""The FLEETS section under the host list, and the few lines that hook fleets into the main window."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from gpuws.core.fleet.model import match_profile
from gpuws.core.fleet.profiles import FleetProfile, FleetStore
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.fleet.view import FleetView
from gpuws.ui.widgets import muted_label


class FleetList(QWidget):
    """Fleet profiles (from fleets.toml, read off the GUI thread). Emits `fleet_selected(FleetProfile)`."""

    fleet_selected = Signal(object)

    def __init__(self, bridge: AsyncBridge | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.list = QListWidget(self)
        self.list.setAccessibleName("Fleets")
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setFrameShape(QListWidget.Shape.NoFrame)
        self.list.setMaximumHeight(120)
        self.list.currentItemChanged.connect(self._on_current)
        header = QHBoxLayout()
        header.setContentsMargins(12, 10, 8, 4)
        header.addWidget(muted_label("FLEETS", self))
        header.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(header)
        layout.addWidget(self.list)
        self.setVisible(False)  # shown once there is a fleet

    def reload(self) -> None:
        if self.bridge is not None and self.bridge.running:
            self.bridge.run_blocking(lambda: FleetStore().load(), self.set_fleets, lambda _exc: None, owner=self)

    def set_fleets(self, fleets: list[FleetProfile]) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        for fleet in fleets:
            item = QListWidgetItem(fleet.name)
            item.setData(Qt.ItemDataRole.UserRole, fleet)
            item.setToolTip(fleet.prometheus + (f" via {fleet.via}" if fleet.via else ""))
            self.list.addItem(item)
        self.list.setCurrentRow(-1)
        self.list.blockSignals(False)
        self.setVisible(bool(fleets))

    def clear_selection(self) -> None:
        self.list.blockSignals(True)
        self.list.setCurrentRow(-1)
        self.list.blockSignals(False)

    def _on_current(self, current: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if current is not None:
            self.fleet_selected.emit(current.data(Qt.ItemDataRole.UserRole))


def install_fleets(window: Any) -> FleetView:
    """Add the FLEETS list under the host sidebar and the fleet view to the main window's stack."""
    fleets = FleetList(window.bridge, window.sidebar)
    window.sidebar.layout().addWidget(fleets)
    view = FleetView(window.bridge, window)
    window.stack.addWidget(view)

    def show(profile: FleetProfile) -> None:
        window.sidebar.list_widget().setCurrentRow(-1)  # the host detail steps aside
        window.stack.setCurrentWidget(view)
        view.open_profile(profile)

    def inventories() -> dict[str, list[str]]:
        return {name: [g.uuid for g in s.inventory.gpus if g.uuid] for name, s in window.sessions.items()
                if getattr(s, "inventory", None) is not None}

    def open_host(host: str, uuid: str) -> str | None:
        name = match_profile(window.all_profiles(), host, uuid or None, inventories())
        if name is None:
            view.show_message(f"No host profile matches {host} ({uuid or 'no UUID'}); add one to open SSH, "
                              "benchmark or resize it.")
            return None
        fleets.clear_selection()
        view.close_fleet()
        window.sidebar.select(name)
        return name

    def open_resize(host: str, uuid: str, gpu: int, target: str) -> None:
        # As the host's Advice strip does: the host, then its Resize wizard with the target chosen
        # (applied once the host's GPUs have been read).
        if open_host(host, uuid) is not None:
            window.detail.open_resize(gpu, target)

    # The advice column reads the profiles the window holds (and the UUIDs its hosts reported)
    # on the GUI thread; the advice itself is computed on the loop thread.
    view.host_profiles = lambda: (list(window.all_profiles()), inventories())
    fleets.fleet_selected.connect(show)
    window.sidebar.host_selected.connect(lambda name: fleets.clear_selection() if name else None)
    view.host_requested.connect(open_host)
    view.resize_requested.connect(open_resize)
    window.fleet_list = fleets
    fleets.reload()
    return view
