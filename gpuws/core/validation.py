"""Field validation for host profiles.

Every value that ends up in an ssh argument, a keyring entry, a file name or a provider CLI call
passes through here first, whether it came from the CLI, the GUI, `~/.ssh/config` or a
hand-edited `profiles.toml`. A refusal is a `ValidationError(field, reason)`: it names the field and
says why, and never echoes more of a hostile value than is safe to show.

The validators return the value in its normalised form (e.g. a bracketed IPv6 address without
brackets), so callers store what was checked.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import re
from collections.abc import Mapping
from pathlib import Path

from gpuws.core.errors import ValidationError
from gpuws.core.files import is_regular_file
from gpuws.core.models import AlertThresholds, AuthMethod, HostProfile, ProviderInfo
from gpuws.core.simulation import DEMO_ALIAS

# Patterns, compiled (and cached) by `re` at their first use: compiling all eleven at import was
# ~1 ms of every command's start, most of them for commands that never use them (#35).
NAME_PATTERN = r"[A-Za-z0-9._-]{1,64}"
USER_PATTERN = r"[A-Za-z0-9._][A-Za-z0-9._-]{0,31}"
# One DNS label. Underscores are not strictly DNS but common in internal names and harmless here.
_LABEL_PATTERN = r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
# Provider instance ids / regions and GPU slice names: plain tokens passed to other CLIs as argv.
_ARGV_WORD_PATTERN = r"[A-Za-z0-9._:/+-]{1,128}"
_CONTROL_PATTERN = r"[\x00-\x1f\x7f]"

PROVIDER_KINDS = ("aws", "gcp", "alibaba", "tencent", "custom")
MAX_NOTES_CHARS = 4000
MAX_KEY_PATH_CHARS = 4096


def _preview(value: str) -> str:
    """A short, printable rendering of a refused value (hostile input stays one harmless line)."""
    shown = value if len(value) <= 40 else value[:40] + "..."
    return repr(shown)


def validate_name(name: object, field: str = "name") -> str:
    """A profile name: 1-64 of `A-Z a-z 0-9 . _ -`, not starting with '-' and not only dots.

    Names become keyring usernames and file names and are typed as CLI arguments, so a leading
    '-' (read as an option) and '.'/'..' (path traversal) are refused as well.
    """
    if not isinstance(name, str) or not name:
        raise ValidationError(field, "is required")
    if not re.fullmatch(NAME_PATTERN, name):
        if len(name) > 64:
            raise ValidationError(field, f"is {len(name)} characters long; at most 64 are allowed")
        raise ValidationError(
            field, f"{_preview(name)} may only contain letters, digits, '.', '_' and '-'"
        )
    if name.startswith("-"):
        raise ValidationError(field, f"{_preview(name)} must not start with '-'")
    if set(name) == {"."}:
        raise ValidationError(field, f"{_preview(name)} is not a usable name")
    return name


def validate_host(host: object, field: str = "host") -> str:
    """A DNS name, an IPv4 address or an IPv6 address (bare or in brackets); returns it bare."""
    if not isinstance(host, str) or not host:
        raise ValidationError(field, "is required")
    if host.startswith("-"):
        raise ValidationError(field, f"{_preview(host)} must not start with '-'")
    if host.startswith("[") and host.endswith("]"):
        return _validate_ipv6(host[1:-1], field)
    if ":" in host:
        return _validate_ipv6(host, field)
    if len(host) > 253:
        raise ValidationError(field, f"is {len(host)} characters long; a host name has at most 253")
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    if not all(re.fullmatch(_LABEL_PATTERN, label) for label in labels):
        raise ValidationError(
            field,
            f"{_preview(host)} is not a DNS name or IP address "
            "(letters, digits, '-' and '.' only; no spaces, '@', '%' or shell characters)",
        )
    if all(label.isdigit() for label in labels):
        # "1234" or "10.1" would be read as an address by the resolver; only a real IPv4 counts.
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise ValidationError(field, f"{_preview(host)} is not a valid IPv4 address") from None
    return host


def _validate_ipv6(text: str, field: str) -> str:
    # ipaddress accepts scope ids ("fe80::1%eth0"); '%' is refused like everywhere else.
    if "%" in text:
        raise ValidationError(field, f"{_preview(text)}: IPv6 scope ids ('%') are not supported")
    try:
        return str(ipaddress.IPv6Address(text))
    except ValueError:
        raise ValidationError(field, f"{_preview(text)} is not a valid IPv6 address") from None


def validate_user(user: object, field: str = "user") -> str | None:
    """A POSIX-style login name, or None for "the ssh default"."""
    if user is None:
        return None
    if not isinstance(user, str) or not user:
        raise ValidationError(field, "must be a non-empty login name or left out")
    if user.startswith("-"):
        raise ValidationError(field, f"{_preview(user)} must not start with '-'")
    if not re.fullmatch(USER_PATTERN, user):
        raise ValidationError(
            field,
            f"{_preview(user)} is not a login name "
            "(up to 32 of letters, digits, '.', '_' and '-'; no spaces, '@' or shell characters)",
        )
    return user


# The one parser of numbers typed by a user (every numeric CLI option, profile fields given as
# text): ASCII digits only. int() and float() also take Arabic-Indic and other Unicode digits
# ("٣" is 3), "1_000", " 3 ", "1e3", "nan" and "inf"; none of those is what a user means here.
_WHOLE_PATTERN = r"(?a)-?[0-9]{1,30}"
_DECIMAL_PATTERN = r"(?a)-?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})"


def parse_whole_number(text: str, field: str) -> int:
    """A whole number written in ASCII digits (an optional leading '-'); ValidationError otherwise."""
    if not re.fullmatch(_WHOLE_PATTERN, text):
        raise ValidationError(field, f"{_preview(text)} is not a whole number (digits 0-9)")
    return int(text)


def parse_decimal(text: str, field: str) -> float:
    """A decimal number such as 2, 0.5 or .25 in ASCII digits (an optional leading '-'; no
    exponent, no nan or inf); ValidationError otherwise."""
    if not re.fullmatch(_DECIMAL_PATTERN, text):
        raise ValidationError(field, f"{_preview(text)} is not a number (digits 0-9 and one '.')")
    return float(text)


def validate_port(port: object, field: str = "port") -> int:
    """A TCP port 1-65535; accepts an int or a decimal string (from the CLI)."""
    value: int | None = None
    if isinstance(port, int) and not isinstance(port, bool):
        value = port
    elif isinstance(port, str) and re.fullmatch(_WHOLE_PATTERN, port.strip()):
        value = parse_whole_number(port.strip(), field)
    if value is None or not 1 <= value <= 65535:
        shown = _preview(port) if isinstance(port, str) else repr(port)
        raise ValidationError(field, f"{shown} is not a port number from 1 to 65535")
    return value


MAX_IDENTITY_FILES = 100  # OpenSSH's SSH_MAX_IDENTITY_FILES


def validate_key_path(path: object, field: str = "key_path", *, must_exist: bool = True) -> str | None:
    """A private key file: absolute or starting with '~', and (by default) an existing file."""
    if path is None:
        return None
    if not isinstance(path, str) or not path:
        raise ValidationError(field, "must be a file path or left out")
    if len(path) > MAX_KEY_PATH_CHARS or re.search(_CONTROL_PATTERN, path) or not _encodable(path):
        raise ValidationError(field, "is not a usable file path (too long, not UTF-8 or has control characters)")
    expanded = Path(path).expanduser()
    if not expanded.is_absolute():
        raise ValidationError(field, f"{_preview(path)} must be an absolute path or start with '~'")
    if must_exist and not is_regular_file(expanded):
        if _exists(expanded):
            raise ValidationError(field, f"{_preview(path)} is not a regular file (a private key is a file)")
        raise ValidationError(field, f"{_preview(path)}: no such file")
    return path


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


MAX_KEY_FILE_BYTES = 1024 * 1024  # a private key is a few KiB (an 8 kbit RSA key in PEM under 7 KiB)
_PRIVATE_KEY_PATTERN = rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----|\APuTTY-User-Key-File-\d+:"
_PUBLIC_KEY_PATTERN = rb"\A(?:ssh-|ecdsa-|sk-)[a-z0-9@.-]+ [A-Za-z0-9+/=]+"


def check_private_key_file(path: str, field: str = "key_path") -> None:
    """Refuse a `--key` that is not a private key file: missing, not a regular file (/dev/zero),
    too large, a public key, or text without a private key block (/etc/passwd). Read through the
    one bounded local file reader; the key itself is neither parsed nor shown here."""
    from gpuws.core.files import LocalFileRefused, read_regular_file

    validate_key_path(path, field, must_exist=True)
    try:
        data = read_regular_file(Path(path).expanduser(), MAX_KEY_FILE_BYTES, what="key file")
    except FileNotFoundError:
        raise ValidationError(field, f"{_preview(path)}: no such file") from None
    except LocalFileRefused as exc:
        raise ValidationError(field, str(exc)) from None
    if re.match(_PUBLIC_KEY_PATTERN, data):
        raise ValidationError(field, f"{_preview(path)} is a public key; give the private key file "
                                     "(usually the same name without .pub)")
    if not re.search(_PRIVATE_KEY_PATTERN, data):
        raise ValidationError(field, f"{_preview(path)} is not a private key (no '-----BEGIN ... PRIVATE KEY-----' "
                                     "block, no PuTTY key)")


def validate_price(price: object, field: str = "price_per_hour") -> float | None:
    """A non-negative finite amount, or None. Accepts numbers or decimal strings (from the CLI)."""
    if price is None:
        return None
    value: float | None = None
    if isinstance(price, int | float) and not isinstance(price, bool):
        value = float(price)
    elif isinstance(price, str) and re.fullmatch(_DECIMAL_PATTERN, price.strip()):
        # ASCII digits only, as for ports: float() would also take Arabic-Indic digits, "1_0", "1e3" or "nan".
        value = parse_decimal(price.strip(), field)
    if value is None or not math.isfinite(value):
        shown = _preview(price) if isinstance(price, str) else repr(price)
        raise ValidationError(field, f"{shown} is not a number")
    if value < 0:
        raise ValidationError(field, "must be 0 or more")
    return value


def validate_tag(tag: object, field: str = "tags") -> str:
    """A tag follows the same rules as a profile name."""
    return validate_name(tag, field)


def validate_token(value: object, field: str) -> str | None:
    """A plain token passed to another CLI as one argument (instance id, region, slice name)."""
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(_ARGV_WORD_PATTERN, value) or value.startswith("-"):
        shown = _preview(value) if isinstance(value, str) else "this value"
        raise ValidationError(
            field, f"{shown} may only contain letters, digits and . _ : / + - (not starting with '-')"
        )
    return value


_SLICE_PATTERN = r"[A-Za-z0-9._:/+,=;-]{1,256}"


def validate_slice_profile(value: object, field: str = "slice_profile") -> str | None:
    """A GPU slice description: "full", "7x1g.10gb", "3g.40gb,2g.20gb" or per GPU "gpu0=full;gpu1=1g.10gb"."""
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(_SLICE_PATTERN, value) or value.startswith("-"):
        shown = _preview(value) if isinstance(value, str) else "this value"
        raise ValidationError(field, f"{shown} may only contain letters, digits and . _ : / + , = ; -")
    return value


def validate_provider(provider: ProviderInfo) -> ProviderInfo:
    """Provider kind from PROVIDER_KINDS; instance id and region are plain tokens."""
    if provider.kind is not None and provider.kind not in PROVIDER_KINDS:
        shown = _preview(provider.kind) if isinstance(provider.kind, str) else "this value"
        raise ValidationError("provider.kind", f"{shown} is not one of {', '.join(PROVIDER_KINDS)}")
    return dataclasses.replace(
        provider,
        instance_id=validate_token(provider.instance_id, "provider.instance_id"),
        region=validate_token(provider.region, "provider.region"),
        commands=validate_provider_commands(provider.commands),
    )


def validate_provider_commands(commands: object) -> dict[str, list[str]]:
    """Per-action argv templates: a list of strings each (the resize planner checks the actions).

    They run as argument lists, never through a shell, so only the shape is checked here.
    """
    if not isinstance(commands, dict):
        raise ValidationError("provider.commands", "must be a table of action = [arguments]")
    for action, argv in commands.items():
        validate_name(action, "provider.commands")
        if (
            not isinstance(argv, list)
            or not argv
            or not all(isinstance(arg, str) and "\x00" not in arg for arg in argv)
        ):
            raise ValidationError(f"provider.commands.{action}", "must be a non-empty list of arguments")
    return commands


def validate_slice_prices(prices: object) -> dict[str, float]:
    """Per-slice prices per hour: slice name -> non-negative amount."""
    if not isinstance(prices, dict):
        raise ValidationError("slice_prices", "must be a table of slice = price")
    checked: dict[str, float] = {}
    for slice_name, price in prices.items():
        key = validate_token(slice_name, "slice_prices")
        value = validate_price(price, f"slice_prices.{slice_name}")
        if key is None or value is None:
            raise ValidationError("slice_prices", "needs a slice name and a price")
        checked[key] = value
    return checked


def validate_alerts(alerts: AlertThresholds) -> AlertThresholds:
    """Percentages within 0-100, a positive idle window, a plausible temperature."""
    for name, low, high in (("mem_used_pct", 0, 100), ("idle_util_pct", 0, 100), ("idle_minutes", 0, 10080)):
        value = validate_price(getattr(alerts, name), f"alerts.{name}")
        if value is None or not low <= value <= high:
            raise ValidationError(f"alerts.{name}", f"must be a number from {low} to {high}")
    temp = validate_price(alerts.temp_c, "alerts.temp_c")
    if temp is not None and temp > 150:
        raise ValidationError("alerts.temp_c", "must be at most 150")
    return alerts


def validate_notes(notes: object) -> str:
    """Free text, but bounded and without NUL (which TOML and most widgets cannot show)."""
    if not isinstance(notes, str):
        raise ValidationError("notes", "must be text")
    if len(notes) > MAX_NOTES_CHARS or "\x00" in notes:
        raise ValidationError("notes", f"must be at most {MAX_NOTES_CHARS} characters of text")
    if not _encodable(notes):  # undecodable bytes kept as lone surrogates: TOML cannot hold them
        raise ValidationError("notes", "must be valid UTF-8 text")
    return notes


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def validate_jump(
    profile_name: str, jump: object, known: Mapping[str, HostProfile] | None
) -> str | None:
    """The jump host: another profile's name, or a `ProxyJump`-style chain (`gpuws.core.jumps`)
    of profile names and `[user@]host[:port]` addresses. With `known`, every profile named must
    exist and the chain must not loop."""
    if jump is None:
        return None
    from gpuws.core.jumps import is_profile_reference, parse_jump  # for a profile that has one (#35)

    if not isinstance(jump, str) or is_profile_reference(jump) or not jump:
        name = validate_name(jump, "jump")
        names = [name]
        spec = name
    else:
        hops = parse_jump(jump)
        for hop in hops:
            if hop.host is not None:
                validate_host(hop.host, "jump")
                if hop.user is not None:
                    validate_user(hop.user, "jump")
        spec = ",".join(hop.spec() for hop in hops)
        names = [hop.profile for hop in hops if hop.profile is not None]
    for name in names:
        if name == profile_name:
            raise ValidationError("jump", "a host cannot be its own jump host")
    if known is not None:
        _check_jump_graph(profile_name, names, known)
    return spec


MAX_JUMP_DEPTH = 8  # gpuws.core.jumps.MAX_JUMP_HOPS (which imports this module)


def _check_jump_graph(profile_name: str, names: list[str], known: Mapping[str, HostProfile]) -> None:
    """Follow the profile names a jump chain uses, refusing cycles and missing profiles.

    An explicit stack and each profile once: a long chain is never nested calls (no
    RecursionError) and a profile reached twice is not walked twice.
    """
    done: set[str] = set()
    path = [profile_name]
    on_path = {profile_name}
    stack: list[list[str]] = [list(reversed(names))]
    while stack:
        pending = stack[-1]
        if not pending:
            stack.pop()
            finished = path.pop()
            on_path.discard(finished)
            done.add(finished)
            continue
        name = pending.pop()
        if name in on_path:
            chain = " -> ".join([*path, name])
            raise ValidationError("jump", f"jump hosts form a cycle: {chain}")
        if name in done:
            continue
        target = known.get(name)
        if target is None:
            raise ValidationError("jump", f"no host profile named {_preview(name)}")
        if len(path) > MAX_JUMP_DEPTH:  # a connection would refuse it (jumps.MAX_JUMP_HOPS): say so now
            raise ValidationError("jump", f"the jump chain through {_preview(path[1])} nests more than "
                                          f"{MAX_JUMP_DEPTH} jump hosts")
        path.append(name)
        on_path.add(name)
        stack.append(list(reversed(_jump_names(target.jump))))


def _jump_names(spec: str | None) -> list[str]:
    if not spec:  # most profiles: no jump host, and no need of the jump parser (#35)
        return []
    from gpuws.core.jumps import jump_profile_names

    return jump_profile_names(spec)


def validate_profile(
    profile: HostProfile,
    known: Mapping[str, HostProfile] | None = None,
    *,
    check_files: bool = True,
) -> HostProfile:
    """Check every field of `profile`; return a normalised copy or raise ValidationError.

    `known` maps the other profiles' names to profiles: when given, the jump host must be one of
    them and the jump chain must not loop. `check_files=False` skips the key-file existence check
    (used when loading: a key moved since is not a corrupt profile).
    """
    name = validate_name(profile.name)
    if known is not None and name == DEMO_ALIAS and not profile.simulated:
        # Every command takes "demo" for the built-in simulated host: a profile of that name
        # would silently send `gpuws slices demo` and the rest to another machine.
        raise ValidationError("name", f"'{DEMO_ALIAS}' is the built-in simulated host's alias; choose another name")
    try:
        auth = AuthMethod(profile.auth)
    except ValueError:
        choices = ", ".join(m.value for m in AuthMethod)
        raise ValidationError("auth", f"must be one of {choices}") from None
    key_path = validate_key_path(profile.key_path, must_exist=check_files)
    if auth is AuthMethod.KEY and key_path is None:
        raise ValidationError("key_path", "is required when auth is 'key'")
    if not isinstance(profile.identity_files, list) or len(profile.identity_files) > MAX_IDENTITY_FILES:
        raise ValidationError("identity_files", f"must be a list of at most {MAX_IDENTITY_FILES} key files")
    identity_files = [validate_key_path(path, "identity_files", must_exist=False) or "" for path in
                      profile.identity_files]
    if not isinstance(profile.tags, list):
        raise ValidationError("tags", "must be a list of tags")
    if not isinstance(profile.simulated, bool):
        raise ValidationError("simulated", "must be true or false")
    if not isinstance(profile.budget_stop, bool):
        raise ValidationError("budget_stop", "must be true or false")
    return dataclasses.replace(
        profile,
        name=name,
        host=validate_host(profile.host),
        port=validate_port(profile.port),
        user=validate_user(profile.user),
        auth=auth,
        key_path=key_path,
        identity_files=identity_files,
        jump=validate_jump(name, profile.jump, known),
        provider=validate_provider(profile.provider),
        slice_profile=validate_slice_profile(profile.slice_profile),
        price_per_hour=validate_price(profile.price_per_hour),
        slice_prices=validate_slice_prices(profile.slice_prices),
        tags=[validate_tag(tag) for tag in profile.tags],
        notes=validate_notes(profile.notes),
        alerts=validate_alerts(profile.alerts),
        budget=validate_price(profile.budget, "budget"),
        budget_daily=validate_price(profile.budget_daily, "budget_daily"),
        currency=validate_currency(profile.currency),
    )


def validate_currency(value: object, field: str = "currency") -> str | None:
    """An ISO 4217 code such as "EUR" (upper-cased), or None for the locale's currency."""
    if value is None or value == "":
        return None
    from gpuws.core.money import is_currency_code  # with its locale lock: for a profile that names one (#35)

    if not isinstance(value, str) or not is_currency_code(value.strip().upper()):
        raise ValidationError(field, f"{_preview(str(value))} is not a currency code such as USD or EUR")
    return value.strip().upper()
