"""Export a run as the JSON report (`gpuws bench --json` shape) or as Markdown with its comparison.

Qt-free: the tab asks for the file name, these write it (atomically: a half-written report never
replaces a good one).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gpuws.core.bench.report import build_report, to_json, to_markdown
from gpuws.core.bench.results import BenchRun, ComparisonRow
from gpuws.core.errors import GpuwsError


class ExportError(GpuwsError):
    """The report could not be written."""


def export_json(run: BenchRun, path: Path) -> Path:
    """Write the scored report of `run` as JSON to `path`."""
    return _write(path, to_json(build_report(run)) + "\n")


def export_markdown(run: BenchRun, path: Path, comparison: Sequence[ComparisonRow] | None = None) -> Path:
    """Write the report of `run`, with its comparison table when given, as Markdown to `path`."""
    return _write(path, to_markdown(build_report(run), list(comparison) if comparison else None))


def default_file_name(run: BenchRun, suffix: str) -> str:
    """'gpuws-bench-HOST-20240501-1203.md': host names are already file-safe (see results)."""
    stamp = run.started_at[:16].replace("-", "").replace(":", "").replace("T", "-")
    return f"gpuws-bench-{run.host}-{stamp}{suffix}"


def _write(path: Path, text: str) -> Path:
    folder = path.parent
    if not folder.is_dir():
        raise ExportError(f"cannot write {path.name}: folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ExportError(f"cannot write to {folder}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ExportError(f"cannot write {path.name}: {exc.strerror or exc}") from None
    return path
