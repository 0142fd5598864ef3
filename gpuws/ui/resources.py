"""Packaged resources: the app icon (SVG with pre-rendered PNGs) and the desktop entry."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from PySide6.QtGui import QIcon

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
ICON_SVG = RESOURCES / "icons" / "gpuws.svg"
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256)


def icon_png(size: int) -> Path:
    return RESOURCES / "icons" / f"gpuws-{size}.png"


@cache
def app_icon() -> QIcon:
    """The app icon, from the PNG renders (no SVG plugin needed) plus the SVG for other sizes."""
    icon = QIcon()
    for size in ICON_SIZES:
        if (png := icon_png(size)).exists():
            icon.addFile(str(png))
    if icon.isNull():
        icon.addFile(str(ICON_SVG))
    return icon
