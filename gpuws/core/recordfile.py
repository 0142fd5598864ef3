"""One TOML file of records shared by every gpuws process (host profiles, fleet profiles).

Safety, the same for every such file:
- Writes are atomic: a temp file in the same directory, flushed and fsynced, `os.replace`d over
  the old file, then the directory is fsynced. A crash leaves either the old or the new file.
- Every mutation takes a `FileLock` on the sibling `NAME.lock`, re-reads the file, applies its
  change and writes, so two app instances saving at once never lose either's change.
- Only a regular file under a size cap is read (a symlink to /dev/zero must not fill memory),
  and TOML nested deeper than the parser's recursion is a damaged file, not a traceback.
- A file that cannot be read as a whole is moved aside to `NAME.corrupt-YYYYMMDD-HHMMSS[-N]` and
  the store starts empty; where only some records are bad, the file is moved aside the same way
  and the valid records are written back. Either way `last_recovery` says exactly what happened
  and where the backup (the original bytes) is.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from gpuws.core.errors import GpuwsError
from gpuws.core.files import LocalFileRefused, read_regular_file

if TYPE_CHECKING:
    from filelock import FileLock

LOCK_TIMEOUT_S = 30.0
MAX_FILE_BYTES = 8 * 1024 * 1024  # thousands of records fit in well under 1 MiB

_R = TypeVar("_R")
_T = TypeVar("_T")


class Named(Protocol):
    """A record known by its name (unique ignoring case)."""

    @property
    def name(self) -> str: ...


_N = TypeVar("_N", bound=Named)


def sorted_by_name(records: Iterable[_N]) -> list[_N]:
    """Records in the order a store lists and writes them: by name ignoring case, then exactly."""
    return sorted(records, key=lambda r: (r.name.casefold(), r.name))


class ProfileStoreError(GpuwsError):
    """A profile file (hosts or fleets) cannot be read, locked or written."""


@dataclass(frozen=True)
class RecoveryNotice:
    """What happened when a damaged file was moved aside."""

    backup_path: Path
    message: str


@dataclass
class Decoded(Generic[_T]):
    """A file's valid records and every problem found (empty: the file was fine)."""

    records: list[_T]
    problems: list[str] = field(default_factory=list)
    whole_file_bad: bool = False  # nothing in it could be used: moved aside, not rewritten


def toml_document(raw: bytes, what: str) -> dict[str, Any] | str:
    """The parsed document, or the one-line reason it cannot be one."""
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return f"it is not valid TOML ({exc})"
    except RecursionError:  # tomllib recurses per nesting level: a hostile file can exhaust it
        return f"it is nested too deeply to be a {what}"


def schema_problem(doc: dict[str, Any], newest: int) -> str | None:
    """Why `doc`'s schema_version is not one this gpuws reads (None when it is)."""
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        return "it has no integer schema_version"
    if version > newest:
        return f"its schema_version {version} is newer than this gpuws understands ({newest})"
    if version < 1:
        return f"its schema_version {version} is not valid"
    return None


def record_tables(raw: bytes, what: str, key: str, newest: int) -> tuple[dict[str, Any], list[dict[str, Any]]] | str:
    """A record file's document and its `[[key]]` tables, or the one-line reason the whole file is
    unusable (not TOML, an unreadable schema_version, `key` not a list of tables)."""
    doc = toml_document(raw, what)
    if isinstance(doc, str):
        return doc
    problem = schema_problem(doc, newest)
    if problem is not None:
        return problem
    rows = doc.get(key, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return f"'{key}' is not a list of [[{key}]] tables"
    return doc, rows


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new content."""
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def backup_path(path: Path) -> Path:
    """A free `NAME.corrupt-STAMP[-N]` beside `path`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
        counter += 1
    return candidate


class RecordFile(Generic[_T]):
    """The records of one file: read (recovering a damaged one) and changed under its lock.

    `kind` names a record in messages ("profile", "fleet"); `decode` turns the file's bytes into
    records and problems, `encode` records into bytes (in the order they are to be written).
    """

    def __init__(
        self,
        path: Path,
        *,
        kind: str,
        decode: Callable[[bytes], Decoded[_T]],
        encode: Callable[[list[_T]], bytes],
        max_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        self.path = path
        self.kind = kind
        self._decode = decode
        self._encode = encode
        self._max_bytes = max_bytes
        self._file_lock: FileLock | None = None
        # Set when a read or a change had to move a damaged file aside; the UI and CLI show it.
        self.last_recovery: RecoveryNotice | None = None

    def read(self) -> list[_T]:
        """Every valid record; a damaged file is recovered under the lock, from what is on disk then."""
        decoded = self._read()
        if decoded is None:
            return []
        if not decoded.problems:
            return decoded.records
        with self._locked():
            return self._read_locked()

    def mutate(self, change: Callable[[list[_T]], _R]) -> _R:
        """Apply `change` to the records (in place) under the lock and write them; returns its result."""
        with self._locked():
            records = self._read_locked()
            result = change(records)
            self._write_locked(records)
            return result

    # -- internals --------------------------------------------------------------------------------

    @property
    def _lock(self) -> FileLock:
        # Made on first use: filelock costs tens of ms to import, and reading never locks.
        if self._file_lock is None:
            from filelock import FileLock

            self._file_lock = FileLock(str(self.path.with_name(self.path.name + ".lock")), timeout=LOCK_TIMEOUT_S)
        return self._file_lock

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock:
                yield
        except TimeoutError as exc:  # filelock.Timeout subclasses TimeoutError
            raise ProfileStoreError(
                f"{self.kind}s: another gpuws is holding {self._lock.lock_file}; try again"
            ) from exc

    def _read(self) -> Decoded[_T] | None:
        """The decoded file; None when there is none. A file that is not regular, too large or
        unreadable is a whole-file problem (moved aside like any damaged file, never read)."""
        try:
            raw = read_regular_file(self.path, self._max_bytes, what=f"{self.kind} file")
        except FileNotFoundError:
            return None
        except LocalFileRefused as exc:
            return Decoded([], [str(exc)], whole_file_bad=True)
        return self._decode(raw)

    def _read_locked(self) -> list[_T]:
        decoded = self._read()
        if decoded is None:
            return []
        if decoded.problems:
            self._recover(decoded)
        return decoded.records

    def _recover(self, decoded: Decoded[_T]) -> None:
        backup = backup_path(self.path)
        try:
            os.replace(self.path, backup)
            if not decoded.whole_file_bad:
                self._write_locked(decoded.records)
        except OSError as exc:
            raise ProfileStoreError(f"{self.kind}s: {self.path} is damaged and could not be moved aside: "
                                    f"{exc.strerror}") from None
        kept = (f"started with no {self.kind}s" if decoded.whole_file_bad
                else f"kept the {len(decoded.records)} valid {self.kind}(s)")
        self.last_recovery = RecoveryNotice(
            backup, f"The {self.kind} file {self.path} was damaged: {'; '.join(decoded.problems)}. "
                    f"Moved it to {backup} (the original, unchanged) and {kept}.")

    def _write_locked(self, records: list[_T]) -> None:
        try:
            atomic_write_bytes(self.path, self._encode(records))
        except OSError as exc:
            raise ProfileStoreError(f"{self.kind}s: cannot write {self.path}: {exc.strerror}") from None


class NamedRecordStore(Generic[_N]):
    """What every store of named records shares over its `RecordFile`: where it is, what a
    recovery said, the records sorted by name, one by its exact name, and locked changes."""

    def __init__(self, file: RecordFile[_N]) -> None:
        self._file = file

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def last_recovery(self) -> RecoveryNotice | None:
        """Set when a load or a change had to move a damaged file aside; the UI and CLI show it."""
        return self._file.last_recovery

    def load(self) -> list[_N]:
        """Every record, sorted by name; a damaged file is recovered (see the module docstring)."""
        return sorted_by_name(self._file.read())

    def _named(self, name: str) -> _N | None:
        return next((record for record in self.load() if record.name == name), None)

    def _mutate(self, change: Callable[[list[_N]], _R]) -> _R:
        return self._file.mutate(change)
