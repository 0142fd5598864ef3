"""One TOML file of records shared by every gpuws process (host profiles, fleet profiles).

The file is the user's as much as gpuws's: they may edit it by hand. So:
- gpuws never moves aside or rewrites a file because of what is in it. Only `repair` (on the
  user's request: `gpuws hosts repair`) moves a damaged file to `NAME.corrupt-STAMP[-N]`.
- A key gpuws does not know is a warning (file, line, key, "did you mean"); the record still
  loads, and the key survives gpuws's next write: writes round-trip the document with tomlkit,
  changing only the keys whose values changed, so comments, order and unknown keys stay.
- A wrong value (type, range, a duplicate name, a missing jump host) marks that one record
  broken: it is listed with its error (file, line, key) and left in the file untouched; the
  other records work.
- A UTF-8 BOM is accepted (and kept). A file that is not TOML (or not UTF-8), a file cut short,
  one from a newer gpuws (`schema_version` above ours) or one gpuws may not read is read-only:
  every write is refused with the reason until it is fixed.
- A damaged file is read again record by record, cut at each `[[key]]` header (and at any other
  table header, a header cut short included): one record's damage (a byte that is not UTF-8, a
  duplicate key, a garbage line, `[key]` for `[[key]]`, the end of the file) costs that record
  only; every complete record loads, the damaged one is listed broken with its line.
- `repair` writes back the user's own text of every valid record and never rewrites a file from
  a newer gpuws (refused: that gpuws may know records this one cannot read).

Also, as before: writes are atomic (temp file, fsync, `os.replace`, directory fsync); every
change takes a `FileLock` on the sibling `NAME.lock`, re-reads the file and applies its change,
so two app instances saving at once never lose either's change; only a regular file under a size
cap is read, and TOML nested too deeply is a damaged file, not a traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from gpuws.core.errors import GpuwsError, RefusedInput, ValidationError
from gpuws.core.files import LocalFileRefused, read_regular_file
from gpuws.core.nesting import NestingTooDeep, load_toml

if TYPE_CHECKING:
    from filelock import FileLock

    from gpuws.core.recordproblems import BrokenRecord, FileProblem, RecoveryNotice, UnknownKey

LOCK_TIMEOUT_S = 30.0
MAX_FILE_BYTES = 8 * 1024 * 1024  # thousands of records fit in well under 1 MiB
BOM = b"\xef\xbb\xbf"

_R = TypeVar("_R")
_T = TypeVar("_T")
Table = dict[str, Any]  # one TOML table as tomllib reads it


class Named(Protocol):
    """A record known by its name (unique ignoring case)."""

    @property
    def name(self) -> str: ...


_N = TypeVar("_N", bound=Named)


def sorted_by_name(records: Iterable[_N]) -> list[_N]:
    """Records in the order a store lists them: by name ignoring case, then exactly."""
    return sorted(records, key=lambda r: (r.name.casefold(), r.name))


class ProfileStoreError(GpuwsError):
    """A profile file (hosts or fleets) cannot be read, locked or written."""


class ReadOnlyFile(ProfileStoreError):
    """The file is read-only until the user fixes it (not TOML, cut short, from a newer gpuws)."""


class NewerFileRefused(ProfileStoreError):
    """`repair` of a file a newer gpuws wrote: refused, the file is left as it is."""


class BrokenRecordError(RefusedInput):
    """A command named a record that is in the file but broken (exit status 2, file:line:key)."""

    def __init__(self, kind: str, name: str, problem: FileProblem, fix: str | None = None) -> None:
        how = f" (`{fix.format(name=name)}`)" if fix else ""
        super().__init__(f"the {kind} {name!r} is broken: {problem}; fix it in the file{how}")
        self.problem = problem


def _file_problem(path: Path, line: int | None, key: str | None, message: str,
                 column: int | None = None) -> FileProblem:
    """A FileProblem (its module is imported only when there is one, #35)."""
    from gpuws.core.recordproblems import FileProblem

    return FileProblem(path, line, key, message, column)


def _broken_record(name: str | None, number: int, problem: FileProblem) -> BrokenRecord:
    from gpuws.core.recordproblems import BrokenRecord

    return BrokenRecord(name, number, problem)


@dataclass
class FileState:
    """What the last read of the file found besides its valid records."""

    warnings: list[FileProblem] = field(default_factory=list)
    broken: list[BrokenRecord] = field(default_factory=list)
    read_only: FileProblem | None = None  # set: every write is refused with this

    def notices(self) -> list[str]:
        """One line per problem, for stderr and the window's banner (read-only reason first)."""
        lines = [f"{self.read_only} (read-only until fixed)"] if self.read_only else []
        lines += [str(w) for w in self.warnings]
        lines += [f"{b.problem} (this record is not used until it is fixed)" for b in self.broken]
        return lines


@dataclass(frozen=True, eq=False)  # compared by identity: no __eq__ and __hash__ to build at import (#35)
class RecordFormat(Generic[_T]):
    """What one kind of record file is.

    `decode` builds a record from its table, returning the keys it did not know (raises
    ValidationError, `field` the dotted key, for a bad value); `to_table` gives every field of a
    record, None for unset; `cross_check` (optional) returns the records, by index, that are wrong
    given the others (a missing jump host); `exists` is the error for a name already taken,
    `missing` for a name no record has; `repair` and `fix` are commands messages suggest.
    """

    kind: str  # "profile", "fleet": names a record in messages
    key: str  # the [[key]] tables holding the records
    newest: int  # the highest schema_version this gpuws reads
    decode: Callable[[dict[str, Any]], tuple[_T, list[UnknownKey]]]
    to_table: Callable[[_T], dict[str, Any]]
    exists: Callable[[str], Exception]
    missing: Callable[[str], Exception]
    repair: str  # the command that moves a damaged file aside ("gpuws hosts repair")
    fix: str | None = None  # a command that fixes one record ("gpuws hosts edit {name} --editor")
    cross_check: Callable[[list[_T]], dict[int, ValidationError]] | None = None


# -- reading ----------------------------------------------------------------------------------------


# Patterns used only on a damaged file: compiled (and cached) by `re` at their first use (#35).
_TOML_AT = r"\(at line (\d+), column (\d+)\)"


def _toml_error_at(exc: tomllib.TOMLDecodeError, text: str) -> tuple[int, int | None]:
    """Line and column of a TOML error (tomllib only says them in its message)."""
    found = re.search(_TOML_AT, str(exc))
    if found:
        return int(found.group(1)), int(found.group(2))
    return text.count("\n") + 1, None  # "at end of document"


class _Lines:
    """Where records and keys are in the text (tomllib keeps no positions).

    `spans` (recovery): the first and last line of each record, as the record-by-record reader
    cut them; by default the records start at each `[[key]]` line and run to the next."""

    def __init__(self, text: str, key: str, spans: list[tuple[int, int]] | None = None) -> None:
        self.lines = text.split("\n")  # lines as TOML counts them (only \n ends one)
        self.key = key
        self._spans = spans

    @property
    def spans(self) -> list[tuple[int, int]]:
        """Each record's first and last line; found when first asked: only a problem's line needs them (#35)."""
        if self._spans is None:
            key = re.escape(self.key)
            header = re.compile(rf"^\s*\[\[\s*(?:{key}|\"{key}\")\s*\]\]\s*(?:#.*)?$")
            starts = [n for n, line in enumerate(self.lines, start=1) if header.match(line)]
            self._spans = [(first, (starts[i + 1] - 1) if i + 1 < len(starts) else len(self.lines))
                           for i, first in enumerate(starts)]
        return self._spans

    @property
    def headers(self) -> list[int]:
        """The line of each record's header."""
        return [first for first, _ in self.spans]

    def record(self, index: int) -> int | None:
        """The line of the `[[key]]` header of record `index` (0-based)."""
        return self.headers[index] if index < len(self.headers) else None

    def field(self, index: int | None, dotted: str) -> int | None:
        """The line of `dotted` in record `index` (None: at the top level), else the record's line."""
        if index is None:
            start, end = 1, (self.headers[0] if self.headers else len(self.lines) + 1)
        else:
            if index >= len(self.spans):
                return None
            start, last = self.spans[index]
            end = last + 1
        return key_line(self.lines[start - 1:end - 1], dotted, self.key, offset=start - 1) or (
            start if index is not None else None)


def key_line(lines: Sequence[str], dotted: str, parent: str | None = None, offset: int = 0) -> int | None:
    """The line (from 1, plus `offset`) where `dotted` ('port', 'provider.kind') is set in `lines`:
    as `a.b = `, in a `[parent.a]` (or `[a]`) table as `b = `, or its first part's line."""
    parts = [p for p in re.split(r"[.\[]", dotted) if p and not p.endswith("]")]
    if not parts:
        return None

    def assigns(name: str) -> re.Pattern[str]:
        return re.compile(rf"^\s*(?:{re.escape(name)}|\"{re.escape(name)}\"|'{re.escape(name)}')\s*[=.]")

    dotted_re = re.compile(r"^\s*" + r"\s*\.\s*".join(re.escape(p) for p in parts) + r"\s*=")
    for n, line in enumerate(lines, start=1):
        if dotted_re.match(line):
            return n + offset
    if len(parts) > 1:
        prefix = rf"(?:{re.escape(parent)}\s*\.\s*)?" if parent else ""
        table = re.compile(r"^\s*\[\s*" + prefix + r"\s*\.\s*".join(re.escape(p) for p in parts[:-1]) + r"\s*\]")
        inside = False
        for n, line in enumerate(lines, start=1):
            if line.lstrip().startswith("["):
                inside = bool(table.match(line))
            elif inside and assigns(parts[-1]).match(line):
                return n + offset
    top = assigns(parts[0])
    for n, line in enumerate(lines, start=1):
        if top.match(line):
            return n + offset
    return None


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """' (did you mean 'currency'?)' when a known key is close to `key`, else ''."""
    import difflib  # a misspelt key only: never on a clean read's path (#35)

    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass
class Loaded(Generic[_T]):
    """A parsed file: valid records with the index of their table, and the state."""

    records: list[_T]
    tables: list[int]  # tables[i]: the index of records[i]'s table in the file's [[key]] list
    state: FileState
    text: str  # the text tomlkit round-trips (without the BOM)
    bom: bool
    rows: list[Table]  # every record table as read (valid or not; {} for one that did not parse)
    version: int | None = None  # the file's schema_version when it is a whole number
    # Read record by record (the file as a whole is damaged): the preamble's text when it parsed,
    # and each row's own text, so that `repair` writes back the user's text of the records it keeps.
    preamble: str | None = None
    chunks: list[str] | None = None


class _Piece:
    """A part of a damaged file, cut at table headers: the preamble, a record, or another table.
    (A plain class: a dataclass costs its build at every start, for damaged files only, #35.)"""

    def __init__(self, kind: str, first: int, *, header: int = 0) -> None:
        self.kind = kind  # "preamble", "record" ([[key]], also [key] or a header cut short), "other"
        self.first = first  # its first line, from 1 (a comment above its header, or the header)
        self.data = bytearray()
        self.last = 0  # its last line
        self.header = header  # its header's line

    @property
    def text(self) -> str:
        """Its text as far as it decodes (for finding lines and names)."""
        return self.data.decode("utf-8", errors="replace")


# A table header, also one cut short (`[[hos`); not an array's line such as `["a"],`.
# Damaged files only: compiled by `re` at first use, as _TOML_AT.
_HEADER_LINE = r"^\s*\[\[?\s*(?P<name>[^\[\]#,=]*?)\s*(?:\]\]?)?\s*(?:#.*)?$"
_NAME_LINE = r"""(?m)^\s*(?:name|"name")\s*=\s*(?:"([^"\\]*)"|'([^']*)')"""


def _header_kind(line: str, key: str) -> str | None:
    """'record' for a record's header (`[[key]]`, also `[key]` or one cut short), 'sub' for a table
    inside a record (`[key.alerts]`), 'other' for any other table header, None for no header."""
    found = re.match(_HEADER_LINE, line)
    if found is None:
        return None
    parts = [p.strip().strip("\"'") for p in found.group("name").split(".")]
    if parts == [key]:
        return "record"
    return "sub" if parts[0] == key and len(parts) > 1 else "other"


def _pieces(body: bytes, key: str) -> list[_Piece]:
    """The file cut at each record's header (and at any other table's): the unit of recovery, so
    that damage inside one record (a byte that is not UTF-8, a duplicate key, a line of garbage,
    the file cut short) costs that record only. Comment lines right above a header are its."""
    pieces = [_Piece("preamble", 1)]
    lines: list[list[bytes]] = [[]]
    parts = body.split(b"\n")
    for n, part in enumerate(parts, start=1):
        line = part + b"\n" if n < len(parts) else part
        kind = _header_kind(part.decode("utf-8", errors="replace"), key)
        if kind in ("record", "other"):
            above = lines[-1]
            keep = len(above)
            while keep > 0 and above[keep - 1].lstrip().startswith(b"#"):
                keep -= 1
            moved = above[keep:]
            del above[keep:]
            pieces[-1].last -= len(moved)
            pieces.append(_Piece(kind, n - len(moved), header=n))
            lines.append(list(moved))
        lines[-1].append(line)
        pieces[-1].last = n
    for piece, held in zip(pieces, lines, strict=True):
        piece.data = bytearray(b"".join(held))
    return pieces


def _parse_piece(piece: _Piece) -> tuple[Table | None, tuple[int, int | None, str] | None]:
    """A piece's TOML, or where and why it does not parse (line, column, message)."""
    data = bytes(piece.data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        return None, (piece.first + data[:exc.start].count(b"\n"), exc.start - line_start + 1,
                      f"is not UTF-8 text (byte 0x{data[exc.start]:02x})")
    try:
        return load_toml(text), None
    except NestingTooDeep as exc:
        return None, (piece.first + exc.line - 1, None, f"is nested more than {exc.limit} levels deep")
    except tomllib.TOMLDecodeError as exc:
        line, column = _toml_error_at(exc, text)
        # "at end of document" is the piece's last line, not the next piece's first
        reason = re.sub(_TOML_AT, "", str(exc)).strip()
        return None, (min(piece.first + line - 1, piece.last), column, f"is not valid TOML ({reason})")
    except RecursionError:  # tomllib recurses per nesting level: a hostile file can exhaust it
        return None, (piece.header, None, "is nested too deeply")


def _version_of(doc: Table) -> int | None:
    version = doc.get("schema_version")
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def _salvage_preamble(piece: _Piece) -> Table:
    """The top-level keys of a preamble that does not parse, line by line (its schema_version
    above all: a newer file must be known as newer even when its first lines are damaged)."""
    doc: Table = {}
    for line in piece.text.split("\n"):
        with contextlib.suppress(tomllib.TOMLDecodeError, RecursionError):
            for k, v in tomllib.loads(line).items():
                doc.setdefault(k, v)
    return doc


def parse_records(raw: bytes, path: Path, fmt: RecordFormat[_T]) -> Loaded[_T]:
    """Everything usable in a record file's bytes, and every problem with where it is.

    A file that is not UTF-8 or not TOML as a whole, or whose records are not `[[key]]` tables,
    is read-only and read again record by record (`_recover`): every complete record still loads,
    each damaged one is listed broken with its line."""
    bom = raw.startswith(BOM)
    body = raw[len(BOM):] if bom else raw
    state = FileState()

    def problem(line: int | None, key: str | None, message: str, column: int | None = None) -> FileProblem:
        return _file_problem(path, line, key, message, column)

    gone_to = f"gpuws will not write it until it is fixed (or `{fmt.repair}` moves it aside)"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body[:exc.start].count(b"\n") + 1
        state.read_only = problem(line, None, f"is not UTF-8 text (byte {exc.start + 1}); {gone_to}")
        return _recover(body, bom, path, fmt, state)
    try:
        doc = load_toml(text)
    except NestingTooDeep as exc:
        # Bounded before tomllib recurses (a RecursionError named no line, and could take a worker down).
        state.read_only = problem(exc.line, None, f"is nested more than {exc.limit} levels deep; {gone_to}")
        return _recover(body, bom, path, fmt, state)
    except tomllib.TOMLDecodeError as exc:
        line, column = _toml_error_at(exc, text)
        reason = re.sub(_TOML_AT, "", str(exc)).strip()
        state.read_only = problem(line, None, f"is not valid TOML ({reason}); {gone_to}", column)
        return _recover(body, bom, path, fmt, state)
    except RecursionError:  # tomllib recurses per nesting level: a hostile file can exhaust it
        state.read_only = problem(None, None, f"is nested too deeply to be a {fmt.kind} file")
        return _recover(body, bom, path, fmt, state)
    lines = _Lines(text, fmt.key)
    rows = doc.get(fmt.key, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        state.read_only = problem(lines.field(None, fmt.key), fmt.key, f"must be a list of [[{fmt.key}]] tables")
        return _recover(body, bom, path, fmt, state)
    _check_top(doc, lines, fmt, state, problem)
    records, tables = _decode_rows(list(rows), {}, lines, fmt, state, problem)
    return Loaded(records, tables, state, text, bom, list(rows), _version_of(doc))


def _recover(body: bytes, bom: bool, path: Path, fmt: RecordFormat[_T], state: FileState) -> Loaded[_T]:
    """A damaged file read record by record: cut at each record's header, each record parsed on
    its own; the complete ones load, each damaged one is broken with its line (the file stays
    read-only: `state.read_only` is already set)."""

    def problem(line: int | None, key: str | None, message: str, column: int | None = None) -> FileProblem:
        """A problem in this file."""
        return _file_problem(path, line, key, message, column)

    pieces = _pieces(body, fmt.key)
    head, rest = pieces[0], pieces[1:]
    top, failed_head = _parse_piece(head)
    preamble = head.text if top is not None else None
    if top is None:
        top = _salvage_preamble(head)
    rows: list[Table] = []
    spans: list[tuple[int, int]] = []
    chunks: list[str] = []
    failed: dict[int, tuple[str | None, FileProblem]] = {}
    for piece in rest:
        doc, error = _parse_piece(piece)
        if piece.kind == "other" and doc is not None:
            for k, v in doc.items():  # a table of its own (not a record): known or not, as usual
                top.setdefault(k, v)
            continue
        index = len(rows)
        rows.append({})
        spans.append((piece.header, piece.last))
        chunks.append(piece.text)
        named = re.search(_NAME_LINE, piece.text)
        name = (named.group(1) or named.group(2)) if named else None
        if error is not None:
            failed[index] = (name, problem(error[0], None, error[2], error[1]))
            continue
        assert doc is not None
        value = doc.get(fmt.key)
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
            rows[index] = value[0]
        elif isinstance(value, dict):  # `[hosts]`: one table, not an entry of the list
            rows[index] = value
            failed[index] = (name, problem(piece.header, fmt.key, f"`[{fmt.key}]` is not a record's header; "
                                                                 f"write `[[{fmt.key}]]`"))
        else:
            failed[index] = (name, problem(piece.header, fmt.key, f"is not a [[{fmt.key}]] table"))
    text = body.decode("utf-8", errors="replace")
    lines = _Lines(text, fmt.key, spans)
    if failed_head is not None:
        state.warnings.append(problem(failed_head[0], None, f"{failed_head[2]}; the lines before the first "
                                                            f"[[{fmt.key}]] are ignored", failed_head[1]))
    _check_top(top, lines, fmt, state, problem)
    records, tables = _decode_rows(rows, failed, lines, fmt, state, problem)
    return Loaded(records, tables, state, text, bom, rows, _version_of(top), preamble, chunks)


def _check_top(doc: Table, lines: _Lines, fmt: RecordFormat[_T], state: FileState,
               problem: Callable[..., FileProblem]) -> None:
    """The top level: schema_version (a file from a newer gpuws is read-only) and unknown keys."""
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        state.read_only = state.read_only or problem(
            lines.field(None, "schema_version"), "schema_version",
            f"must be a whole number from 1 to {fmt.newest} (add `schema_version = {fmt.newest}` at the top)")
    elif version > fmt.newest:
        newer = problem(lines.field(None, "schema_version"), "schema_version",
                        f"{version} is from a newer gpuws (this one reads up to {fmt.newest}); the file is "
                        "read-only here and left as it is")
        if state.read_only is not None:  # damaged too: say both, the newer schema first
            state.warnings.insert(0, newer)
        else:
            state.read_only = newer
    for key in sorted(set(doc) - {"schema_version", fmt.key}):
        state.warnings.append(problem(lines.field(None, key), key, "is not a known top-level key"
                                      + did_you_mean(key, ["schema_version", fmt.key]) + "; ignored, kept in the file"))


def _decode_rows(rows: list[Table], failed: dict[int, tuple[str | None, FileProblem]], lines: _Lines,
                 fmt: RecordFormat[_T], state: FileState,
                 problem: Callable[..., FileProblem]) -> tuple[list[_T], list[int]]:
    """The valid records (and their row index) among `rows`; the others go to `state.broken`.
    `failed`: rows already known broken (they did not parse), with the name found and why."""
    records: list[_T] = []
    tables: list[int] = []
    seen: dict[str, int] = {}
    for index, table in enumerate(rows):
        if index in failed:
            name_found, why = failed[index]
            state.broken.append(_broken_record(name_found, index + 1, why))
            continue
        name = table.get("name") if isinstance(table.get("name"), str) else None
        label = f"{fmt.kind} {name!r}" if name else f"{fmt.kind} #{index + 1}"
        try:
            record, unknown = fmt.decode(table)
        except ValidationError as exc:
            state.broken.append(_broken_record(name, index + 1, problem(lines.field(index, exc.field), exc.field,
                                                                      exc.reason)))
            continue
        for item in unknown:
            leaf = item.key.rsplit(".", 1)[-1]
            state.warnings.append(problem(lines.field(index, item.key), item.key, f"is not a known {fmt.kind} field "
                                          f"(in {label}){did_you_mean(leaf, item.known)}; ignored, kept in the file"))
        folded = getattr(record, "name", "").casefold()
        if folded in seen:
            first = lines.record(seen[folded])
            state.broken.append(_broken_record(name, index + 1, problem(
                lines.field(index, "name"), "name", f"{name!r} is a duplicate (first at line {first})")))
            continue
        seen[folded] = index
        records.append(record)
        tables.append(index)
    if fmt.cross_check is not None:
        # Repeat: a record dropped for a missing jump host may be another's jump host.
        while broken := fmt.cross_check(records):
            for i, error in sorted(broken.items()):
                index = tables[i]
                state.broken.append(_broken_record(getattr(records[i], "name", None), index + 1, problem(
                    lines.field(index, error.field), error.field, error.reason)))
            records = [r for i, r in enumerate(records) if i not in broken]
            tables = [t for i, t in enumerate(tables) if i not in broken]
    state.broken.sort(key=lambda b: b.number)
    return records, tables


# -- writing ----------------------------------------------------------------------------------------


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new content."""
    import tempfile  # writers only (#35)

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


def drop_unset(data: dict[str, Any]) -> dict[str, Any]:
    """`data` without None values and empty tables: TOML has no null, an absent key is "not set"."""
    cleaned = {k: drop_unset(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None}
    return {k: v for k, v in cleaned.items() if v != {}}


def merge_table(table: Any, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Change `table` (a tomlkit table) from `old` to `new`, touching only keys whose value changed.

    Keys in neither (ones gpuws does not know) and the comments around unchanged keys stay.
    A value None (or absent from `new`) removes the key.
    """
    for key in dict.fromkeys([*old, *new]):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if after is None:
            if key in table:
                del table[key]
        elif isinstance(after, dict) and isinstance(before, dict) and isinstance(table.get(key), dict):
            merge_table(table[key], before, after)
            if len(table[key]) == 0:
                del table[key]
        elif isinstance(after, dict):
            # A table the file did not have (its fields were defaults): only what differs now.
            changed = {k: v for k, v in after.items() if before.get(k) != v} if isinstance(before, dict) else after
            value = drop_unset(changed)
            if value:
                table[key] = value
            elif key in table:
                del table[key]
        else:
            table[key] = after


class RecordFile(Generic[_T]):
    """The records of one file: read (keeping what is broken, with where) and changed under its lock."""

    def __init__(self, path: Path, fmt: RecordFormat[_T], *, max_bytes: int = MAX_FILE_BYTES) -> None:
        self.path = path
        self.fmt = fmt
        self.kind = fmt.kind
        self._max_bytes = max_bytes
        self._file_lock: FileLock | None = None
        # What the last read or change found (warnings, broken records, why it is read-only).
        self.state = FileState()

    def read(self) -> list[_T]:
        """Every valid record; `state` says what else was found. Never changes the file."""
        loaded = self._load()
        self.state = loaded.state
        return list(loaded.records)

    def rows(self) -> list[dict[str, Any]]:
        """Every record table as it is in the file (valid or broken)."""
        loaded = self._load()
        self.state = loaded.state
        return loaded.rows

    def mutate(self, change: Callable[[list[_T]], _R]) -> _R:
        """Apply `change` to the records (in place) under the lock and write them back into the
        document; returns its result. Refused (ReadOnlyFile) while the file is read-only."""
        with self._locked():
            loaded = self._writable()
            records = list(loaded.records)
            result = change(records)
            self._write_changes(loaded, records)
            return result

    def replace_row(self, name: str, row: dict[str, Any], check: Callable[[_T, list[_T]], None]) -> list[str]:
        """Replace the table of the record called `name` (valid or broken) by `row`, as the user
        wrote it (unknown keys too). `check(record, others)` may refuse it (ValidationError).
        Returns one warning per unknown key."""
        with self._locked():
            loaded = self._writable()
            index = next((i for i, r in enumerate(loaded.rows) if r.get("name") == name), None)
            if index is None:
                raise self.fmt.missing(name)
            record, unknown = self.fmt.decode(row)
            self._refuse_unknown_tables(row, unknown)
            others = [r for r, t in zip(loaded.records, loaded.tables, strict=True) if t != index]
            check(record, others)
            doc = self._document(loaded)
            merge_table(doc[self.fmt.key][index], loaded.rows[index], row)
            self._save(loaded, doc)
            return [f"{u.key}: is not a known {self.kind} field{did_you_mean(u.key.rsplit('.', 1)[-1], u.known)}; "
                    "kept in the file" for u in unknown]

    def _refuse_unknown_tables(self, row: Table, unknown: list[UnknownKey]) -> None:
        """A table the record does not have (a `[[hosts]]` header typed into an edited record) is
        refused: kept, it would be nested into the record as `[[hosts.hosts]]`. An unknown plain
        key stays a warning, as in the file."""
        for item in unknown:
            value: object = row
            for part in item.key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            is_list = isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
            if not (isinstance(value, dict) or is_list):
                continue
            shown = f"[[{item.key}]]" if is_list else f"[{item.key}]"
            hint = (f"; the text holds this one {self.kind}'s keys, without a [[{self.fmt.key}]] header"
                    if item.key.split(".")[0] == self.fmt.key else "")
            raise ValidationError(item.key, f"{shown} is a table a {self.kind} does not have; not saved{hint}")

    def delete_broken(self, name: str) -> bool:
        """Delete the broken record called `name` from the file (the user asked to remove it);
        False when no broken record has that name."""
        with self._locked():
            loaded = self._writable()
            valid = set(loaded.tables)
            index = next((i for i, r in enumerate(loaded.rows) if r.get("name") == name and i not in valid), None)
            if index is None:
                return False
            doc = self._document(loaded)
            del doc[self.fmt.key][index]
            self._save(loaded, doc)
            return True

    def repair(self) -> RecoveryNotice | None:
        """On the user's request only: move the file aside (original bytes kept) and write back the
        records that are valid, in the user's own text. None when there was nothing to repair.
        Refused (NewerFileRefused) for a file a newer gpuws wrote: this one cannot know its records."""
        with self._locked():
            loaded = self._load()
            if not self.path.exists() or not (loaded.state.read_only or loaded.state.broken):
                self.state = loaded.state
                return None
            if loaded.version is not None and loaded.version > self.fmt.newest:
                self.state = loaded.state
                raise NewerFileRefused(
                    f"{self.kind}s: not repaired: a newer gpuws wrote {self.path} (schema_version {loaded.version}; "
                    f"this one reads up to {self.fmt.newest}); it is left as it is: use that gpuws")
            kept = self._kept(loaded) if loaded.records else b""
            backup = backup_path(self.path)
            try:
                os.replace(self.path, backup)
                if loaded.records:
                    self._write_bytes(kept)
            except OSError as exc:
                raise ProfileStoreError(f"{self.kind}s: cannot move {self.path} aside: {exc.strerror}") from None
            problems = loaded.state.notices()
            self.state = FileState()
            from gpuws.core.recordproblems import RecoveryNotice

            return RecoveryNotice(backup, f"Moved {self.path} to {backup} (the original, unchanged) and kept "
                                          f"the {len(loaded.records)} valid {self.kind}(s). It had: "
                                          + "; ".join(problems))

    def _kept(self, loaded: Loaded[_T]) -> bytes:
        """What `repair` writes back: the user's own text of each valid record (comments and keys
        gpuws does not know stay) under a valid schema_version. Written fresh from the records only
        when that text would not read back as exactly those records."""
        import tomlkit

        names = [getattr(r, "name", None) for r in loaded.records]
        try:
            if loaded.chunks is None:  # TOML as a whole: drop the broken tables from the document
                doc = tomlkit.parse(loaded.text)
                tables = doc[self.fmt.key]
                for index in sorted(set(range(len(loaded.rows))) - set(loaded.tables), reverse=True):
                    del tables[index]
            else:  # read record by record: the preamble (when it parsed) and each valid record's text
                parts = [loaded.preamble or ""] + [loaded.chunks[i] for i in loaded.tables]
                doc = tomlkit.parse("".join(p if p.endswith("\n") or not p else p + "\n" for p in parts))
            if "schema_version" in doc and loaded.version != self.fmt.newest:
                doc["schema_version"] = self.fmt.newest  # not a whole number, or below 1
            text = tomlkit.dumps(doc)
            if "schema_version" not in doc:
                text = f"schema_version = {self.fmt.newest}\n\n" + text
            data = (BOM if loaded.bom else b"") + text.encode("utf-8")
            again = parse_records(data, self.path, self.fmt)
            if again.state.read_only is None and [getattr(r, "name", None) for r in again.records] == names:
                return data
        except (tomlkit.exceptions.TOMLKitError, KeyError, IndexError):
            pass
        return self._fresh(loaded.records)

    # -- internals --------------------------------------------------------------------------------

    def _load(self) -> Loaded[_T]:
        """The parsed file; an absent file is an empty one. A file that is not regular, too large or
        unreadable is read-only (never read, never replaced)."""
        try:
            raw = read_regular_file(self.path, self._max_bytes, what=f"{self.kind} file")
        except FileNotFoundError:
            return Loaded([], [], FileState(), "", False, [])
        except LocalFileRefused as exc:
            return Loaded([], [], FileState(read_only=_file_problem(self.path, None, None, str(exc))), "", False, [])
        return parse_records(raw, self.path, self.fmt)

    def _writable(self) -> Loaded[_T]:
        loaded = self._load()
        self.state = loaded.state
        if loaded.state.read_only is not None:
            raise ReadOnlyFile(f"{self.kind}s are read-only until the file is fixed: {loaded.state.read_only}")
        return loaded

    def _document(self, loaded: Loaded[_T]) -> Any:
        import tomlkit  # only writes need it: reads stay on the fast tomllib

        if not loaded.text.strip():
            doc = tomlkit.document()
            doc["schema_version"] = self.fmt.newest
            doc[self.fmt.key] = tomlkit.aot()
            return doc
        doc = tomlkit.parse(loaded.text)
        if self.fmt.key in doc and not isinstance(doc[self.fmt.key], tomlkit.items.AoT) and not doc[self.fmt.key]:
            # `hosts = []` (the last record removed by an older gpuws, or typed): tables appended to that
            # inline array were written inside it, `hosts = [name = "x" ...]`, and the file broke.
            del doc[self.fmt.key]
        if self.fmt.key not in doc:
            doc[self.fmt.key] = tomlkit.aot()
        return doc

    def _write_changes(self, loaded: Loaded[_T], after: list[_T]) -> None:
        """Put the difference between the loaded records and `after` into the document and save it."""
        import tomlkit

        before = list(zip(loaded.records, loaded.tables, strict=True))
        gone = [(rec, index) for rec, index in before if not any(rec is a for a in after)]
        new = [rec for rec in after if not any(rec is b for b, _ in before)]
        pairs: list[tuple[_T, int, _T]] = []
        for rec in list(new):
            folded = getattr(rec, "name", "").casefold()
            match = next(((o, i) for o, i in gone if getattr(o, "name", "").casefold() == folded), None)
            if match is not None:
                pairs.append((match[0], match[1], rec))
                gone.remove(match)
                new.remove(rec)
        if len(gone) == 1 and len(new) == 1:  # a rename
            pairs.append((gone[0][0], gone[0][1], new[0]))
            gone, new = [], []
        broken = {b.name.casefold(): b for b in loaded.state.broken if b.name}
        for old, _, rec in pairs:
            clash = broken.get(getattr(rec, "name", "").casefold())
            if clash is not None and getattr(old, "name", "").casefold() != getattr(rec, "name", "").casefold():
                raise self.fmt.exists(getattr(rec, "name", ""))
        for rec in new:
            if getattr(rec, "name", "").casefold() in broken:
                raise self.fmt.exists(getattr(rec, "name", ""))
        if not pairs and not gone and not new:
            return
        doc = self._document(loaded)
        tables = doc[self.fmt.key]
        for old, index, rec in pairs:
            merge_table(tables[index], self.fmt.to_table(old), self.fmt.to_table(rec))
        for index in sorted((i for _, i in gone), reverse=True):
            del tables[index]
        if not len(tables) and not new:
            del doc[self.fmt.key]  # no `hosts = []` left behind: the file reads as no records either way
        for rec in new:
            table = tomlkit.item(drop_unset(self.fmt.to_table(rec)))
            table.trivia.indent = "\n"  # a blank line before the new [[table]], as in a file gpuws writes fresh
            tables.append(table)
        self._save(loaded, doc)

    def _save(self, loaded: Loaded[_T], doc: Any) -> None:
        import tomlkit

        data = tomlkit.dumps(doc).encode("utf-8")
        self._write_bytes((BOM if loaded.bom else b"") + data)
        self.state = parse_records((BOM if loaded.bom else b"") + data, self.path, self.fmt).state

    def _fresh(self, records: list[_T]) -> bytes:
        """A new file holding only `records` (what gpuws writes when it has no text of the user's)."""
        import tomlkit

        doc = tomlkit.document()
        doc["schema_version"] = self.fmt.newest
        tables = tomlkit.aot()
        for rec in records:
            tables.append(drop_unset(self.fmt.to_table(rec)))
        doc[self.fmt.key] = tables
        return tomlkit.dumps(doc).encode("utf-8")

    def _write_bytes(self, data: bytes) -> None:
        try:
            atomic_write_bytes(self.path, data)
        except OSError as exc:
            raise ProfileStoreError(f"{self.kind}s: cannot write {self.path}: {exc.strerror}") from None

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


class NamedRecordStore(Generic[_N]):
    """What every store of named records shares over its `RecordFile`: where it is, what the last
    read found, the records sorted by name, one by its exact name, locked changes and repair."""

    def __init__(self, file: RecordFile[_N]) -> None:
        self._file = file

    @property
    def path(self) -> Path:
        """The file."""
        return self._file.path

    @property
    def kind(self) -> str:
        """What a record is called in messages ("profile", "fleet")."""
        return self._file.kind

    @property
    def state(self) -> FileState:
        """What the last load or change found: warnings, broken records, why it is read-only."""
        return self._file.state

    def load(self) -> list[_N]:
        """Every valid record, sorted by name (broken ones are in `state.broken`)."""
        return sorted_by_name(self._file.read())

    def row(self, name: str) -> dict[str, Any]:
        """The table of the record called `name` as it is in the file (valid or broken)."""
        found = next((row for row in self._file.rows() if row.get("name") == name), None)
        if found is None:
            raise self._file.fmt.missing(name)
        return found

    def replace_row(self, name: str, row: dict[str, Any]) -> list[str]:
        """Replace the record called `name` by `row` as the user wrote it (`check_row` may refuse
        it); keys gpuws does not know are kept, with one warning each."""
        return self._file.replace_row(name, row, lambda record, others: self.check_row(name, record, others))

    def check_row(self, name: str, record: _N, others: list[_N]) -> None:
        """Refuse (ValidationError) an edited record: by default a renamed one or a taken name."""
        if record.name != name:
            raise ValidationError("name", f"cannot be changed here (keep {name!r})")
        if any(other.name.casefold() == name.casefold() for other in others):
            raise self._file.fmt.exists(name)

    def repair(self) -> RecoveryNotice | None:
        """Move a damaged file aside and keep its valid records (only ever on the user's request)."""
        return self._file.repair()

    def broken(self, name: str) -> BrokenRecord | None:
        """The broken record called `name` in the last load, if one is."""
        return next((b for b in self.state.broken if b.name == name), None)

    def _named(self, name: str) -> _N | None:
        """The record called `name`; BrokenRecordError when it is there but broken."""
        found = next((record for record in self.load() if record.name == name), None)
        if found is None and (bad := self.broken(name)) is not None:
            raise BrokenRecordError(self._file.kind, name, bad.problem, self._file.fmt.fix)
        return found

    def _mutate(self, change: Callable[[list[_N]], _R]) -> _R:
        return self._file.mutate(change)
