"""What a read of a record file (gpuws.core.recordfile) found wrong, and what `repair` did.

Apart from gpuws.core.recordfile because a clean read needs none of them: each frozen dataclass
costs ~1 ms to build at import, a tenth of `gpuws hosts list`'s own start (#35). They are imported
where one is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileProblem:
    """One thing wrong in a record file, where it is: `path:line[:column]: key: message`."""

    path: Path
    line: int | None
    key: str | None
    message: str
    column: int | None = None

    def __str__(self) -> str:
        where = str(self.path) + (f":{self.line}" if self.line else "") + (f":{self.column}" if self.column else "")
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"

    def to_dict(self) -> dict[str, int | str | None]:
        """The `--json` shape: {"line", "key", "message"}."""
        return {"line": self.line, "key": self.key, "message": self.message}


@dataclass(frozen=True)
class BrokenRecord:
    """A record left in the file but not usable, with why."""

    name: str | None  # None when the record has no usable name
    number: int  # its place among the file's records, from 1
    problem: FileProblem


@dataclass(frozen=True)
class RecoveryNotice:
    """What `repair` did: where the original bytes went."""

    backup_path: Path
    message: str


@dataclass(frozen=True)
class UnknownKey:
    """A key a record's decoder did not know (dotted for nested tables) and the keys it knows there."""

    key: str
    known: Sequence[str]

