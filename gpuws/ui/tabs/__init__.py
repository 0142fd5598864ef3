"""The tabs of the host detail area. Each is a QWidget with `set_host(context | None)`.

Tabs receive a `HostContext` when the selected host changes (None when no host is selected).
A tab that needs the host's connection reads `context.session.connection` (a connected
`gpuws.app.hostio.HostConnection`, or None) and runs remote work through
`context.bridge.run_async(coro, on_success, on_failure)`, never on the GUI thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from PySide6.QtWidgets import QWidget

from gpuws.core.models import HostProfile

if TYPE_CHECKING:
    from gpuws.ui.bridge import AsyncBridge
    from gpuws.ui.session_controller import HostSession
    from gpuws.ui.telemetry.hub import TelemetryHub


@dataclass
class HostContext:
    """What a tab needs to show one host."""

    profile: HostProfile
    session: HostSession  # state, inventory, signals: state_changed, inventory_changed
    bridge: AsyncBridge
    hub: TelemetryHub | None = None  # the window's telemetry (over its Workspace); None: the tab makes one


class HostTab(Protocol):
    """The interface every tab implements."""

    def set_host(self, context: HostContext | None) -> None: ...


def create_tabs(parent: QWidget | None = None) -> list[tuple[str, QWidget]]:
    """The tabs in display order (Ctrl+1..6), as (title, widget)."""
    from gpuws.ui.tabs.benchmarks import BenchmarksTab
    from gpuws.ui.tabs.health import HealthTab
    from gpuws.ui.tabs.overview import OverviewTab
    from gpuws.ui.tabs.resize import ResizeTab
    from gpuws.ui.tabs.session import SessionTab
    from gpuws.ui.tabs.telemetry import TelemetryTab

    return [
        ("Overview", OverviewTab(parent)),
        ("Telemetry", TelemetryTab(parent)),
        ("Benchmarks", BenchmarksTab(parent)),
        ("Resize", ResizeTab(parent)),
        ("Session", SessionTab(parent)),
        ("Health", HealthTab(parent)),
    ]
