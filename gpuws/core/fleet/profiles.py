"""The fleet profile store: `fleets.toml` next to `profiles.toml`.

A fleet profile is a Prometheus base URL plus how to reach it (`via`: an existing host profile
to tunnel through over SSH) and which series belong to it (`selector`: PromQL label matchers
added to every query). Credentials never land here: a bearer token or a basic-auth password
is in the keyring (service `gpuws-fleet`), only the basic-auth user name is in the file.

The file itself (atomic writes, a lock around every change, hand edits kept: unknown keys are
warnings that survive writes, a wrong value marks only that fleet broken, a damaged file is
read-only) is `gpuws.core.recordfile`'s, as for host profiles.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from gpuws.core import paths
from gpuws.core.errors import ValidationError
from gpuws.core.recordfile import (
    NamedRecordStore,
    RecordFile,
    RecordFormat,
)
from gpuws.core.recordproblems import UnknownKey
from gpuws.core.validation import validate_name

SCHEMA_VERSION = 1
FLEETS_FILE = "fleets.toml"
#: Keyring service for fleet credentials, apart from host profiles' so names never collide.
SECRET_SERVICE = "gpuws-fleet"  # noqa: S105 (a keyring service name, not a secret)


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
    # Connection (#26): a private CA, a client certificate and key (paths), a tenant sent as
    # X-Scope-OrgID (Mimir, Cortex), and `insecure` (no TLS verification; said wherever shown).
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    tenant: str | None = None
    insecure: bool = False

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
            "ca_file": self.ca_file,
            "client_cert": self.client_cert,
            "client_key": self.client_key,
            "tenant": self.tenant,
            "insecure": self.insecure,
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
    _validate_connection(profile)
    return dataclasses.replace(profile, prometheus=validate_url(profile.prometheus),
                               selector=normalize_selector(profile.selector))


_TENANT = re.compile(r"[A-Za-z0-9!._*'()|-]{1,150}")  # Mimir's tenant ID characters (and `|` for several)


def _validate_connection(profile: FleetProfile) -> None:
    """TLS files are absolute paths, a client certificate comes with its key, the tenant is one ID."""
    for key in ("ca_file", "client_cert", "client_key"):
        value = getattr(profile, key)
        if value is not None and not Path(value).is_absolute():
            raise ValidationError(key, f"give an absolute path, not {value[:60]!r}")
    if bool(profile.client_cert) != bool(profile.client_key):
        raise ValidationError("client_key", "a client certificate needs its key (--client-cert with --client-key)")
    tls_options = profile.ca_file or profile.client_cert or profile.insecure
    if tls_options and not profile.prometheus.strip().startswith("https://"):
        raise ValidationError("prometheus", "TLS options (--ca-file, --client-cert, --insecure) need an https:// URL")
    if profile.insecure and profile.ca_file:
        raise ValidationError("insecure", "--insecure skips verification: it does not go with --ca-file")
    if profile.tenant is not None and not _TENANT.fullmatch(profile.tenant):
        raise ValidationError("tenant", "a tenant ID is 1-150 letters, digits or !-_.*'()")


def _from_table(table: dict[str, Any]) -> tuple[FleetProfile, list[UnknownKey]]:
    known = [f.name for f in dataclasses.fields(FleetProfile)]
    # A key we do not know is the user's (a typo, a newer gpuws's field): reported, never fatal.
    unknown = [UnknownKey(key, known) for key in table if key not in known]
    for key in ("name", "prometheus"):
        if not isinstance(table.get(key), str):
            raise ValidationError(key, "is required text")
    for key in ("via", "selector", "user", "ca_file", "client_cert", "client_key", "tenant"):
        if key in table and not isinstance(table[key], str):
            raise ValidationError(key, "must be text")
    if not isinstance(table.get("insecure", False), bool):
        raise ValidationError("insecure", "must be true or false")
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
        price_per_gpu_hour=None if price is None else float(price), ca_file=table.get("ca_file"),
        client_cert=table.get("client_cert"), client_key=table.get("client_key"), tenant=table.get("tenant"),
        insecure=table.get("insecure", False),
    )), unknown


FLEET_FORMAT: RecordFormat[FleetProfile] = RecordFormat(
    kind="fleet", key="fleets", newest=SCHEMA_VERSION, decode=_from_table, to_table=FleetProfile.to_dict,
    exists=FleetExists, missing=FleetNotFound, repair="gpuws fleet repair",
)


class FleetStore(NamedRecordStore[FleetProfile]):
    """Fleet profiles in `fleets.toml` (default: in `gpuws.core.paths.config_dir()`)."""

    def __init__(self, path: Path | None = None) -> None:
        super().__init__(RecordFile(path if path is not None else paths.config_dir() / FLEETS_FILE, FLEET_FORMAT))

    def get(self, name: str) -> FleetProfile:
        """The fleet called `name`; raises FleetNotFound."""
        fleet = self._named(name)
        if fleet is None:
            raise FleetNotFound(name)
        return fleet

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
