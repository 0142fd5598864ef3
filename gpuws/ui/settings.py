"""GUI preferences and window state, kept in an INI file in gpuws' config dir.

An INI file under `gpuws.core.paths.config_dir()` (not the platform registry) keeps tests isolated
by `GPUWS_CONFIG_DIR` and lets a user inspect or delete it by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QSettings

from gpuws.core.paths import config_dir
from gpuws.ui.theme import ThemeChoice

SETTINGS_FILE = "gui.ini"


def open_settings() -> QSettings:
    """The QSettings object for this user (INI format, in the config dir)."""
    return QSettings(str(config_dir() / SETTINGS_FILE), QSettings.Format.IniFormat)


@dataclass
class Preferences:
    """What the settings dialog edits."""

    theme: ThemeChoice = ThemeChoice.SYSTEM
    connect_on_start: bool = True  # connect to every saved host when the window opens
    confirm_remove: bool = True
    refresh_ms: int = 1000  # telemetry graph repaint period

    @classmethod
    def load(cls, settings: QSettings | None = None) -> Preferences:
        s = settings or open_settings()
        default = cls()
        theme_value = str(s.value("prefs/theme", default.theme.value))
        theme = ThemeChoice(theme_value) if theme_value in set(ThemeChoice) else default.theme
        return cls(
            theme=theme,
            connect_on_start=_as_bool(s.value("prefs/connect_on_start", default.connect_on_start)),
            confirm_remove=_as_bool(s.value("prefs/confirm_remove", default.confirm_remove)),
            refresh_ms=_as_int(s.value("prefs/refresh_ms", default.refresh_ms), default.refresh_ms, 100, 60_000),
        )

    def save(self, settings: QSettings | None = None) -> None:
        s = settings or open_settings()
        s.setValue("prefs/theme", self.theme.value)
        s.setValue("prefs/connect_on_start", self.connect_on_start)
        s.setValue("prefs/confirm_remove", self.confirm_remove)
        s.setValue("prefs/refresh_ms", self.refresh_ms)
        s.sync()


def _as_bool(value: object) -> bool:
    # INI files hand booleans back as the strings "true"/"false".
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def _as_int(value: object, default: int, lo: int, hi: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        return default
    return min(max(number, lo), hi)
