"""The Desktop card: check the host, install on the user's yes, start or reuse the desktop, a viewer
or noVNC in the browser, stop (`gpuws.app.desktop`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QMessageBox,
    QPushButton,
    QWidget,
)

from gpuws.core.errors import GpuwsError
from gpuws.ui.tabs.session.base import SessionBase
from gpuws.ui.widgets import Banner, BannerKind, Card, muted_label

if TYPE_CHECKING:
    from gpuws.app.desktop import DesktopSession, ViewerLaunch
    from gpuws.app.tunnels import Tunnel
    from gpuws.core.desktop import DesktopCheck
    from gpuws.core.runner import CommandResult
    from gpuws.ui.vnc.window import VncWindow

GEOMETRIES = ("1280x800", "1600x900", "1920x1080", "2560x1440")
VIEWERS = (("Built-in viewer", "builtin"), ("External VNC viewer", "external"))


class DesktopPart(SessionBase):
    """The shown host's remote desktop."""

    def _desktop_card(self, parent: QWidget) -> Card:
        card, box = self._card(parent, "Desktop")
        self.desktop_session: DesktopSession | None = None  # while the tab holds one
        self._viewer: ViewerLaunch | None = None
        self._desktop_tunnels: list[tuple[str, Tunnel]] = []  # (host, tunnel) this card opened, closed by Stop
        self.viewer_window: VncWindow | None = None  # the built-in viewer, while open
        self.desktop_info = muted_label("A remote desktop on the host (VNC on its 127.0.0.1 only, through the SSH "
                                        "connection). Check the host first: nothing is installed without your yes.",
                                        card)
        self.desktop_info.setWordWrap(True)
        box.addWidget(self.desktop_info)
        self.desktop_labels = Banner(BannerKind.WARNING, "", card)  # the honest labels (llvmpipe, no NVENC)
        self.desktop_labels.setVisible(False)
        box.addWidget(self.desktop_labels)
        row = QHBoxLayout()
        self.desktop_check_button = QPushButton("Check host", card)
        self.desktop_check_button.clicked.connect(self.check_desktop)
        self.desktop_install_button = QPushButton("Install…", card)
        self.desktop_install_button.setVisible(False)
        self.desktop_install_button.clicked.connect(self.install_desktop)
        self.geometry_combo = QComboBox(card)
        self.geometry_combo.addItems(GEOMETRIES)
        self.geometry_combo.setCurrentText("1920x1080")
        self.viewer_combo = QComboBox(card)
        for label, kind in VIEWERS:
            self.viewer_combo.addItem(label, kind)
        self.viewer_combo.setToolTip("Built-in: the desktop in a gpuws window; external: this computer's VNC viewer")
        self.desktop_start_button = QPushButton("Start desktop", card)
        self.desktop_start_button.setToolTip("Start the desktop (or reuse the running one) and open it in a viewer")
        self.desktop_start_button.clicked.connect(self.start_desktop)
        self.desktop_browser_button = QPushButton("In browser", card)
        self.desktop_browser_button.setToolTip("noVNC through websockify on the host")
        self.desktop_browser_button.clicked.connect(self.open_desktop_in_browser)
        self.desktop_stop_button = QPushButton("Stop desktop", card)
        self.desktop_stop_button.clicked.connect(self.stop_desktop)
        for button in (self.desktop_browser_button, self.desktop_stop_button):
            button.setEnabled(False)
        # Check first, then start: two rows, so the card fits the narrow arrangement at 900 px.
        row.addWidget(self.desktop_check_button)
        row.addWidget(self.desktop_install_button)
        row.addWidget(self.viewer_combo)
        row.addStretch(1)
        box.addLayout(row)
        start_row = QHBoxLayout()
        start_row.addWidget(muted_label("Size", card))
        start_row.addWidget(self.geometry_combo)
        start_row.addWidget(self.desktop_start_button)
        start_row.addWidget(self.desktop_browser_button)
        start_row.addWidget(self.desktop_stop_button)
        start_row.addStretch(1)
        box.addLayout(start_row)
        self.desktop_status = muted_label("", card)
        self.desktop_status.setWordWrap(True)
        self.desktop_status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.addWidget(self.desktop_status)
        self.desktop_check: DesktopCheck | None = None
        return card

    def check_desktop(self) -> None:
        """What the host can serve, shown before anything starts."""
        connection = self._connection()
        if connection is None or self.context is None:
            self.desktop_status.setText("Connect to the host first.")
            return
        from gpuws.app import desktop

        self.desktop_status.setText("Checking the host…")
        self.context.bridge.run_async(desktop.check(connection), self.show_desktop_check,
                                      lambda exc: self.desktop_status.setText(str(exc)))

    def show_desktop_check(self, found: DesktopCheck) -> None:
        """Show a `DesktopCheck`: the VNC server, VirtualGL, renderer, NVENC, what is missing."""
        self.desktop_check = found
        renderer = found.opengl_renderer or "unknown"
        parts = [f"VNC server: {found.vnc_server or 'none'}",
                 f"VirtualGL: {'yes' if found.virtualgl else 'no'}",
                 f"OpenGL: {renderer}",
                 f"Session: {found.desktop_session or 'none'}",
                 f"noVNC: {'yes' if found.websockify and found.novnc else 'no'}"]
        if found.running_display is not None:
            parts.append(f"running on :{found.running_display}")
        text = " · ".join(parts)
        if found.missing:
            text += f"\nMissing: {', '.join(found.missing)}"
        if found.install_command:
            text += f"\nInstall with: sudo sh -c '{found.install_command}'"
        self.desktop_status.setText(text)
        labels = found.labels()
        self.desktop_labels.set_text("\n".join(labels))
        self.desktop_labels.setVisible(bool(labels))
        self.desktop_install_button.setVisible(found.install_command is not None and not found.simulated)

    def install_desktop(self) -> None:
        """Install what the check found missing, through sudo on the host, only on the user's yes."""
        connection = self._connection()
        found = self.desktop_check
        if connection is None or self.context is None or found is None or not found.install_command:
            return
        answer = QMessageBox.question(self, "Install on the host",
                                      f"Run this on {self.context.profile.name} with sudo?\n\n{found.install_command}")
        if answer != QMessageBox.StandardButton.Yes:
            return
        from gpuws.app import desktop

        self.desktop_status.setText("Installing on the host…")
        self.context.bridge.run_async(desktop.install(connection, found), self._installed,
                                      lambda exc: self.desktop_status.setText(str(exc)))

    def _installed(self, result: CommandResult | None) -> None:
        if result is not None and not result.ok:
            self.desktop_status.setText(f"The install failed (exit {result.exit_status}): "
                                        f"{result.stderr.strip()[-300:]}")
            return
        self.check_desktop()

    def start_desktop(self) -> None:
        """Start (or reuse) the host's desktop, keep its tunnel with the host, open a viewer."""
        connection = self._connection()
        if connection is None or self.context is None:
            self.desktop_status.setText("Connect to the host first.")
            return
        from gpuws.app import desktop

        host = self.context.profile.name
        self.desktop_status.setText("Starting the desktop…")
        self.desktop_start_button.setEnabled(False)
        geometry = self.geometry_combo.currentText()
        checked = self.desktop_check

        async def start() -> tuple[DesktopCheck, DesktopSession]:
            # The host's honest labels (llvmpipe, no NVENC) are shown with the desktop, checked once.
            found = checked if checked is not None else await desktop.check(connection)
            return found, await desktop.open_desktop(connection, geometry=geometry)

        def started(result: tuple[DesktopCheck, DesktopSession]) -> None:
            if result[0] is not checked:
                self.show_desktop_check(result[0])
            self._desktop_started(host, result[1])

        self.context.bridge.run_async(start(), started, self._desktop_failed)

    def _desktop_failed(self, exc: BaseException) -> None:
        self.desktop_start_button.setEnabled(self.context is not None)
        self.desktop_status.setText(str(exc) if isinstance(exc, GpuwsError | OSError) else type(exc).__name__)

    def _desktop_started(self, host: str, session: DesktopSession) -> None:
        from gpuws.app import desktop

        self.desktop_start_button.setEnabled(True)
        self.desktop_session = session
        if self.workspace is not None:
            # Kept (rebound after a reconnect) by the Workspace; a connected viewer counts as activity.
            # A desktop reused has its one tunnel: the Workspace hands back the one it keeps.
            session.tunnel = self.workspace.add_tunnel(host, session.tunnel,
                                                       reopen=desktop.reopener(self.geometry_combo.currentText()))
            self._desktop_tunnels.append((host, session.tunnel))
        again = " (already running: reused)" if session.desktop.reused else ""
        self.desktop_status.setText(f"Desktop :{session.desktop.display}{again} at {session.url}")
        for button in (self.desktop_browser_button, self.desktop_stop_button):
            button.setEnabled(True)
        if self.viewer_combo.currentData() == "builtin":
            self.open_viewer_window(host, session)
            return
        try:
            self._viewer = desktop.launch_viewer(session)
        except OSError as exc:
            self.desktop_status.setText(f"The VNC viewer did not start: {exc.strerror or exc}")
            return
        if self._viewer is None:
            self.desktop_status.setText(f"Desktop :{session.desktop.display}{again} at {session.url}. No VNC viewer "
                                        "found here (TigerVNC, Remmina…): use In browser, or connect yours.")
        else:
            QTimer.singleShot(int(desktop.VIEWER_READ_S * 1000) + 500, self._forget_password_file)

    def open_viewer_window(self, host: str, session: DesktopSession) -> None:
        """The desktop in gpuws's own viewer window (closing it leaves the desktop running)."""
        from gpuws.ui.vnc.window import VncWindow

        self.close_viewer_window()
        simulated = bool(self.context.profile.simulated) if self.context is not None else False
        window = VncWindow(host, session.local_port, session.password, simulated=simulated,
                           found=self.desktop_check, display=session.desktop.display)
        window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        window.closed.connect(lambda: self._viewer_closed(window))
        self.viewer_window = window
        window.start()

    def _viewer_closed(self, window: VncWindow) -> None:
        if self.viewer_window is window:
            self.viewer_window = None

    def close_viewer_window(self) -> None:
        """Close the built-in viewer, if open."""
        window, self.viewer_window = self.viewer_window, None
        if window is not None:
            window.close()

    def _forget_password_file(self) -> None:
        if self._viewer is not None:
            self._viewer.cleanup(force=True)

    def open_desktop_in_browser(self) -> None:
        """noVNC through websockify on the host, in the user's browser (it asks for the password)."""
        connection = self._connection()
        if connection is None or self.context is None:
            return
        from gpuws.app import desktop

        host = self.context.profile.name
        self.context.bridge.run_async(desktop.open_browser_tunnel(connection),
                                      lambda tunnel: self._browser_tunnel(host, tunnel),
                                      lambda exc: self.desktop_status.setText(str(exc)))

    def _browser_tunnel(self, host: str, tunnel: Tunnel) -> None:
        from gpuws.app.desktop import novnc_url, reopener
        from gpuws.ui.external import open_in_browser

        if self.workspace is not None:
            tunnel = self.workspace.add_tunnel(host, tunnel, reopen=reopener())
            self._desktop_tunnels.append((host, tunnel))
        url = novnc_url(tunnel)
        if not open_in_browser(url):
            self.desktop_status.setText(f"No web browser could be opened here; open {url}")

    def stop_desktop(self) -> None:
        """End the desktop on the host and close its tunnels (the viewer's and the browser's)."""
        connection = self._connection()
        if connection is None or self.context is None:
            return
        from gpuws.app import desktop

        host = self.context.profile.name
        self.desktop_session = None
        self.close_viewer_window()  # the desktop it shows is about to end
        tunnels = {id(t): t for h, t in self._desktop_tunnels if h == host}.values()
        self._desktop_tunnels = [(h, t) for h, t in self._desktop_tunnels if h != host]
        for tunnel in tunnels:
            if self.workspace is not None:
                self.workspace.remove_tunnel(host, tunnel)
        self._forget_password_file()

        async def stop() -> bool:
            for tunnel in tunnels:  # no row says "open" for a desktop that is gone
                await tunnel.close()
            return await desktop.stop(connection)

        self.context.bridge.run_async(stop(), lambda stopped: self.desktop_status.setText(
            "Desktop stopped." if stopped else "No desktop was running."),
            lambda exc: self.desktop_status.setText(str(exc)))
        for button in (self.desktop_browser_button, self.desktop_stop_button):
            button.setEnabled(False)
