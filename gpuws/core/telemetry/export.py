"""Export a host's telemetry history over a time range as CSV (one row per device per instant)."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from gpuws.core.telemetry.metrics import METRICS
from gpuws.core.telemetry.sample import iso8601
from gpuws.core.telemetry.store import TelemetryStore

STAT_COLUMNS = ("min", "mean", "max")


def export_csv(
    store: TelemetryStore,
    host: str,
    t_from: float,
    t_to: float,
    out: TextIO | Path,
    *,
    devices: Sequence[str] | None = None,
    tier: str | None = None,
) -> int:
    """Write `host`'s history in [t_from, t_to] to `out` (a text stream or a path); returns rows written.

    The tier is the finest that covers the range (see `TelemetryStore.window`); rows from a
    downsampled tier carry `<metric>_min` and `<metric>_max` columns besides the mean. Gap rows
    are left out; a missing value is an empty cell.
    """
    if isinstance(out, Path):
        with out.open("w", newline="", encoding="utf-8") as f:
            return export_csv(store, host, t_from, t_to, f, devices=devices, tier=tier)
    keys = list(devices) if devices is not None else store.device_keys(host)
    windows = [(key, store.window(host, key, t_from, t_to, tier=tier)) for key in keys]
    banded = any(w.bucket_s is not None for _, w in windows)
    header = ["time", "t_unix", "host", "device", "tier"]
    for metric in METRICS:
        header += [metric, f"{metric}_min", f"{metric}_max"] if banded else [metric]
    writer = csv.writer(out)
    writer.writerow(header)
    rows = 0
    for key, window in windows:
        for i in range(window.t.shape[0]):
            means = window.mean[i]
            if all(math.isnan(v) for v in means):
                continue  # a gap marker, not a reading
            t = float(window.t[i])
            row: list[str] = [iso8601(t), f"{t:.3f}", host, key, window.tier]
            for m in range(len(METRICS)):
                if banded:
                    row += [_cell(window.mean[i, m]), _cell(window.min[i, m]), _cell(window.max[i, m])]
                else:
                    row.append(_cell(means[m]))
            writer.writerow(row)
            rows += 1
    return rows


def _cell(value: float) -> str:
    v = float(value)
    return "" if math.isnan(v) else f"{v:.6g}"
