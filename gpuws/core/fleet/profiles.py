"""The fleet profile store: `fleets.toml` next to `profiles.toml`.

A fleet profile is a Prometheus base URL plus how to reach it (`via`: an existing host profile
to tunnel through over SSH) and which series belong to it (`selector`: PromQL label matchers
added to every query). Credentials never land here: a bearer token or a basic-auth password
is in the keyring (service `gpuws-fleet`), only the basic-auth user name is in the file.

Same discipline as `gpuws.core.profiles`: atomic writes, a `FileLock` around every
read-modify-write, and a damaged file moved aside (keeping the valid entries) with a notice.
"""

from __future__ import annotations

import contextlib
import os
import re
import tomllib
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import tomli_w

from gpuws.core import paths
from gpuws.core.errors import ValidationError
from gpuws.core.profiles import (
    LOCK_TIMEOUT_S,
    ProfileStoreError,
    RecoveryNotice,
    _backup_path,
    atomic_write_bytes,
)
from gpuws.core.validation import validate_name

if TYPE_CHECKING:
    from filelock import FileLock

SCHEMA_VERSION = 1
FLEETS_FILE = "fleets.toml"
#: Keyring service for fleet credentials, apart from host profiles' so names never collide.
SECRET_SERVICE = "gpuws-fleet"  # noqa: S105 (a keyring service name, not a secret)

_T = TypeVar("_T")

# One PromQL label matcher: name, operator, double-quoted value (escapes allowed).
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')


class FleetAuth(StrEnum):
    """How gpuws authenticates to the Prometheus of a fleet."""

    NONE = "none"
    BEARER = "bearer"  # token in the keyring (SecretKind.TOKEN)
    BASIC = "basic"  # user here, password in the keyring (SecretKind.PASSWORD)


class FleetNotFound(ValidationError):
    """No fleet has the given name."""

    def __init__(self, name: str) -> None:
        super().__init__("name", f"no fleet named {name!r} (see `gpuws fleet list`)")
        self.name = name


class FleetExists(ValidationError):
    """A fleet with that name (ignoring case) already exists."""

    def __init__(self, name: str) -> None:
        super().__init__("name", f"a fleet named {name!r} already exists")
        self.name = name


@dataclass(frozen=True)
class FleetProfile:
    """One fleet: where its Prometheus is and which series are its GPUs."""

    name: str
    prometheus: str
    via: str | None = None
    selector: str | None = None
    auth: FleetAuth = FleetAuth.NONE
    user: str | None = None
    price_per_gpu_hour: float | None = None  # for the idle-GPU alert's money, like a host profile's price

    def to_dict(self) -> dict[str, Any]:
        """The `--json` shape (no secrets: there are none in a profile)."""
        return {
            "name": self.name,
            "prometheus": self.prometheus,
            "via": self.via,
            "selector": self.selector,
            "auth": self.auth.value,
            "user": self.user,
            "price_per_gpu_hour": self.price_per_gpu_hour,
        }


def validate_url(url: str) -> str:
    """An http(s) base URL without credentials, query or fragment; returned without a trailing '/'."""
    text = url.strip()
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValidationError("prometheus", "give an http:// or https:// URL, e.g. http://prometheus:9090")
    if parsed.username or parsed.password:
        # A password in the URL would end up in fleets.toml and in logs.
        raise ValidationError("prometheus", "no user or password in the URL; use --user / --token-stdin / "
                                            "--password-stdin (stored in the keyring)")
    if parsed.query or parsed.fragment:
        raise ValidationError("prometheus", "the URL takes no query or fragment")
    try:
        parsed.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise ValidationError("prometheus", "the port is not a number from 1 to 65535") from None
    return text.rstrip("/")


def parse_selector(selector: str) -> list[tuple[str, str, str]]:
    """Split `a="x",b=~"y.*"` (braces optional) into (label, op, value) matchers; ValidationError if not."""
    text = selector.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    matchers: list[tuple[str, str, str]] = []
    pos = 0
    while pos < len(text):
        match = _MATCHER.match(text, pos)
        if match is None:
            raise ValidationError("selector", 'give PromQL label matchers, e.g. cluster="a",Hostname=~"gpu-.*"')
        matchers.append((match.group(1), match.group(2), match.group(3)))
        pos = match.end()
        if pos < len(text):
            if text[pos] != ",":
                raise ValidationError("selector", "separate label matchers with commas")
            pos += 1
    if not matchers:
        raise ValidationError("selector", "is empty")
    return matchers


def normalize_selector(selector: str | None) -> str | None:
    """The selector as `a="x",b=~"y"` (no braces), or None when not given."""
    if selector is None or not selector.strip():
        return None
    return ",".join(f'{label}{op}"{value}"' for label, op, value in parse_selector(selector))


def validate_fleet(profile: FleetProfile) -> FleetProfile:
    """Check every field; returns the profile with normalised URL and selector."""
    validate_name(profile.name)
    if profile.via is not None:
        validate_name(profile.via)
    if profile.auth is FleetAuth.BASIC and not profile.user:
        raise ValidationError("user", "basic auth needs a user name")
    if profile.auth is not FleetAuth.BASIC and profile.user:
        raise ValidationError("user", "a user name only goes with basic auth")
    if profile.price_per_gpu_hour is not None and not 0 <= profile.price_per_gpu_hour < 1e6:
        raise ValidationError("price_per_gpu_hour", "must be a price from 0 upwards")
    return FleetProfile(
        name=profile.name,
        prometheus=validate_url(profile.prometheus),
        via=profile.via,
        selector=normalize_selector(profile.selector),
        auth=profile.auth,
        user=profile.user,
        price_per_gpu_hour=profile.price_per_gpu_hour,
    )


def _from_table(table: dict[str, Any]) -> FleetProfile:
    known = {"name", "prometheus", "via", "selector", "auth", "user", "price_per_gpu_hour"}
    for key in table:
        if key not in known:
            raise ValidationError(key, "is not a known fleet field")
    for key in ("name", "prometheus"):
        if not isinstance(table.get(key), str):
            raise ValidationError(key, "is required text")
    for key in ("via", "selector", "user"):
        if key in table and not isinstance(table[key], str):
            raise ValidationError(key, "must be text")
    price = table.get("price_per_gpu_hour")
    if price is not None and (isinstance(price, bool) or not isinstance(price, int | float)):
        raise ValidationError("price_per_gpu_hour", "must be a number")
    try:
        auth = FleetAuth(table.get("auth", FleetAuth.NONE.value))
    except ValueError:
        raise ValidationError("auth", "is not one of none, bearer, basic") from None
    return validate_fleet(FleetProfile(
        name=table["name"], prometheus=table["prometheus"], via=table.get("via"),
        selector=table.get("selector"), auth=auth, user=table.get("user"),
        price_per_gpu_hour=None if price is None else float(price),
    ))


def encode_fleets(fleets: list[FleetProfile]) -> bytes:
    """The file's bytes for these fleets."""
    rows = [{k: v for k, v in f.to_dict().items() if v is not None} for f in _sorted(fleets)]
    return tomli_w.dumps({"schema_version": SCHEMA_VERSION, "fleets": rows}).encode("utf-8")


def decode_fleets(raw: bytes) -> tuple[list[FleetProfile], list[str], bool]:
    """(valid fleets, problems, whole file bad) from the file's bytes."""
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [], [f"it is not valid TOML ({exc})"], True
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
        return [], [f"its schema_version {version!r} is not one this gpuws understands"], True
    rows = doc.get("fleets", [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return [], ["'fleets' is not a list of [[fleets]] tables"], True
    fleets: list[FleetProfile] = []
    problems: list[str] = []
    seen: set[str] = set()
    for number, table in enumerate(rows, start=1):
        try:
            fleet = _from_table(table)
        except ValidationError as exc:
            problems.append(f"fleet #{number}: {exc}")
            continue
        if fleet.name.casefold() in seen:
            problems.append(f"fleet #{number}: duplicate name")
            continue
        seen.add(fleet.name.casefold())
        fleets.append(fleet)
    return fleets, problems, False


def _sorted(fleets: list[FleetProfile]) -> list[FleetProfile]:
    return sorted(fleets, key=lambda f: (f.name.casefold(), f.name))


class FleetStore:
    """Fleet profiles in `fleets.toml` (default: in `gpuws.core.paths.config_dir()`)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else paths.config_dir() / FLEETS_FILE
        self._lock: FileLock | None = None  # made on first write: filelock costs tens of ms to import
        self.last_recovery: RecoveryNotice | None = None

    def load(self) -> list[FleetProfile]:
        """All fleets, sorted by name (a damaged file is recovered, see the module docstring)."""
        raw = self._read_bytes()
        if raw is None:
            return []
        fleets, problems, _ = decode_fleets(raw)
        if not problems:
            return _sorted(fleets)
        with self._locked():
            return _sorted(self._read_locked())

    def get(self, name: str) -> FleetProfile:
        """The fleet called `name`; raises FleetNotFound."""
        for fleet in self.load():
            if fleet.name == name:
                return fleet
        raise FleetNotFound(name)

    def add(self, fleet: FleetProfile) -> FleetProfile:
        """Save a new fleet; raises FleetExists when the name is taken (ignoring case)."""
        fleet = validate_fleet(fleet)

        def change(fleets: list[FleetProfile]) -> None:
            if any(f.name.casefold() == fleet.name.casefold() for f in fleets):
                raise FleetExists(fleet.name)
            fleets.append(fleet)

        self._mutate(change)
        return fleet

    def remove(self, name: str) -> None:
        """Delete a fleet; raises FleetNotFound."""

        def change(fleets: list[FleetProfile]) -> None:
            for index, fleet in enumerate(fleets):
                if fleet.name == name:
                    del fleets[index]
                    return
            raise FleetNotFound(name)

        self._mutate(change)

    # -- internals --------------------------------------------------------------------------------

    def _mutate(self, change: Callable[[list[FleetProfile]], _T]) -> _T:
        with self._locked():
            fleets = self._read_locked()
            result = change(fleets)
            self._write_locked(fleets)
            return result

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self._lock is None:
            from filelock import FileLock

            self._lock = FileLock(str(self.path.with_name(self.path.name + ".lock")), timeout=LOCK_TIMEOUT_S)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock:
                yield
        except TimeoutError as exc:
            raise ProfileStoreError(f"fleets: another gpuws is holding {self._lock.lock_file}; try again") from exc

    def _read_bytes(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ProfileStoreError(f"fleets: cannot read {self.path}: {exc.strerror}") from None

    def _read_locked(self) -> list[FleetProfile]:
        raw = self._read_bytes()
        if raw is None:
            return []
        fleets, problems, whole_file_bad = decode_fleets(raw)
        if problems:
            backup = _backup_path(self.path)
            try:
                os.replace(self.path, backup)
                if not whole_file_bad:
                    self._write_locked(fleets)
            except OSError as exc:
                raise ProfileStoreError(f"fleets: {self.path} is damaged and could not be moved aside: "
                                        f"{exc.strerror}") from None
            kept = "started with no fleets" if whole_file_bad else f"kept the {len(fleets)} valid fleet(s)"
            self.last_recovery = RecoveryNotice(
                backup, f"The fleet file {self.path} was damaged: {'; '.join(problems)}. "
                        f"Moved it to {backup} (the original, unchanged) and {kept}.")
        return fleets

    def _write_locked(self, fleets: list[FleetProfile]) -> None:
        try:
            atomic_write_bytes(self.path, encode_fleets(fleets))
        except OSError as exc:
            raise ProfileStoreError(f"fleets: cannot write {self.path}: {exc.strerror}") from None
