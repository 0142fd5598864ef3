"""The resize journal: what a MIG resize set out to do, written on the client before the first change.

A resize that is killed (SIGKILL, Ctrl-C, a crash, the laptop lid) can leave a GPU half-resized
(4 of 7 instances). The journal makes that visible and recoverable: before the first command
changes the host, `begin` writes the host, GPU, previous layout, target and plan to
`data_dir()/resize-journal/<host>.json` (atomically, fsynced) and the audit log gets a "started"
record; `finish` appends the final audit record and only then removes the journal. A journal
whose writing process is gone is an interrupted resize: `gpuws slices`/`probe` report it and
`gpuws resize NAME --recover` completes the target or restores the previous layout.

One journal per host: resizes of one host run one GPU at a time. A run that changes several GPUs
(`gpuws mig-parted apply`) lists the GPUs still to do in `pending`, and hands the journal over to
the next GPU when one finishes, so `--recover` finishes the whole run, not only the GPU it met.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from gpuws.core.paths import data_dir
from gpuws.core.resize.audit import AuditLog, AuditRecord, now_iso

JOURNAL_DIR = "resize-journal"
STARTED = "started"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class JournalEntry:
    """One resize in flight: GPU `gpu` of `host`, from `before` to `target` (layout texts)."""

    host: str
    gpu: int
    gpu_name: str
    before: str  # Layout.describe() of the previous layout: "full", "7x1g.10gb", ...
    target: str
    plan: list[dict[str, Any]] = field(default_factory=list)
    started_at: str = field(default_factory=now_iso)
    pid: int = field(default_factory=os.getpid)
    simulated: bool = False
    via: str = "resize"  # "resize", "mig-parted", "recover", "window"
    # The GPUs this run still changes after this one, in order: {"gpu", "gpu_name", "target"}.
    pending: list[dict[str, Any]] = field(default_factory=list)
    # "mig", or "provider": an instance type change (`before`/`target` are "type:T"; `gpu_name`
    # is the instance id), finished or undone by `--recover` through the provider (gpuws.app.cloud).
    backend: str = "mig"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for `slices`/`probe` output and the window banner."""
        if self.backend == "provider":
            return (f"an interrupted instance type change of {self.gpu_name} ({self.before} -> {self.target}, "
                    f"started {self.started_at}) did not finish; the instance may be stopped or on either type")
        rest = [str(p.get("gpu")) for p in self.pending if isinstance(p, dict)]
        then = f" (and GPU {', '.join(rest)} after it)" if rest else ""
        return (f"an interrupted resize of GPU {self.gpu} ({self.before} -> {self.target}, started "
                f"{self.started_at}){then} did not finish; the GPU may be half-resized")


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class ResizeJournal:
    """The journal files under `data_dir()/resize-journal/` (or `root`)."""

    def __init__(self, root: Path | None = None, audit: AuditLog | None = None) -> None:
        self.root = root or data_dir() / JOURNAL_DIR
        self.audit = audit or AuditLog()

    def path_for(self, host: str) -> Path:
        # Host names are profile names (user text): keep them readable but never a path.
        digest = hashlib.sha256(host.encode()).hexdigest()[:8]
        return self.root / f"{_SAFE.sub('_', host)[:60]}-{digest}.json"

    def begin(self, entry: JournalEntry) -> None:
        """Write the audit log's "started" record, then the journal (durably), before any change.

        In that order: a run killed between the two has changed nothing on the host yet, and one
        killed after both is both recorded and detectable.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.path_for(entry.host)
        self.audit.append(AuditRecord(
            host=entry.host, gpu=entry.gpu, backend=entry.backend, target=entry.target, before=entry.before,
            after=None, outcome=STARTED, ok=False, plan=entry.plan, log=[f"journal: {path.name} ({entry.via})"],
            started_at=entry.started_at, simulated=entry.simulated, phase=STARTED,
        ))
        self._write(entry)

    def _write(self, entry: JournalEntry) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.path_for(entry.host)
        tmp = path.with_suffix(".tmp")
        with FileLock(str(path) + ".lock"):
            with tmp.open("w", encoding="utf-8") as f:
                json.dump(entry.to_dict(), f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)

    def finish(self, host: str, record: AuditRecord, *, keep: bool = False, then: JournalEntry | None = None) -> None:
        """Record the outcome in the audit log, then drop the journal (in that order: a crash
        between the two leaves the journal, never a resize without a record).

        `keep`: the rollback failed too, so the GPU is in no known layout; the journal stays and
        the next connect reports it, with `--recover` to finish the job. `then`: the run goes on
        with another GPU; the journal becomes that GPU's (its own `begin` adds the plan), so a
        run killed between two GPUs is still found and finished.
        """
        self.audit.append(record)
        if keep:
            return
        if then is not None:
            self._write(then)
        else:
            self.clear(host)

    def clear(self, host: str) -> None:
        path = self.path_for(host)
        with FileLock(str(path) + ".lock"), contextlib.suppress(FileNotFoundError):
            path.unlink()

    def read(self, host: str) -> JournalEntry | None:
        """The journal of `host`, if one exists (whether or not its process still runs)."""
        path = self.path_for(host)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return JournalEntry(**data)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError):
            # A journal that cannot be read still means a resize did not finish: say so.
            return JournalEntry(host=host, gpu=-1, gpu_name="", before="unknown", target="unknown",
                                pid=-1, started_at="unknown")

    def interrupted(self, host: str) -> JournalEntry | None:
        """The journal of `host` when the process that wrote it is gone (a resize that died)."""
        entry = self.read(host)
        if entry is None or (entry.pid > 0 and _process_alive(entry.pid)):
            return None
        return entry


def interrupted_resize_json(entry: JournalEntry | None) -> dict[str, Any] | None:
    """The `"interrupted_resize"` object of `slices`/`probe` --json (None when there is none)."""
    if entry is None:
        return None
    return {
        "gpu": entry.gpu, "gpu_name": entry.gpu_name, "before": entry.before, "target": entry.target,
        "started_at": entry.started_at, "via": entry.via, "message": entry.summary(), "backend": entry.backend,
        "recover": f"gpuws resize {entry.host} --recover",
        "pending": [{"gpu": p.get("gpu"), "target": p.get("target")} for p in entry.pending if isinstance(p, dict)],
    }
