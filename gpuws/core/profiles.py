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

How hand edits are treated (an unknown key is a warning and survives writes, a wrong value
marks only that profile broken, a damaged file is read-only and never moved aside unless the
user asks with `gpuws hosts repair`) and the write safety are `gpuws.core.recordfile`'s, shared
with the fleet profiles. A profile is broken for a wrong type, a field that fails validation,
a duplicate name or a jump host that is missing.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gpuws.core import paths
from gpuws.core.errors import ValidationError
from gpuws.core.models import HostProfile
from gpuws.core.recordfile import (
    NamedRecordStore,
    RecordFile,
    RecordFormat,
    drop_unset,
)
from gpuws.core.validation import validate_profile

if TYPE_CHECKING:
    from gpuws.core.recordproblems import UnknownKey

SCHEMA_VERSION = 1
PROFILES_FILE = "profiles.toml"

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


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _decode_value(annotation: Any, value: Any, where: str, unknown: list[UnknownKey]) -> Any:
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
                return _decode_value(arm, value, where, unknown)
            except ValidationError as exc:
                errors.append(exc)
        raise errors[0]
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        if not isinstance(value, dict):
            raise ValidationError(where, f"must be a table, not {type(value).__name__}")
        return _decode_dataclass(annotation, value, where + ".", unknown)
    if origin is list:
        (item,) = typing.get_args(annotation)
        if not isinstance(value, list):
            raise ValidationError(where, f"must be a list, not {type(value).__name__}")
        return [_decode_value(item, v, f"{where}[{i}]", unknown) for i, v in enumerate(value)]
    if origin is dict:
        _key, item = typing.get_args(annotation)
        if not isinstance(value, dict):
            raise ValidationError(where, f"must be a table, not {type(value).__name__}")
        return {k: _decode_value(item, v, f"{where}.{k}", unknown) for k, v in value.items()}
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


_HINTS: dict[type, dict[str, object]] = {}


def _hints(cls: type) -> dict[str, object]:
    # get_type_hints evaluates every annotation string anew (compile() per field): once per class.
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _decode_dataclass(cls: type[_D], table: dict[str, Any], prefix: str, unknown: list[UnknownKey]) -> _D:
    hints = _hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    # A key we do not know is the user's (a typo, a newer gpuws's field): reported, never fatal.
    if extra := [key for key in table if key not in known]:
        from gpuws.core.recordproblems import UnknownKey  # only then (#35)

        unknown += [UnknownKey(prefix + key, known) for key in extra]
    values = {key: _decode_value(hints[key], value, prefix + key, unknown)
              for key, value in table.items() if key in known}
    try:
        return cls(**values)
    except TypeError:  # a required field is missing
        missing = [f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                   if f.name not in values and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        raise ValidationError(f"{prefix}{missing[0] if missing else '?'}", "is required") from None


def profile_from_dict(data: dict[str, Any], unknown: list[UnknownKey] | None = None) -> HostProfile:
    """Build a profile from a TOML table, checking field names and types (not values); keys it
    does not know are added to `unknown` (refused when no list is given)."""
    found: list[UnknownKey] = []
    profile = _decode_dataclass(HostProfile, data, "", found)
    if unknown is None and found:
        raise ValidationError(found[0].key, "is not a known profile field")
    if unknown is not None:
        unknown += found
    return profile


def encode_profiles(profiles: Iterable[HostProfile]) -> bytes:
    """A fresh file's bytes for these profiles (an existing file is changed in place instead)."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "hosts": [drop_unset(profile_to_dict(p)) for p in profiles],
    }
    import tomli_w  # only to write: a command that reads profiles starts without it (#35)

    return tomli_w.dumps(doc).encode("utf-8")


def _decode_table(table: dict[str, Any]) -> tuple[HostProfile, list[UnknownKey]]:
    """One `[[hosts]]` table: its fields' types and values (jump hosts: `_broken_jumps`)."""
    unknown: list[UnknownKey] = []
    return validate_profile(profile_from_dict(table, unknown), None, check_files=False), unknown


def _broken_jumps(profiles: list[HostProfile]) -> dict[int, ValidationError]:
    """The profiles whose jump chain is missing or loops, by index."""
    known = {p.name: p for p in profiles}
    broken: dict[int, ValidationError] = {}
    for index, profile in enumerate(profiles):
        try:
            validate_profile(profile, known, check_files=False)
        except ValidationError as exc:
            broken[index] = exc
    return broken


PROFILE_FORMAT: RecordFormat[HostProfile] = RecordFormat(
    kind="profile", key="hosts", newest=SCHEMA_VERSION, decode=_decode_table, to_table=profile_to_dict,
    exists=ProfileExists, missing=ProfileNotFound, cross_check=_broken_jumps,
    repair="gpuws hosts repair", fix="gpuws hosts edit {name} --editor",
)


class ProfileStore(NamedRecordStore[HostProfile]):
    """Host profiles in `profiles.toml` (default: in `gpuws.core.paths.config_dir()`)."""

    def __init__(self, path: Path | None = None) -> None:
        super().__init__(RecordFile(path if path is not None else paths.config_dir() / PROFILES_FILE,
                                    PROFILE_FORMAT))

    def get(self, name: str) -> HostProfile:
        """The profile called `name`; raises ProfileNotFound."""
        profile = self._named(name)
        if profile is None:
            raise ProfileNotFound(name)
        return profile

    def check_row(self, name: str, record: HostProfile, others: list[HostProfile]) -> None:
        """An edited profile: same name, every field valid, its jump host one of the others."""
        super().check_row(name, record, others)
        validate_profile(record, {p.name: p for p in [*others, record]})

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
            # Kept up to date as profiles are added: one lookup each, not a scan (10,000 imported hosts).
            folded = {p.name.casefold() for p in profiles}
            known = {p.name: p for p in profiles}
            for profile in candidates:
                if profile.name.casefold() in folded:
                    result.existing.append(profile.name)
                    continue
                try:
                    checked = validate_profile(profile, known)
                except ValidationError as exc:
                    result.rejected.append((profile.name, str(exc)))
                    continue
                profiles.append(checked)
                folded.add(checked.name.casefold())
                known[checked.name] = checked
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
            from gpuws.core.jumps import jump_profile_names  # here: a listing needs no jump parser (#35)

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
            from gpuws.core.jumps import jump_profile_names

            users = sorted(p.name for p in profiles if name in jump_profile_names(p.jump))
            if users:
                raise ValidationError(
                    "name", f"{name!r} is the jump host of {', '.join(map(repr, users))}; change those first"
                )
            del profiles[index]

        try:
            self._mutate(change)
        except ProfileNotFound:
            # A broken profile (as the user edited it) can be removed too: its table goes.
            if not self._file.delete_broken(name):
                raise


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
