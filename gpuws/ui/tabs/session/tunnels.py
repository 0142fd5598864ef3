"""The Tunnels card: open a tunnel (the one opener, `gpuws.app.tunnels`), list the host's tunnels as
the Workspace keeps them, open, copy or close one."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from gpuws.app.tunnels import TunnelRequest
from gpuws.core.errors import GpuwsError
from gpuws.core.tunnels import PRESETS, Preset, vnc_viewer_argv
from gpuws.ui.tabs.session.base import SessionBase
from gpuws.ui.widgets import Card, muted_label

if TYPE_CHECKING:
    from gpuws.app.tunnels import Tunnel


class TunnelsPart(SessionBase):
    """The shown host's tunnels."""

    def _tunnel_card(self, parent: QWidget) -> Card:
        card, box = self._card(parent, "Tunnels")
        row = QHBoxLayout()
        self.preset_combo = QComboBox(card)
        for preset in (Preset.JUPYTER, Preset.TENSORBOARD, Preset.VNC, Preset.DCV, Preset.NOVNC, Preset.CUSTOM):
            self.preset_combo.addItem(PRESETS[preset].label, preset.value)
        self.preset_combo.currentIndexChanged.connect(self._on_preset)
        self.remote_spin = QSpinBox(card)
        self.remote_spin.setRange(0, 65535)
        self.remote_spin.setSpecialValueText("auto")
        self.local_spin = QSpinBox(card)
        self.local_spin.setRange(0, 65535)
        self.local_spin.setSpecialValueText("auto")
        self.open_tunnel_button = QPushButton("Open tunnel", card)
        self.open_tunnel_button.clicked.connect(self.open_tunnel)
        # The service on one row, its ports and Open on the next: fits the narrow arrangement at 900 px.
        row.addWidget(muted_label("Service", card))
        row.addWidget(self.preset_combo)
        row.addStretch(1)
        box.addLayout(row)
        ports = QHBoxLayout()
        for label, widget in (("Remote port", self.remote_spin), ("Local port", self.local_spin)):
            ports.addWidget(muted_label(label, card))
            ports.addWidget(widget)
        ports.addStretch(1)
        ports.addWidget(self.open_tunnel_button)
        box.addLayout(ports)
        self.tunnel_table = QTableWidget(0, 4, card)
        self.tunnel_table.setHorizontalHeaderLabels(["Service", "Local URL", "On the host", "State"])
        header = self.tunnel_table.horizontalHeader()
        for column in (0, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.tunnel_table.verticalHeader().setVisible(False)
        self.tunnel_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.tunnel_table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.tunnel_table.setMinimumHeight(90)
        self.tunnel_table.setMaximumHeight(180)
        box.addWidget(self.tunnel_table)
        buttons = QHBoxLayout()
        self.browse_tunnel_button = QPushButton("Open in browser", card)
        self.browse_tunnel_button.clicked.connect(self.open_selected_tunnel)
        self.copy_url_button = QPushButton("Copy URL", card)
        self.copy_url_button.setToolTip("Copy the tunnel's URL (with its login token, where it has one) to the "
                                        "clipboard")
        self.copy_url_button.clicked.connect(self.copy_selected_url)
        self.close_tunnel_button = QPushButton("Close tunnel", card)
        self.close_tunnel_button.clicked.connect(self.close_selected_tunnel)
        self.tunnel_status = muted_label("", card)
        self.tunnel_status.setWordWrap(True)
        buttons.addWidget(self.browse_tunnel_button)
        buttons.addWidget(self.copy_url_button)
        buttons.addWidget(self.close_tunnel_button)
        buttons.addWidget(self.tunnel_status, 1)
        box.addLayout(buttons)
        self._on_preset()
        return card

    def _on_preset(self) -> None:
        preset = Preset(self.preset_combo.currentData())
        port = PRESETS[preset].default_port
        # Jupyter: "auto" finds the running server (or starts one) and its token.
        self.remote_spin.setValue(0 if preset is Preset.JUPYTER else port or 0)

    def open_tunnel(self) -> None:
        connection = self._connection()
        if connection is None or self.context is None:
            return
        preset = Preset(self.preset_combo.currentData())
        remote = self.remote_spin.value() or None
        local = self.local_spin.value() or None
        request = TunnelRequest(preset, remote, local)  # the one opener (gpuws.app.tunnels), as the CLI's
        try:
            request.check()  # refuse bad input before going to the host
        except GpuwsError as exc:
            self.tunnel_status.setText(str(exc))
            return
        if self.workspace is None:
            return
        host = self.context.profile.name
        self.tunnel_status.setText("Opening…")
        opened = self.workspace.open_tunnel(host, request, connection=connection)  # kept and rebound there
        opened.add_done_callback(  # settled on the GUI thread (the Workspace's owner)
            lambda f: self._on_tunnel_open(f.result()) if f.exception() is None
            else self.tunnel_status.setText(str(f.exception())))

    def _on_tunnel_open(self, tunnel: Tunnel) -> None:
        self.tunnel_status.setText(tunnel.last_error or f"Tunnel open: {tunnel.display_url}")
        self._fill_tunnels()
        if not tunnel.last_error:
            self._open_url(tunnel)

    def _tunnels(self) -> list[Any]:
        """The shown host's tunnels, as the Workspace keeps them."""
        record = self.workspace.host(self.profile.name) if self.workspace and self.profile else None
        return list(record.tunnels) if record is not None else []

    def _fill_tunnels(self) -> None:
        rows = self._tunnels()
        self.tunnel_table.setRowCount(len(rows))
        for i, tunnel in enumerate(rows):
            # The Workspace decides what the row says ("no answer (host stale)" over "open").
            state = self.workspace.tunnel_text(self.profile.name, tunnel) if self.workspace and self.profile else ""
            for col, text in enumerate((tunnel.spec.info.label, tunnel.display_url, tunnel.remote_label, state)):
                self.tunnel_table.setItem(i, col, QTableWidgetItem(text))

    def _selected_tunnel(self) -> Any:
        rows = self._tunnels()
        index = self.tunnel_table.currentRow()
        return rows[index] if 0 <= index < len(rows) else None

    def _open_url(self, tunnel: Tunnel) -> None:
        from gpuws.ui.external import open_in_browser

        # Never QDesktopServices: it prints the whole URL (token included) on stderr when it fails.
        if tunnel.spec.info.opens_in_browser:
            if not open_in_browser(tunnel.url):  # the token goes to the browser, nowhere else
                token = " (the URL includes the login token)" if getattr(tunnel, "has_token", False) else ""
                self.tunnel_status.setText("No web browser could be opened here. Use Copy URL and paste it "
                                           f"into a browser{token}.")
            return
        viewer = vnc_viewer_argv(tunnel.local_port or 0)
        if viewer:
            subprocess.Popen(viewer, stdin=subprocess.DEVNULL, start_new_session=True)
        elif not open_in_browser(tunnel.url):
            self.tunnel_status.setText(f"No VNC viewer found; connect yours to {tunnel.display_url} "
                                       "(Copy URL puts it on the clipboard)")

    def copy_selected_url(self) -> None:
        """The selected tunnel's full URL (with its token) to the clipboard only."""
        from gpuws.ui.external import copy_to_clipboard

        tunnel = self._selected_tunnel()
        if tunnel is None:
            rows = self._tunnels()
            tunnel = rows[-1] if rows else None
        if tunnel is not None:
            copy_to_clipboard(tunnel.url)
            token = " (with its token)" if getattr(tunnel, "has_token", False) else ""
            self.tunnel_status.setText(f"Copied the URL of {tunnel.spec.info.label}{token} to the clipboard.")

    def open_selected_tunnel(self) -> None:
        tunnel = self._selected_tunnel()
        if tunnel is not None:
            self._open_url(tunnel)

    def close_selected_tunnel(self) -> None:
        tunnel = self._selected_tunnel()
        if tunnel is None or self.profile is None or self.context is None or self.workspace is None:
            return
        self.workspace.remove_tunnel(self.profile.name, tunnel)
        self.context.bridge.run_async(tunnel.close())
        self._fill_tunnels()
