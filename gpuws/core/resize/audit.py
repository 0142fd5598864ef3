"""The resize audit log: one JSON line per resize attempt, under data_dir()/resize-audit.jsonl.

Appended under a file lock, never rewritten. Records hold layouts, the plan (commands as shown,
provider credentials masked), the outcome and timestamps; never a secret.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

from gpuws.core.paths import data_dir

AUDIT_FILE = "resize-audit.jsonl"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class AuditRecord:
    """One resize attempt."""

    host: str
    gpu: int | None
    backend: str  # "mig", "provider"
    target: str
    before: str | None
    after: str | None
    outcome: str
    ok: bool
    plan: list[dict[str, Any]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    started_at: str = field(default_factory=now_iso)
    finished_at: str = field(default_factory=now_iso)
    simulated: bool = False
    phase: str = "finished"  # "started": written before the first change (see core/resize/journal.py)


class AuditLog:
    """Append-only JSONL log of resizes."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or data_dir() / AUDIT_FILE

    def append(self, record: AuditRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(asdict(record), sort_keys=False) + "\n"
        with FileLock(str(self.path) + ".lock"), self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def read(self, host: str | None = None) -> list[AuditRecord]:
        """Every record (oldest first), optionally for one host; unreadable lines are skipped."""
        if not self.path.exists():
            return []
        records = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                data = json.loads(line)
                record = AuditRecord(**data)
            except (ValueError, TypeError):
                continue  # a torn last line after a crash must not hide the rest
            if host is None or record.host == host:
                records.append(record)
        return records
