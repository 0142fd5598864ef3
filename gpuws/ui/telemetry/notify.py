"""Desktop notifications for alerts, through the system tray icon.

The app's tray icon (gpuws.ui.tray) is handed in with `set_tray`; until then, where the desktop
has a system tray, the notifier shows its own icon. Only newly raised alerts notify: not clears,
not a flapping alert raised again (`AlertEvent.repeat`), not a kind muted on its host. Repeats of
the same alert kind on the same device are held back for `REPEAT_S`, so a flapping condition does not flood the desktop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QSystemTrayIcon

from gpuws.core.telemetry.alerts import AlertEvent, Severity
from gpuws.ui.telemetry.alert_log import kind_label

REPEAT_S = 300.0

_ICONS = {
    Severity.CRITICAL: QSystemTrayIcon.MessageIcon.Critical,
    Severity.WARNING: QSystemTrayIcon.MessageIcon.Warning,
    Severity.INFO: QSystemTrayIcon.MessageIcon.Information,
}


class AlertNotifier(QObject):
    """Shows a desktop notification when an alert fires (not when it clears)."""

    def __init__(self, parent: QObject | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self._tray: QSystemTrayIcon | None = None
        self._own_tray = False
        self._clock = clock
        self._last: dict[tuple[str, str | None, str], float] = {}
        self.shown: list[tuple[str, str]] = []  # (title, message) of what was shown, newest last
        self.enabled = True

    def set_tray(self, tray: QSystemTrayIcon | None) -> None:
        """Use the app's tray icon (None: go back to having none)."""
        if self._own_tray and self._tray is not None:
            self._tray.hide()
            self._tray.deleteLater()
        self._tray, self._own_tray = tray, False

    def _ensure_tray(self) -> QSystemTrayIcon | None:
        if self._tray is None and QSystemTrayIcon.isSystemTrayAvailable():
            from gpuws.ui.resources import app_icon

            self._tray = QSystemTrayIcon(app_icon(), self)
            self._tray.setToolTip("gpuws")
            self._tray.show()
            self._own_tray = True
        return self._tray

    def notify(self, event: AlertEvent) -> bool:
        """Notify about a fired alert; returns whether a notification was shown (or recorded)."""
        alert = event.alert
        # Only raised alerts the user has not muted; a flap re-raising the same alert is not news.
        if not event.fired or event.repeat or event.muted or not self.enabled:
            return False
        key = (alert.host, alert.gpu, str(alert.kind))
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < REPEAT_S:
            return False
        self._last[key] = now
        title = f"{kind_label(alert.kind)} on {alert.host}"
        self.shown.append((title, alert.message))
        del self.shown[:-50]
        tray = self._ensure_tray()
        if tray is not None:
            tray.showMessage(title, alert.message, _ICONS.get(alert.severity, _ICONS[Severity.INFO]), 8000)
        return True
