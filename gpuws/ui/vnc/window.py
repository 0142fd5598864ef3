"""The viewer window: the host's name (and SIMULATED badge), the GPU and renderer line from the
desktop check, a toolbar, the remote screen and its connection state.

Closing it disconnects the viewer only: the desktop keeps running on the host (Stop desktop in the
Session tab, or `gpuws desktop NAME --stop`, ends it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpuws.app.viewer import ViewerState
from gpuws.core.simulation import SIM_LABEL
from gpuws.ui.vnc.keys import COMBOS
from gpuws.ui.vnc.view import VncView
from gpuws.ui.widgets import Badge, muted_label

if TYPE_CHECKING:
    from gpuws.core.desktop import DesktopCheck

# Tight JPEG quality levels offered, by name; None is lossless (no JPEG).
QUALITIES: tuple[tuple[str, int | None], ...] = (("Low (fast)", 2), ("Medium", 5), ("High", 8), ("Lossless", None))
STATE_TEXT = {ViewerState.CONNECTING: "Connecting…", ViewerState.CONNECTED: "Connected",
              ViewerState.RECONNECTING: "Reconnecting…", ViewerState.FAILED: "Disconnected",
              ViewerState.CLOSED: "Disconnected"}


def renderer_line(found: DesktopCheck | None) -> str:
    """'GPU 0: NVIDIA H100 · OpenGL: ...' from the desktop's check (what `--check` prints)."""
    if found is None:
        return "GPU and renderer: not checked"
    first = found.nvenc[0] if found.nvenc else None
    gpus = "no NVIDIA GPU" if first is None else f"GPU {first.index}: {first.name}" + (
        f" (+{len(found.nvenc) - 1} more)" if len(found.nvenc) > 1 else "")
    return f"{gpus} · OpenGL: {found.opengl_renderer or 'unknown'}" + (" · VirtualGL" if found.virtualgl else "")


class VncWindow(QMainWindow):
    """A remote desktop in a gpuws window."""

    closed = Signal()

    def __init__(self, host: str, port: int, password: str, *, simulated: bool = False,
                 found: DesktopCheck | None = None, display: int | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host = host
        where = f" :{display}" if display is not None else ""
        self.setWindowTitle(f"{host}{where} — gpuws desktop")
        self.view = VncView(port, password, quality=8)
        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.header = QWidget(central)
        head = QHBoxLayout(self.header)
        head.setContentsMargins(8, 4, 8, 4)
        name = QLabel(f"<b>{host}</b>{where}", self.header)
        name.setTextFormat(Qt.TextFormat.RichText)
        head.addWidget(name)
        self.sim_badge = Badge(SIM_LABEL, parent=self.header) if simulated else None
        if self.sim_badge is not None:
            head.addWidget(self.sim_badge)
        self.renderer = muted_label(renderer_line(found), self.header)
        self.renderer.setToolTip("\n".join(f"GPU {g.index}: {g.name}" for g in found.nvenc) if found else "")
        self.renderer.setMinimumWidth(0)  # never wider than the window: a long line is cut, whole in the tooltip
        self.renderer.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        head.addWidget(self.renderer, 1)
        self.state_label = muted_label("Connecting…", self.header)
        self.state_label.setMaximumWidth(480)  # a long reason is in the tooltip
        head.addWidget(self.state_label)
        layout.addWidget(self.header)
        self.screen_area = QScrollArea(central)
        self.screen_area.setWidgetResizable(True)
        self.screen_area.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.screen_area.setFrameShape(QScrollArea.Shape.NoFrame)
        self.screen_area.setWidget(self.view)
        layout.addWidget(self.screen_area, 1)
        self.setCentralWidget(central)
        self._toolbar()
        self.view.state_changed.connect(self._state)
        self.resize(1280, 800)

    def _toolbar(self) -> None:
        bar = self.addToolBar("Viewer")
        bar.setMovable(False)
        self.full_screen_action = QAction("Full screen", self, checkable=True)
        self.full_screen_action.toggled.connect(self.set_full_screen)
        self.scale_action = QAction("Scale to window", self, checkable=True, checked=True)
        self.scale_action.setToolTip("Scale the remote screen to the window (it also follows the window's size); "
                                     "off: 1:1 pixels")
        self.scale_action.toggled.connect(self.set_scaled)
        keys = QToolButton(bar)
        keys.setText("Send keys")
        keys.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(keys)
        for label, combo in COMBOS.items():
            menu.addAction(label).triggered.connect(self._sender(combo))
        keys.setMenu(menu)
        self.keys_menu = menu
        self.quality = QComboBox(bar)
        for label, level in QUALITIES:
            self.quality.addItem(f"Quality: {label}", level)
        self.quality.setCurrentIndex(2)
        self.quality.currentIndexChanged.connect(lambda _i: self.view.session.set_quality(self.quality.currentData()))
        self.disconnect_action = QAction("Disconnect", self)
        self.disconnect_action.setToolTip("Close the viewer; the desktop keeps running on the host")
        self.disconnect_action.triggered.connect(self.close)
        for item in (self.full_screen_action, self.scale_action):
            bar.addAction(item)
        bar.addWidget(keys)
        bar.addWidget(self.quality)
        bar.addAction(self.disconnect_action)
        self.toolbar = bar

    def _sender(self, combo: tuple[int, ...]) -> Callable[[], None]:
        return lambda: self.view.send_keys(combo)

    def start(self) -> None:
        """Show the window and connect."""
        self.show()
        self.view.start()
        self.view.setFocus()

    def set_full_screen(self, full: bool) -> None:
        """Full screen (the header hides; the toolbar stays to leave it)."""
        self.header.setVisible(not full)
        self.showFullScreen() if full else self.showNormal()

    def set_scaled(self, scaled: bool) -> None:
        """Scale to the window (and have the remote desktop follow it), or 1:1 with scroll bars."""
        self.screen_area.setWidgetResizable(scaled)
        self.view.set_scale_to_window(scaled)

    def _state(self, state: ViewerState, detail: str) -> None:
        text = STATE_TEXT[state]
        if state in (ViewerState.RECONNECTING, ViewerState.FAILED) and detail:
            text = detail if state is ViewerState.RECONNECTING else f"Disconnected: {detail}"
        self.state_label.setText(text)
        self.state_label.setToolTip(detail)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Qt: disconnect the viewer (the desktop keeps running on the host)."""
        self.view.close_session()
        self.closed.emit()
        super().closeEvent(event)


def run_window(host: str, port: int, password: str, *, simulated: bool = False, found: DesktopCheck | None = None,
               display: int | None = None, shown: Callable[[], None] | None = None) -> int:
    """`gpuws desktop NAME --viewer builtin`: the viewer window as the process's only window, until it is
    closed (or Ctrl-C); `shown` is called once it is up. The caller holds the tunnel on another thread."""
    import signal
    import sys

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from gpuws.ui.resources import app_icon

    windows: list[VncWindow] = []
    interrupted: list[bool] = []

    def on_sigint(*_: object) -> None:
        """Ctrl-C: close the window (the tunnel follows)."""
        interrupted.append(True)
        for window in windows:
            window.close()

    previous = signal.signal(signal.SIGINT, on_sigint)  # first: Ctrl-C from now on closes the window
    try:
        existing = QApplication.instance()
        app = existing if isinstance(existing, QApplication) else QApplication([sys.argv[0] if sys.argv else "gpuws"])
        app.setApplicationName("gpuws")
        app.setWindowIcon(app_icon())
        window = VncWindow(host, port, password, simulated=simulated, found=found, display=display)
        windows.append(window)
        window.closed.connect(app.quit)
        ticker = QTimer(interval=200)  # lets Python run its signal handler while Qt's loop runs
        # ...and ends the loop after a Ctrl-C: one that came before `exec` closed the window while no
        # loop ran, and the `quit` that closing sends was lost (the process then never ended).
        ticker.timeout.connect(lambda: app.quit() if interrupted else None)
        ticker.start()
        if not interrupted:
            window.start()
            if shown is not None:
                QTimer.singleShot(0, shown)  # said from inside the loop: a Ctrl-C after it is handled there
            app.exec()
        ticker.stop()
        if window.isVisible():
            window.close()
        window.deleteLater()
    finally:
        signal.signal(signal.SIGINT, previous)
    return 0
