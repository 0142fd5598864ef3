"""The Overview tab: the host's inventory, one card per GPU plus the host's facts."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QResizeEvent
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from gpuws.core.inventory import GpuInfo, HostFacts, Inventory, MigDevice
from gpuws.core.simulation import SIM_LABEL
from gpuws.ui import theme
from gpuws.ui.formatting import memory_text, or_dash, pcie_text, pcie_warning, power_text, short_gpu_name
from gpuws.ui.tabs import HostContext
from gpuws.ui.widgets import Badge, Banner, BannerKind, Card, KeyValueGrid, heading, muted_label, plain_tooltip

CARD_MIN_WIDTH = 380  # below this a GPU card wraps its values; wider windows get more columns

SIMULATED_TEXT = (
    f"{SIM_LABEL} — this host is the gpuws GPU simulator. Its GPUs, numbers and processes are "
    "generated; nothing here describes real hardware."
)

NO_DRIVER_TEXT = "No NVIDIA driver found on this host (nvidia-smi is missing)."


class GpuCard(Card):
    """One GPU: title, then its properties; MIG devices and link warnings where they apply."""

    def __init__(self, gpu: GpuInfo, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.gpu = gpu
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 14, 16, 14)
        layout.setSpacing(10)

        title_row = QHBoxLayout()
        title_row.setSpacing(10)
        title_row.addWidget(heading(f"GPU {gpu.index} · {short_gpu_name(gpu.name)}", 1.15, self))
        title_row.addStretch(1)
        if gpu.is_vgpu_slice:
            title_row.insertWidget(1, Badge("vGPU SLICE", "warning", self))
        title_row.addWidget(heading(memory_text(gpu.memory_total_mib), 1.15, self))
        layout.addLayout(title_row)

        self.warning: Banner | None = None
        if (text := pcie_warning(gpu)) is not None:
            self.warning = Banner(BannerKind.WARNING, f"{text} — transfers to and from this GPU are slower.", self)
            layout.addWidget(self.warning)

        grid = KeyValueGrid(self)
        self.grid = grid
        grid.add_row("Driver / CUDA", f"{or_dash(gpu.driver_version)} / {or_dash(gpu.cuda_version)}")
        grid.add_row("Compute capability", or_dash(gpu.compute_capability))
        grid.add_row("MIG", _mig_text(gpu))
        grid.add_row("Virtualization", _virt_text(gpu))
        grid.add_row(
            "PCIe link",
            pcie_text(gpu),
            colour=theme.warning_colour if gpu.pcie_degraded else None,
        )
        grid.add_row("Power limit", power_text(gpu.power_limit_w))
        grid.add_row("ECC", or_dash(gpu.ecc_mode))
        grid.add_row("Persistence", or_dash(gpu.persistence_mode))
        grid.add_row("PCI bus", or_dash(gpu.pci_bus_id))
        if gpu.mig_devices:
            grid.add_row("MIG devices", "\n".join(_mig_device_line(d) for d in gpu.mig_devices))
        layout.addWidget(grid)
        # A card sharing a grid row with a taller one gets the extra height here, under its facts,
        # not spread as bands around its title.
        layout.addStretch(1)
        # The UUID is long and unbreakable: a small footer line that never dictates the card's width.
        self.uuid_label = muted_label(or_dash(gpu.uuid), self)
        small = QFont(self.uuid_label.font())
        small.setPointSizeF(small.pointSizeF() * 0.85)
        self.uuid_label.setFont(small)
        self.uuid_label.setToolTip(plain_tooltip(gpu.uuid or ""))  # the UUID comes from the host
        self.uuid_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.uuid_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.uuid_label)


class HostFactsCard(Card):
    """Hostname, OS, kernel, CPUs, RAM and which GPU tools the host has."""

    def __init__(self, facts: HostFacts, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 14, 16, 14)
        layout.setSpacing(10)
        layout.addWidget(heading(f"Host · {facts.hostname}" if facts.hostname else "Host", 1.15, self))
        grid = KeyValueGrid(self)
        self.grid = grid
        grid.add_row("OS", or_dash(facts.os))
        grid.add_row("Kernel", or_dash(facts.kernel))
        grid.add_row("CPUs", or_dash(facts.cpu_count))
        grid.add_row("RAM", memory_text(facts.ram_mib))
        grid.add_row("Tools", _tools_text(facts))
        layout.addWidget(grid)


class OverviewTab(QWidget):
    """Shows the selected host's inventory; follows the session's signals while shown.

    Interface: `OverviewTab(parent=None)`, `set_host(context | None)`, `show_inventory(inventory | None)`.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.context: HostContext | None = None
        self.inventory: Inventory | None = None
        self.gpu_cards: list[GpuCard] = []
        self._grid: QGridLayout | None = None
        self._columns = 0
        self.facts_card: HostFactsCard | None = None
        # The banner sits above the scrolling cards so it stays in view.
        self.simulated_banner = Banner(BannerKind.SIMULATED, SIMULATED_TEXT, self)
        self.simulated_banner.hide()
        self.message = muted_label("", self)

        self._scroll = QScrollArea(self)
        self._scroll.setWidgetResizable(True)
        self._scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(20, 14, 20, 0)
        outer.setSpacing(10)
        outer.addWidget(self.simulated_banner)
        outer.addWidget(self._scroll, 1)
        self._rebuild()

    def set_host(self, context: HostContext | None) -> None:
        """Show `context`'s host (None: no host)."""
        if self.context is not None:
            self.context.session.inventory_changed.disconnect(self.show_inventory)
            self.context.session.state_changed.disconnect(self._on_state)
        self.context = context
        if context is not None:
            context.session.inventory_changed.connect(self.show_inventory)
            context.session.state_changed.connect(self._on_state)
        self.show_inventory(None if context is None else context.session.inventory)

    def show_inventory(self, inventory: Inventory | None) -> None:
        """Show the host's GPUs and facts (None: not probed yet)."""
        self.inventory = inventory
        self._rebuild()

    def _on_state(self, _state: str, _detail: str) -> None:
        if self.inventory is None:  # only the waiting message depends on the state
            self._rebuild()

    def _rebuild(self) -> None:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 4, 10, 18)  # right: clear of the scroll bar
        layout.setSpacing(14)
        self.gpu_cards = []
        self.facts_card = None

        inv = self.inventory
        simulated = bool(inv and inv.simulated) or bool(self.context and self.context.profile.simulated)
        self.simulated_banner.setVisible(simulated)
        # A fresh label per page: the old page (and everything on it) is deleted below.
        self.message = muted_label("", page)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setWordWrap(True)
        if inv is None:
            self.message.setText(self._waiting_text())
            layout.addStretch(1)
            layout.addWidget(self.message)
            layout.addStretch(2)
        else:
            self.message.hide()
            if not inv.host.driver_found:
                layout.addWidget(Banner(BannerKind.ERROR, NO_DRIVER_TEXT, page))
            elif not inv.gpus:
                layout.addWidget(Banner(BannerKind.WARNING, "The driver reports no GPUs on this host.", page))
            self._grid = QGridLayout()
            self._grid.setSpacing(14)
            layout.addLayout(self._grid)
            self.gpu_cards = [GpuCard(gpu, page) for gpu in inv.gpus]
            self._columns = 0
            self._place_cards()
            self.facts_card = HostFactsCard(inv.host, page)
            layout.addWidget(self.facts_card)
            layout.addStretch(1)
        self._scroll.setWidget(page)  # deletes the previous page

    def columns(self) -> int:
        """How many GPU cards sit side by side at the current width."""
        return self._columns

    def _place_cards(self) -> None:
        if self._grid is None or not self.gpu_cards:
            return
        width = self._scroll.viewport().width() or self.width()
        # Never narrower than a card's content (long UUIDs do not wrap), so nothing scrolls sideways.
        card_width = max(CARD_MIN_WIDTH, *(c.minimumSizeHint().width() for c in self.gpu_cards)) + 14
        columns = max(1, min(len(self.gpu_cards), width // card_width))
        if columns == self._columns:
            return
        self._columns = columns
        for card in self.gpu_cards:
            self._grid.removeWidget(card)
        for i, card in enumerate(self.gpu_cards):
            self._grid.addWidget(card, i // columns, i % columns)
        for col in range(4):
            self._grid.setColumnStretch(col, 1 if col < columns else 0)

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Qt: place the cards for the new width."""
        super().resizeEvent(event)
        self._place_cards()

    def _waiting_text(self) -> str:
        if self.context is None:
            return "Select a host on the left."
        state = self.context.session.state
        if state in ("connecting", "reconnecting"):
            return "Connecting and reading the host's inventory…"
        if state == "disconnected":
            return "Not connected. Press Ctrl+R to connect and probe this host."
        return f"{theme.state_label(state)}. Press Ctrl+R to try again."


def _mig_text(gpu: GpuInfo) -> str:
    if gpu.mig_mode is None:
        return "Not supported"
    text = gpu.mig_mode
    if gpu.mig_mode_pending and gpu.mig_mode_pending != gpu.mig_mode:
        text += f" (pending: {gpu.mig_mode_pending} after reset)"
    if gpu.mig_devices:
        text += f", {len(gpu.mig_devices)} device{'s' if len(gpu.mig_devices) != 1 else ''}"
    return text


def _mig_device_line(device: MigDevice) -> str:
    parts = [f"#{device.index}", device.profile or "unknown profile", memory_text(device.memory_total_mib)]
    if device.gpu_instance_id is not None:
        parts.append(f"GI {device.gpu_instance_id} / CI {or_dash(device.compute_instance_id)}")
    return " · ".join(parts)


def _virt_text(gpu: GpuInfo) -> str:
    if gpu.is_vgpu_slice:
        return f"vGPU guest, slice {or_dash(gpu.vgpu_profile)}"
    return or_dash(gpu.virtualization_mode)


def _tools_text(facts: HostFacts) -> str:
    tools = [
        ("python3", facts.has_python3),
        ("nvidia-ml-py", facts.has_nvml),
        ("PyTorch", facts.has_torch),
        ("CuPy", facts.has_cupy),
        ("nvcc", facts.has_nvcc),
    ]
    return "   ".join(f"{'✓' if present else '✗'} {name}" for name, present in tools)

