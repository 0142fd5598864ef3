"""Benchmark runs and their per-host history on disk.

One JSON file per run: `data_dir()/bench/<host>/<UTC timestamp>[-simulated].json`. A run from the
simulated host is flagged in the file and in its name, and comparisons never mix simulated with
real runs (nor CPU-harness runs with GPU runs).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuws.core import paths
from gpuws.core.bench.verdicts import Outcome, Verdict, overall, score_run
from gpuws.core.errors import GpuwsError, ValidationError

SCHEMA_VERSION = 1
_HOST_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class ResultsError(GpuwsError):
    """A stored benchmark result could not be read or written."""


@dataclass
class BenchRun:
    """One benchmark run: what the runner reported, plus where and when it ran."""

    host: str
    mode: str
    started_at: str  # ISO 8601, UTC
    results: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    logs: list[dict[str, Any]] = field(default_factory=list)
    expected: dict[str, Any] | None = None
    cancelled: bool = False
    timed_out: bool = False
    error: str | None = None  # why the run did not complete, when it did not
    # Recorded when the run started and never replaced: gpuws was killed (or ended) mid-run.
    interrupted: bool = False

    @property
    def simulated(self) -> bool:
        return bool(self.summary.get("simulated")) or any(r.get("simulated") for r in self.results)

    @property
    def harness(self) -> str | None:
        """"gpu", "cpu" or "simulated"; None when nothing ran."""
        value = self.summary.get("harness")
        return str(value) if value else None

    def outcomes(self) -> list[Outcome]:
        """Every result scored against the datasheet (see `verdicts`)."""
        outcomes = score_run(self.summary, self.results, self.expected)
        if self.cancelled or self.timed_out or self.error or self.interrupted:
            why = self.error or ("cancelled" if self.cancelled else "interrupted" if self.interrupted else "timed out")
            outcomes.append(Outcome("run", None, Verdict.INCONCLUSIVE, f"run did not complete: {why}"))
        return outcomes

    def verdict(self) -> Verdict:
        return overall(self.outcomes())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "host": self.host,
            "mode": self.mode,
            "started_at": self.started_at,
            "simulated": self.simulated,
            "harness": self.harness,
            "expected": self.expected,
            "cancelled": self.cancelled,
            "timed_out": self.timed_out,
            "interrupted": self.interrupted,
            "error": self.error,
            "summary": self.summary,
            "results": self.results,
            "logs": self.logs,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchRun:
        """Rebuild a run from `to_dict` output; malformed data is a `ResultsError`."""
        try:
            if int(data.get("schema_version", 0)) > SCHEMA_VERSION:
                raise ResultsError(f"result file is from a newer gpuws (schema {data['schema_version']})")
            return cls(
                host=str(data["host"]),
                mode=str(data["mode"]),
                started_at=str(data["started_at"]),
                results=[dict(r) for r in data.get("results") or []],
                summary=dict(data.get("summary") or {}),
                logs=[dict(x) for x in data.get("logs") or []],
                expected=dict(data["expected"]) if data.get("expected") else None,
                cancelled=bool(data.get("cancelled")),
                timed_out=bool(data.get("timed_out")),
                error=data.get("error"),
                interrupted=bool(data.get("interrupted")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ResultsError(f"malformed benchmark result: {exc}") from None


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def validate_host_key(host: str) -> str:
    """Host names become directory names: refuse anything that could escape the store."""
    if not _HOST_RE.match(host) or host in (".", ".."):
        raise ValidationError("host", "must be 1-64 characters of letters, digits, '.', '_' or '-'")
    return host


class ResultStore:
    """Per-host benchmark history under `data_dir()/bench` (or `root`)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else paths.data_dir() / "bench"

    def save(self, run: BenchRun) -> Path:
        """Write `run` atomically and return its path."""
        folder = self.root / validate_host_key(run.host)
        folder.mkdir(parents=True, exist_ok=True)
        stamp = run.started_at.replace(":", "").replace("-", "").replace(".", "")
        path = folder / f"{stamp}{'-simulated' if run.simulated else ''}.json"
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(run.to_dict(), fh, indent=1, default=str)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def hosts(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and _HOST_RE.match(p.name))

    def history(self, host: str) -> list[BenchRun]:
        """Runs of `host`, oldest first. Unreadable files are skipped (listed by `broken`)."""
        folder = self.root / validate_host_key(host)
        runs = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                runs.append(load_run(path))
            except ResultsError:
                continue
        runs.sort(key=lambda r: r.started_at)
        return runs

    def latest(self, host: str, *, like: BenchRun | None = None) -> BenchRun | None:
        """The newest run of `host` (comparable to `like` when given)."""
        runs = [r for r in self.history(host) if like is None or comparable(r, like)]
        return runs[-1] if runs else None

    def latest_per_host(self, like: BenchRun) -> dict[str, BenchRun]:
        """Each other host's newest run comparable to `like`."""
        found = {}
        for host in self.hosts():
            if host == like.host:
                continue
            run = self.latest(host, like=like)
            if run is not None:
                found[host] = run
        return found


def load_run(path: Path) -> BenchRun:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ResultsError(f"cannot read {path.name}: {exc}") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path.name} is not a benchmark result")
    return BenchRun.from_dict(data)


def comparable(a: BenchRun, b: BenchRun) -> bool:
    """Simulated runs only with simulated ones, CPU harness only with CPU harness, same mode."""
    return a.simulated == b.simulated and a.harness == b.harness and a.mode == b.mode


@dataclass
class ComparisonRow:
    """One figure of a run next to the same figure from other runs."""

    check: str
    gpu: int | None
    unit: str | None
    measured: float | None
    baseline: float | None  # median of the other runs' figures
    change: float | None  # measured / baseline - 1
    others: dict[str, float] = field(default_factory=dict)  # label -> figure


def compare(run: BenchRun, others: Mapping[str, BenchRun]) -> list[ComparisonRow]:
    """Each measured figure of `run` against the same check and GPU in `others` (label -> run).

    Runs that are not `comparable` (simulated vs real, CPU harness vs GPU) are left out.
    """
    def figures(r: BenchRun) -> dict[tuple[str, int | None, int | None], tuple[float, str | None]]:
        out = {}
        for o in r.outcomes():
            if o.measured is not None and o.verdict is not Verdict.SKIPPED and not o.check.startswith("env."):
                out[(o.check, o.gpu, o.peer)] = (o.measured, o.unit)
        return out

    mine = figures(run)
    theirs = {label: figures(r) for label, r in others.items() if comparable(r, run)}
    rows = []
    for key, (value, unit) in mine.items():
        seen = {label: f[key][0] for label, f in theirs.items() if key in f}
        base = statistics.median(seen.values()) if seen else None
        rows.append(ComparisonRow(key[0], key[1], unit, value, base,
                                  round(value / base - 1, 4) if base else None, seen))
    return rows
