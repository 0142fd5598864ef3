"""Export from the dashboards: a time range as CSV (through the core exporter) and a plot as PNG."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtWidgets import QWidget

from gpuws.core.errors import GpuwsError
from gpuws.core.telemetry.export import export_csv
from gpuws.core.telemetry.store import TelemetryStore


class ExportError(GpuwsError):
    """An export could not be written."""


def export_range_csv(
    store: TelemetryStore,
    host: str,
    t_from: float,
    t_to: float,
    path: Path,
    devices: Sequence[str] | None = None,
) -> int:
    """Write `host`'s history over [t_from, t_to] to `path` as CSV; returns the rows written."""
    if not store.device_keys(host):
        raise ExportError(f"no telemetry recorded for {host} yet")
    try:
        return export_csv(store, host, t_from, t_to, path, devices=devices)
    except OSError as exc:
        raise ExportError(f"could not write {path}: {exc.strerror or exc}") from None


def export_widget_png(widget: QWidget, path: Path) -> Path:
    """Save what `widget` shows (a plot, a card, the whole tab) as a PNG at screen resolution."""
    pixmap = widget.grab()
    if pixmap.isNull():
        raise ExportError("nothing to save: the view has no size yet")
    if path.suffix.lower() != ".png":
        path = path.with_suffix(".png")
    if not pixmap.save(str(path), "PNG"):
        raise ExportError(f"could not write {path}")
    return path
