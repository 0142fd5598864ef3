"""Open a URL in the user's browser without the URL reaching a log or stderr.

`QDesktopServices.openUrl` prints the whole URL on stderr when it fails ("qt.qpa.services:
... ?token=..."), and Python's `webbrowser` lets the launcher (xdg-open) write it there too. A
Jupyter URL carries its login token, so here the launcher runs with its output discarded and a
missing launcher is reported to the caller, which offers to copy the URL instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

from PySide6.QtGui import QGuiApplication


def _launcher() -> list[str] | None:
    if sys.platform == "darwin":
        return ["open"]
    if sys.platform.startswith("linux") or "bsd" in sys.platform:
        for name in ("xdg-open", "gio", "sensible-browser"):
            path = shutil.which(name)
            if path:
                return [path, "open"] if name == "gio" else [path]
    return None


def open_in_browser(url: str) -> bool:
    """Hand `url` to the desktop's browser; False when none can be started (nothing printed)."""
    if sys.platform == "win32":  # pragma: no cover - Windows only
        try:
            os.startfile(url)  # type: ignore[attr-defined]
        except OSError:
            return False
        return True
    argv = _launcher()
    has_display = sys.platform == "darwin" or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if argv is None or not has_display:
        return False
    try:
        process = subprocess.Popen([*argv, url], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return False
    # Reap the launcher (it hands the URL over and exits) without blocking the GUI thread.
    threading.Thread(target=process.wait, name="browser-launcher", daemon=True).start()
    return True


def copy_to_clipboard(text: str) -> None:
    """Put `text` on the clipboard (and the X selection), nowhere else."""
    clipboard = QGuiApplication.clipboard()
    clipboard.setText(text)
