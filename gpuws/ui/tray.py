"""The tray icon: each host's status and running cost, and quick actions.

Where the desktop has no system tray (`QSystemTrayIcon.isSystemTrayAvailable()` false, e.g.
offscreen) the tray is built but never shown; notifications then go nowhere, which is fine
because the window shows the same warnings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtGui import QAction, QIcon
from PySide6.QtWidgets import QApplication, QMenu, QStyle, QSystemTrayIcon, QWidget


@dataclass(frozen=True)
class TrayHost:
    """One host line in the tray menu."""

    name: str
    state: str
    running_cost: float | None
    idle: bool = False
    currency: str = ""  # the profile's; "" : the locale's

    @property
    def text(self) -> str:
        from gpuws.core.money import currency_of, money
        from gpuws.ui.theme import state_label

        spent = self.running_cost
        cost = f" · {money(spent, currency_of(self.currency or None))}" if spent is not None else ""
        idle = " · idle" if self.idle else ""
        # "Authentication failed", not "auth_failed": the tray speaks to people.
        return f"{self.name} — {state_label(self.state)}{cost}{idle}"


class GpuwsTray(QSystemTrayIcon):
    """Host status and running cost at a glance; open the window, connect, stop an idle host."""

    def __init__(
        self,
        *,
        open_window: Callable[[], None],
        connect_host: Callable[[str], None],
        stop_host: Callable[[str], None],
        icon: QIcon | None = None,
        parent: QWidget | None = None,
        quit_app: Callable[[], None] | None = None,
    ) -> None:
        app = QApplication.instance()
        style = app.style() if isinstance(app, QApplication) else None
        fallback = style.standardIcon(QStyle.StandardPixmap.SP_ComputerIcon) if style else QIcon()
        super().__init__(icon or fallback, parent)
        self._open_window = open_window
        self._connect_host = connect_host
        self._stop_host = stop_host
        self._quit_app = quit_app
        self.menu = QMenu(parent)
        self.setContextMenu(self.menu)
        self.hosts: list[TrayHost] = []
        self.activated.connect(self._on_activated)
        self.update_hosts([])

    @staticmethod
    def available() -> bool:
        return QSystemTrayIcon.isSystemTrayAvailable()

    def update_hosts(self, hosts: list[TrayHost]) -> None:
        """Rebuild the menu: one submenu per host with its status, cost and actions."""
        self.hosts = list(hosts)
        self.menu.clear()
        open_action = QAction("Open gpuws", self.menu)
        open_action.triggered.connect(self._open_window)
        self.menu.addAction(open_action)
        self.menu.addSeparator()
        for host in self.hosts:
            sub = self.menu.addMenu(host.text)
            connect = QAction("Connect", sub)
            connect.triggered.connect(lambda _c=False, n=host.name: self._connect_host(n))
            connect.setEnabled(host.state not in ("connected", "connecting"))
            stop = QAction("Stop instance" + (" (idle)" if host.idle else ""), sub)
            stop.triggered.connect(lambda _c=False, n=host.name: self._stop_host(n))
            sub.addAction(connect)
            sub.addAction(stop)
        if self._quit_app is not None:
            self.menu.addSeparator()
            quit_action = QAction("Quit gpuws", self.menu)
            quit_action.triggered.connect(self._quit_app)
            self.menu.addAction(quit_action)
        running = [h for h in self.hosts if h.running_cost is not None]
        currencies = {h.currency for h in running}
        if len(currencies) <= 1:
            from gpuws.core.money import currency_of, money

            total = sum(h.running_cost or 0.0 for h in running)
            spent = money(total, currency_of(next(iter(currencies), "") or None))
        else:  # different currencies do not add up
            spent = ", ".join(h.text.split(" · ")[1] for h in running)
        self.setToolTip(f"gpuws — {len(running)} running, {spent} so far" if running else "gpuws")

    def notify(self, title: str, message: str) -> None:
        """A desktop notification (idle warning, budget warning), when a tray exists."""
        if self.isVisible():
            self.showMessage(title, message, QSystemTrayIcon.MessageIcon.Warning, 10_000)

    def _on_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            self._open_window()
