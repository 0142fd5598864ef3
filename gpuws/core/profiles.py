"""The host profile store: `profiles.toml` in the config dir.

File format (schema_version 1)::

    schema_version = 1

    [[hosts]]
    name = "a100-box"
    host = "203.0.113.7"
    port = 22
    ...
    [hosts.provider]
    kind = "aws"
    [hosts.alerts]
    mem_used_pct = 90.0

Safety:

- Writes are atomic: a temp file in the same directory, flushed and fsynced, `os.replace`d over
  the old file, then the directory is fsynced. A crash leaves either the old or the new file.
- Every mutation takes a `FileLock` on the sibling `profiles.toml.lock`, re-reads the file,
  applies its change and writes, so two app instances saving at once never lose either's change.
- A file that cannot be read as a whole (bad TOML, wrong top-level types, a schema version newer
  than ours) is moved aside to `profiles.toml.corrupt-YYYYMMDD-HHMMSS[-N]` and the store starts
  empty. Where only some `[[hosts]]` entries are bad (wrong types, a field that fails validation,
  a duplicate name, a jump host that is missing), the file is moved aside the same way and the
  *valid* entries are written back, so one typo never costs the user their other hosts. Either
  way `last_recovery` says exactly what happened and where the backup (the original bytes) is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import tempfile
import time
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import tomli_w

if TYPE_CHECKING:
    from filelock import FileLock

from gpuws.core import paths
from gpuws.core.errors import GpuwsError, ValidationError
from gpuws.core.files import LocalFileRefused, read_regular_file
from gpuws.core.jumps import jump_profile_names
from gpuws.core.models import HostProfile
from gpuws.core.validation import validate_profile

SCHEMA_VERSION = 1
PROFILES_FILE = "profiles.toml"
LOCK_TIMEOUT_S = 30.0
MAX_PROFILES_BYTES = 8 * 1024 * 1024  # thousands of hosts fit in well under 1 MiB

_T = TypeVar("_T")
_D = TypeVar("_D")


class ProfileNotFound(ValidationError):
    """No profile has the given name."""

    def __init__(self, name: str) -> None:
        super().__init__("name", f"no host profile named {name!r} (see `gpuws hosts list`)")
        self.name = name


class ProfileExists(ValidationError):
    """A profile with that name (ignoring case) already exists."""

    def __init__(self, name: str) -> None:
        super().__init__("name", f"a host profile named {name!r} already exists")
        self.name = name


class ProfileStoreError(GpuwsError):
    """The profile file could not be locked, read or written (permissions, disk full, ...)."""


@dataclass(frozen=True)
class RecoveryNotice:
    """What the store did with a corrupt profile file, for showing to the user."""

    backup_path: Path
    message: str


@dataclass
class BulkAddResult:
    """What `ProfileStore.add_many` did with each profile."""

    added: list[HostProfile] = dataclasses.field(default_factory=list)
    existing: list[str] = dataclasses.field(default_factory=list)
    rejected: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (name, reason)


# ---------------------------------------------------------------------------------------------
# Encoding: HostProfile <-> plain dicts (TOML tables, JSON objects)


def profile_to_dict(profile: HostProfile) -> dict[str, Any]:
    """All fields as plain values; unset optional fields are None (the `--json` shape)."""
    data = dataclasses.asdict(profile)
    data["auth"] = str(profile.auth)
    return data


def _drop_unset(data: dict[str, Any]) -> dict[str, Any]:
    # TOML has no null: an absent key means "not set" (and an absent table means "empty").
    cleaned = {k: _drop_unset(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None}
    return {k: v for k, v in cleaned.items() if v != {}}


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _decode_value(annotation: Any, value: Any, where: str) -> Any:
    """Check `value` from TOML against a field's annotation and convert it (enums, dataclasses).

    Derived from the dataclass annotations, so a field someone adds to the models is read back
    without touching this module.
    """
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        arms = [a for a in typing.get_args(annotation) if a is not type(None)]
        errors = []
        for arm in arms:
            try:
                return _decode_value(arm, value, where)
            except ValidationError as exc:
                errors.append(exc)
        raise errors[0]
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        if not isinstance(value, dict):
            raise ValidationError(where, f"must be a table, not {type(value).__name__}")
        return _decode_dataclass(annotation, value, where + ".")
    if origin is list:
        (item,) = typing.get_args(annotation)
        if not isinstance(value, list):
            raise ValidationError(where, f"must be a list, not {type(value).__name__}")
        return [_decode_value(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        _key, item = typing.get_args(annotation)
        if not isinstance(value, dict):
            raise ValidationError(where, f"must be a table, not {type(value).__name__}")
        return {k: _decode_value(item, v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        try:
            return annotation(value)
        except ValueError:
            choices = ", ".join(str(m.value) for m in annotation)
            raise ValidationError(where, f"{value!r} is not one of {choices}") from None
    # bool is an int in Python but never a valid port or price; an int is a fine float.
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) != (annotation is bool) or not isinstance(value, annotation):
        raise ValidationError(where, f"must be of type {_type_name(annotation)}, not {type(value).__name__}")
    return value


def _decode_dataclass(cls: type[_D], table: dict[str, Any], prefix: str) -> _D:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key in table:
        if key not in known:
            raise ValidationError(f"{prefix}{key}", "is not a known profile field")
    values = {key: _decode_value(hints[key], value, prefix + key) for key, value in table.items()}
    try:
        return cls(**values)
    except TypeError:  # a required field is missing
        missing = [f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                   if f.name not in values and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        raise ValidationError(f"{prefix}{missing[0] if missing else '?'}", "is required") from None


def profile_from_dict(data: dict[str, Any]) -> HostProfile:
    """Build a profile from a TOML table, checking field names and types (not values)."""
    return _decode_dataclass(HostProfile, data, "")


def encode_profiles(profiles: Iterable[HostProfile]) -> bytes:
    """The file's bytes for these profiles."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "hosts": [_drop_unset(profile_to_dict(p)) for p in profiles],
    }
    return tomli_w.dumps(doc).encode("utf-8")


@dataclass
class _Decoded:
    profiles: list[HostProfile]
    problems: list[str]  # empty: the file was fine
    whole_file_bad: bool = False


def _decode(raw: bytes) -> _Decoded:
    """Parse the file's bytes; collect every problem instead of stopping at the first."""
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return _Decoded([], [f"it is not valid TOML ({exc})"], whole_file_bad=True)
    except RecursionError:  # tomllib recurses per nesting level: a hostile file can exhaust it
        return _Decoded([], ["it is nested too deeply to be a profile file"], whole_file_bad=True)
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        return _Decoded([], ["it has no integer schema_version"], whole_file_bad=True)
    if version > SCHEMA_VERSION:
        return _Decoded(
            [],
            [f"its schema_version {version} is newer than this gpuws understands ({SCHEMA_VERSION})"],
            whole_file_bad=True,
        )
    if version < 1:
        return _Decoded([], [f"its schema_version {version} is not valid"], whole_file_bad=True)
    unknown = sorted(set(doc) - {"schema_version", "hosts"})
    hosts = doc.get("hosts", [])
    if not isinstance(hosts, list) or not all(isinstance(h, dict) for h in hosts):
        return _Decoded([], ["'hosts' is not a list of [[hosts]] tables"], whole_file_bad=True)
    problems = [f"unknown top-level key {key!r}" for key in unknown]
    candidates: list[tuple[int, HostProfile]] = []
    seen: set[str] = set()
    for number, table in enumerate(hosts, start=1):
        name = table.get("name")
        label = f"host #{number}" + (f" ({name[:40]!r})" if isinstance(name, str) else "")
        try:
            # Structure and values; jump hosts are checked below, once all entries are known.
            profile = validate_profile(profile_from_dict(table), None, check_files=False)
        except (ValidationError, TypeError) as exc:
            problems.append(f"{label}: {exc}")
            continue
        if profile.name.casefold() in seen:
            problems.append(f"{label}: duplicate name")
            continue
        seen.add(profile.name.casefold())
        candidates.append((number, profile))
    kept = _drop_broken_jumps(candidates, problems)
    return _Decoded(kept, problems)


def _drop_broken_jumps(candidates: list[tuple[int, HostProfile]], problems: list[str]) -> list[HostProfile]:
    """Drop entries whose jump chain is missing or loops (repeat: dropping one may break another)."""
    while True:
        known = {p.name: p for _, p in candidates}
        broken = []
        for number, profile in candidates:
            try:
                validate_profile(profile, known, check_files=False)
            except ValidationError as exc:
                broken.append(number)
                problems.append(f"host #{number} ({profile.name!r}): {exc}")
        if not broken:
            return [p for _, p in candidates]
        candidates = [(n, p) for n, p in candidates if n not in broken]


def _sorted(profiles: Iterable[HostProfile]) -> list[HostProfile]:
    return sorted(profiles, key=lambda p: (p.name.casefold(), p.name))


# ---------------------------------------------------------------------------------------------
# Files


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    _fsync_dir(path.parent)


def _backup_path(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
        counter += 1
    return candidate


class ProfileStore:
    """Host profiles in `profiles.toml` (default: in `gpuws.core.paths.config_dir()`)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else paths.config_dir() / PROFILES_FILE
        self._file_lock: FileLock | None = None
        # Set when a load or mutation had to move a corrupt file aside; the UI/CLI shows it.
        self.last_recovery: RecoveryNotice | None = None

    # -- reading --------------------------------------------------------------------------------

    def load(self) -> list[HostProfile]:
        """All profiles, sorted by name. Recovers a corrupt file (see module docstring)."""
        raw = self._read_bytes()
        if raw is None:
            return []
        decoded = _decode(raw) if isinstance(raw, bytes) else raw
        if not decoded.problems:
            return _sorted(decoded.profiles)
        with self._locked():  # recover under the lock, from what is on disk now
            return _sorted(self._read_locked())

    def get(self, name: str) -> HostProfile:
        """The profile called `name`; raises ProfileNotFound."""
        for profile in self.load():
            if profile.name == name:
                return profile
        raise ProfileNotFound(name)

    # -- mutations --------------------------------------------------------------------------------

    def add(self, profile: HostProfile) -> HostProfile:
        """Validate and add a new profile; returns it as stored (normalised)."""

        def change(profiles: list[HostProfile]) -> HostProfile:
            if _find(profiles, profile.name) is not None:
                raise ProfileExists(profile.name)
            checked = validate_profile(profile, {p.name: p for p in profiles})
            profiles.append(checked)
            return checked

        return self._mutate(change)

    def add_many(self, new: Iterable[HostProfile]) -> BulkAddResult:
        """Add several profiles in one locked write, in order (put a jump host before its users).

        Names that already exist are left alone; profiles that fail validation are rejected with
        the reason. Neither stops the others from being added.
        """
        candidates = list(new)

        def change(profiles: list[HostProfile]) -> BulkAddResult:
            result = BulkAddResult()
            for profile in candidates:
                if _find(profiles, profile.name) is not None:
                    result.existing.append(profile.name)
                    continue
                try:
                    checked = validate_profile(profile, {p.name: p for p in profiles})
                except ValidationError as exc:
                    result.rejected.append((profile.name, str(exc)))
                    continue
                profiles.append(checked)
                result.added.append(checked)
            return result

        return self._mutate(change)

    def update(self, profile: HostProfile, old_name: str | None = None) -> HostProfile:
        """Replace the profile called `old_name` (default: `profile.name`) with `profile`.

        Renaming also re-points other profiles' jump hosts to the new name. (Secrets are keyed by
        name: the caller moves them, see `SecretStore.move`.)
        """
        previous = old_name if old_name is not None else profile.name

        def change(profiles: list[HostProfile]) -> HostProfile:
            index = _find(profiles, previous)
            if index is None or profiles[index].name != previous:
                raise ProfileNotFound(previous)
            clash = _find(profiles, profile.name)
            if clash is not None and clash != index:
                raise ProfileExists(profile.name)
            others = [p for i, p in enumerate(profiles) if i != index]
            renamed = [dataclasses.replace(p, jump=_renamed_jump(p.jump, previous, profile.name))
                       if previous in jump_profile_names(p.jump) else p for p in others]
            checked = validate_profile(profile, {p.name: p for p in renamed})
            profiles[:] = [*renamed, checked]
            return checked

        return self._mutate(change)

    def remove(self, name: str) -> None:
        """Delete a profile; refused while another profile uses it as its jump host."""

        def change(profiles: list[HostProfile]) -> None:
            index = _find(profiles, name)
            if index is None or profiles[index].name != name:
                raise ProfileNotFound(name)
            users = sorted(p.name for p in profiles if name in jump_profile_names(p.jump))
            if users:
                raise ValidationError(
                    "name", f"{name!r} is the jump host of {', '.join(map(repr, users))}; change those first"
                )
            del profiles[index]

        self._mutate(change)

    # -- internals --------------------------------------------------------------------------------

    def _mutate(self, change: Callable[[list[HostProfile]], _T]) -> _T:
        with self._locked():
            profiles = self._read_locked()
            result = change(profiles)
            self._write_locked(profiles)
            return result

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
                f"profiles: another gpuws is holding {self._lock.lock_file}; try again"
            ) from exc

    def _read_bytes(self) -> bytes | _Decoded | None:
        """The file's bytes; None when there is none; a whole-file problem when it is not a
        regular file under the size cap or cannot be read (it is then moved aside like any
        corrupt file, never read: a symlink to /dev/zero must not fill the memory)."""
        try:
            return read_regular_file(self.path, MAX_PROFILES_BYTES, what="profile file")
        except FileNotFoundError:
            return None
        except LocalFileRefused as exc:
            return _Decoded([], [str(exc)], whole_file_bad=True)

    def _read_locked(self) -> list[HostProfile]:
        """Read the file (lock held); move a corrupt one aside and keep what is valid."""
        raw = self._read_bytes()
        if raw is None:
            return []
        decoded = _decode(raw) if isinstance(raw, bytes) else raw
        if decoded.problems:
            self._recover(decoded)
        return decoded.profiles

    def _recover(self, decoded: _Decoded) -> None:
        backup = _backup_path(self.path)
        try:
            os.replace(self.path, backup)
            if not decoded.whole_file_bad:
                self._write_locked(decoded.profiles)
        except OSError as exc:
            raise ProfileStoreError(f"profiles: {self.path} is damaged and could not be moved aside: "
                                    f"{exc.strerror}") from None
        kept = (
            "started with no profiles"
            if decoded.whole_file_bad
            else f"kept the {len(decoded.profiles)} valid profile(s)"
        )
        message = (
            f"The profile file {self.path} was damaged: {'; '.join(decoded.problems)}. "
            f"Moved it to {backup} (the original, unchanged) and {kept}."
        )
        self.last_recovery = RecoveryNotice(backup_path=backup, message=message)

    def _write_locked(self, profiles: list[HostProfile]) -> None:
        try:
            atomic_write_bytes(self.path, encode_profiles(_sorted(profiles)))
        except OSError as exc:
            raise ProfileStoreError(f"profiles: cannot write {self.path}: {exc.strerror}") from None


def _find(profiles: list[HostProfile], name: str) -> int | None:
    """Index of the profile with this name, ignoring case (names are unique that way)."""
    folded = name.casefold()
    for index, profile in enumerate(profiles):
        if profile.name.casefold() == folded:
            return index
    return None


def _renamed_jump(spec: str | None, old: str, new: str) -> str | None:
    """A jump spec with profile `old` renamed to `new` (addresses are left as they are)."""
    if spec is None:
        return None
    return ",".join(new if part == old else part for part in spec.split(","))
