"""The Health tab: `gpuws health` for the selected host, in seconds and without load.

"Check health" runs the passive checks (`gpuws.app.health.check_health`) on the bridge's loop,
never on the GUI thread; the verdict per host and per GPU and every finding that is not plainly
healthy are listed, and "Copy report" puts the plain-text provider report on the clipboard.
"""

from __future__ import annotations

import contextlib

from PySide6.QtGui import QGuiApplication, QShowEvent
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from gpuws.core.health import HealthVerdict, HostHealth, provider_report
from gpuws.core.health.names import check_name
from gpuws.ui.tabs import HostContext
from gpuws.ui.widgets import Badge, Banner, BannerKind, heading, muted_label

_ABOUT = ("Passive checks in seconds: ECC, remapped rows, XIDs since boot, NVLink, fabric manager, PCIe link, "
          "power cap, throttling. No load on the GPUs.")
_SHOWN = {HealthVerdict.HEALTHY: "\u2713 healthy", HealthVerdict.INFO: "i info",
          HealthVerdict.DEGRADED: "! degraded", HealthVerdict.UNHEALTHY: "\u2715 unhealthy",
          HealthVerdict.INCONCLUSIVE: "? inconclusive"}


class HealthTab(QWidget):
    """Runs and shows the health check of one host."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.context: HostContext | None = None
        self.health: HostHealth | None = None
        self._running_for: str | None = None
        self.title = heading("Health", 1.2, self)
        self.sim_badge = Badge("SIMULATED", parent=self)
        self.sim_badge.hide()
        self.summary = muted_label(_ABOUT, self)
        self.summary.setWordWrap(True)
        self.check_button = QPushButton("Check health")
        self.check_button.clicked.connect(self.start)
        self.copy_button = QPushButton("Copy report")
        self.copy_button.setToolTip("Copy the plain-text report to send to the provider (UUIDs, serials, "
                                    "each failing field with its value)")
        self.copy_button.clicked.connect(self.copy_report)
        self.copy_button.setEnabled(False)
        self.problem = Banner(BannerKind.ERROR, "", self)
        self.problem.hide()
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["GPU / check", "verdict", "detail"])
        self.tree.setColumnWidth(0, 220)
        self.tree.setColumnWidth(1, 130)
        self.tree.setWordWrap(True)

        top = QHBoxLayout()
        top.addWidget(self.title)
        top.addWidget(self.sim_badge)
        top.addStretch(1)
        top.addWidget(self.check_button)
        top.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 12, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.summary)
        layout.addWidget(self.problem)
        layout.addWidget(self.tree, 1)
        self._update_button()

    @property
    def host(self) -> str | None:
        """The selected host's name."""
        return self.context.profile.name if self.context is not None else None

    def set_host(self, context: HostContext | None) -> None:
        """Show `context`'s host (its last result is not kept across hosts)."""
        if self.context is not None:
            with contextlib.suppress(RuntimeError, TypeError):
                self.context.session.state_changed.disconnect(self._on_state)
        self.context = context
        self.show_health(None)
        self.summary.setText(_ABOUT)  # never the last host's verdict beside this one's empty table
        self.problem.hide()
        self.sim_badge.setVisible(bool(context is not None and context.profile.simulated))
        if context is not None:
            context.session.state_changed.connect(self._on_state)
        self._update_button()
        self._check_if_shown()

    def _on_state(self, *_: object) -> None:
        self._update_button()
        self._check_if_shown()

    def _check_if_shown(self) -> None:
        """The open tab checks a host once it is selected and connected (it may have been the open
        tab since the last session, so no showEvent comes), once per host: an empty table is never
        what a user meets."""
        if self.isVisible() and self.health is None and self.problem.isHidden():
            self.start()

    def showEvent(self, event: QShowEvent) -> None:
        """Check a connected host the first time its tab is shown: passive, seconds, no load, so an
        empty table is never what a user meets."""
        super().showEvent(event)
        self._check_if_shown()

    def _update_button(self, *_: object) -> None:
        connected = self.context is not None and self.context.session.connection is not None
        self.check_button.setEnabled(connected and self._running_for is None)
        self.check_button.setToolTip("" if connected else "Connect to the host to check its health.")

    def start(self) -> None:
        """Run the health check of the selected host on the bridge's loop."""
        context = self.context
        connection = context.session.connection if context is not None else None
        if context is None or connection is None or self._running_for is not None:
            return
        from gpuws.app.health import check_health

        host = context.profile.name
        self._running_for = host
        self.summary.setText(f"Checking {host} ...")
        self.problem.hide()
        self._update_button()
        try:
            context.bridge.run_async(check_health(connection.runner, host),
                                     lambda health: self._done(host, health),
                                     lambda exc: self._failed(host, exc), owner=self)
        except RuntimeError as exc:  # the bridge has stopped (the app is closing)
            self._failed(host, exc)

    def _done(self, host: str, health: HostHealth) -> None:
        self._running_for = None
        self._update_button()
        if host == self.host:
            self.show_health(health)

    def _failed(self, host: str, exc: BaseException) -> None:
        self._running_for = None
        self._update_button()
        if host == self.host:
            self.problem.set_text(f"The health check of {host} did not run: {exc or type(exc).__name__}")
            self.problem.show()
            self.summary.setText("")

    def show_health(self, health: HostHealth | None) -> None:
        """List `health` (None clears the list)."""
        self.health = health
        self.tree.clear()
        self.copy_button.setEnabled(health is not None)
        if health is None:
            return
        self.summary.setText(f"{health.host}: {health.verdict.value.upper()} - driver {health.driver_version or '-'}"
                             f", CUDA {health.cuda_version or '-'}")
        host_item = QTreeWidgetItem(self.tree, ["host", _SHOWN[health.verdict], health.hostname or ""])
        for f in health.findings:
            QTreeWidgetItem(host_item, [check_name(f.check), _SHOWN[f.verdict], f.detail])
        for g in health.gpus:
            item = QTreeWidgetItem(self.tree, [f"GPU {g.index} {g.name or ''}", _SHOWN[g.verdict],
                                               f"{g.uuid or '-'}  serial {g.serial or '-'}"])
            for f in g.findings:
                child = QTreeWidgetItem(item, [check_name(f.check), _SHOWN[f.verdict], f.detail])
                child.setToolTip(2, f.detail)
            item.setExpanded(g.verdict is not HealthVerdict.HEALTHY)
        host_item.setExpanded(health.verdict is not HealthVerdict.HEALTHY)

    def copy_report(self) -> None:
        """Put the provider report on the clipboard."""
        if self.health is not None:
            QGuiApplication.clipboard().setText(provider_report(self.health))

    def items(self) -> list[tuple[str, str, str]]:
        """Every row as (name, verdict, detail), top level first then children (for tests)."""
        out = []
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            if top is None:
                continue
            out.append((top.text(0), top.text(1), top.text(2)))
            for k in range(top.childCount()):
                child = top.child(k)
                if child is not None:
                    out.append((child.text(0), child.text(1), child.text(2)))
        return out
