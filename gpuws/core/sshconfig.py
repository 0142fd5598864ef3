"""Import host profiles from an OpenSSH client config (`~/.ssh/config`).

`paramiko.SSHConfig` resolves each `Host` alias (first value wins, `Host *` defaults, `%h`-style
tokens). What it does not do, we do before handing it the text:

- `Include` is expanded here: relative paths against `~/.ssh`, `~`, globs in lexical order,
  nested includes up to 16 deep, and a loop guard. As in OpenSSH, the block that was open before
  an `Include` is open again after it.
- `Match` blocks are dropped and reported: paramiko would run `Match exec` commands, and an
  importer must never execute what a config file says. `Canonicalize*` lines are dropped too
  (they make paramiko resolve names over DNS).

Only literal aliases become profiles. Wildcard patterns (`*`, `*.example`, `!x`), values that
fail validation, `ProxyCommand` hosts and jump hosts we cannot map to an imported alias are listed
in `skipped` with the reason; nothing in the file can make the import crash.
"""

from __future__ import annotations

import glob
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from gpuws.core.errors import GpuwsError, ValidationError
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.validation import validate_profile

MAX_INCLUDE_DEPTH = 16
# The same split paramiko uses: "Key value" or "Key=value".
_LINE_RE = re.compile(r"(\w+)(?:\s*=\s*|\s+)(.+)")
# Options that make paramiko do DNS lookups while resolving an alias.
_DROPPED_KEYS = {"canonicalizehostname", "canonicaldomains", "canonicalizemaxdots",
                 "canonicalizefallbacklocal", "canonicalizepermittedcnames"}


@dataclass
class SshConfigImport:
    """Profiles ready to add (jump hosts before their users) and what was left out, with why."""

    profiles: list[HostProfile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def default_ssh_config() -> Path:
    return Path("~/.ssh/config").expanduser()


def import_ssh_config(path: Path | None = None, *, ssh_dir: Path | None = None) -> SshConfigImport:
    """Read `path` (default `~/.ssh/config`) and turn its Host aliases into profiles.

    `ssh_dir` is where relative `Include` paths are looked up (default `~/.ssh`).
    """
    config_path = (path if path is not None else default_ssh_config()).expanduser()
    if not config_path.is_file():
        raise ValidationError("path", f"{config_path}: no such file")
    flat = _Flattener(ssh_dir if ssh_dir is not None else Path("~/.ssh").expanduser())
    flat.read(config_path, depth=0)
    config = paramiko.SSHConfig.from_text("\n".join(flat.lines))

    result = SshConfigImport(skipped=flat.skipped)
    aliases = _literal_aliases(flat.host_patterns, result.skipped)
    folded = {alias.casefold(): alias for alias in aliases}
    candidates: list[HostProfile] = []
    for alias in aliases:
        try:
            profile = _profile_for(alias, config, folded)
            candidates.append(validate_profile(profile))
        except (ValidationError, _Skip) as exc:
            result.skipped.append((alias, str(exc)))
    result.profiles = _resolve_jumps(candidates, result.skipped)
    return result


class _Skip(GpuwsError):
    """An alias we do not import (the message is the reason)."""


def _literal_aliases(patterns: list[str], skipped: list[tuple[str, str]]) -> list[str]:
    """Aliases in file order, each once; wildcard and negated patterns reported once."""
    aliases: list[str] = []
    seen: set[str] = set()
    for pattern in patterns:
        if pattern.casefold() in seen:
            continue
        seen.add(pattern.casefold())
        if pattern.startswith("!"):
            skipped.append((pattern, "negated pattern, not a host"))
        elif any(ch in pattern for ch in "*?"):
            skipped.append((pattern, "wildcard pattern, not a host (its settings apply to the hosts it matches)"))
        else:
            aliases.append(pattern)
    return aliases


def _profile_for(alias: str, config: paramiko.SSHConfig, aliases: dict[str, str]) -> HostProfile:
    options = config.lookup(alias)
    if options.get("proxycommand"):
        raise _Skip("uses ProxyCommand, which gpuws does not run; use a jump host profile instead")
    identity_files = options.get("identityfile") or []
    key_path: str | None = None
    if identity_files:
        key = Path(identity_files[0]).expanduser()
        # OpenSSH reads a relative IdentityFile from the home directory.
        key_path = str(key if key.is_absolute() else Path.home() / key)
    jump: str | None = None
    proxy_jump = options.get("proxyjump")
    if proxy_jump and proxy_jump.lower() != "none":
        jump = aliases.get(proxy_jump.casefold())
        if jump is None:
            raise _Skip(
                f"ProxyJump {proxy_jump[:60]!r} is not a Host entry in this config; "
                "add the jump host as a profile, then add this one with --jump"
            )
    return HostProfile(
        name=alias,
        host=options.get("hostname", alias),
        port=options.get("port", 22),  # a string from the file; validation parses it
        user=options.get("user"),
        auth=AuthMethod.KEY if key_path else AuthMethod.AGENT,
        key_path=key_path,
        jump=jump,
    )


def _resolve_jumps(candidates: list[HostProfile], skipped: list[tuple[str, str]]) -> list[HostProfile]:
    """Order profiles so each jump host comes first; drop those whose jump host was dropped."""
    by_name = {p.name: p for p in candidates}
    ordered: list[HostProfile] = []
    placed: set[str] = set()
    for profile in candidates:
        chain: list[HostProfile] = []
        current: HostProfile | None = profile
        reason = None
        while current is not None and current.name not in placed:
            if current in chain:
                reason = f"jump hosts form a cycle through {current.name!r}"
                break
            chain.append(current)
            if current.jump is None:
                current = None
            elif current.jump in by_name:
                current = by_name[current.jump]
            else:
                reason = f"its jump host {current.jump!r} was skipped"
                break
        if reason is not None:
            if profile.name not in placed and profile.name in by_name:
                skipped.append((profile.name, reason))
                del by_name[profile.name]
            continue
        for link in reversed(chain):
            placed.add(link.name)
            ordered.append(link)
    return ordered


class _Flattener:
    """Turns a config and its Includes into one text paramiko can parse safely."""

    def __init__(self, ssh_dir: Path) -> None:
        self.ssh_dir = ssh_dir
        self.lines: list[str] = []
        self.host_patterns: list[str] = []
        self.skipped: list[tuple[str, str]] = []
        self._stack: list[Path] = []
        self._header: str | None = None  # the open Host line (None: top level)
        self._in_match = False  # inside a dropped Match block

    def read(self, path: Path, depth: int) -> bool:
        """Append `path`'s lines; True when it (or its includes) opened a Host/Match block."""
        real = path.resolve()
        if real in self._stack:
            self.skipped.append((f"Include {path}", "includes itself (a loop); ignored"))
            return False
        if depth > MAX_INCLUDE_DEPTH:
            self.skipped.append((f"Include {path}", f"nested more than {MAX_INCLUDE_DEPTH} deep; ignored"))
            return False
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            self.skipped.append((f"Include {path}", f"cannot be read: {exc.strerror}"))
            return False
        self._stack.append(real)
        opened = False
        for number, raw in enumerate(text.splitlines(), start=1):
            opened |= self._line(raw.strip(), f"{path.name}:{number}", depth)
        self._stack.pop()
        return opened

    def _line(self, line: str, where: str, depth: int) -> bool:
        if not line or line.startswith("#"):
            return False
        match = _LINE_RE.fullmatch(line)
        if match is None:
            self.skipped.append((where, "line cannot be parsed; ignored"))
            return False
        key, value = match.group(1).lower(), match.group(2)
        if key == "include":
            return self._include(value, where, depth)
        if key == "match":
            self.skipped.append((f"Match {value[:60]}", "Match blocks are not imported"))
            self._header, self._in_match = None, True
            return True
        if key == "host":
            try:
                patterns = shlex.split(value)
            except ValueError:
                self.skipped.append((where, "Host line cannot be parsed; its block is ignored"))
                self._header, self._in_match = None, True
                return True
            self.host_patterns.extend(patterns)
            self._header, self._in_match = line, False
            self.lines.append(line)
            return True
        if not self._in_match and key not in _DROPPED_KEYS:
            self.lines.append(line)
        return False

    def _include(self, value: str, where: str, depth: int) -> bool:
        try:
            patterns = shlex.split(value)
        except ValueError:
            self.skipped.append((where, "Include line cannot be parsed; ignored"))
            return False
        header, in_match = self._header, self._in_match
        opened = False
        for pattern in patterns:
            base = Path(pattern).expanduser()
            if not base.is_absolute():
                base = self.ssh_dir / base
            for match in sorted(glob.glob(str(base))):
                if Path(match).is_file():
                    opened |= self.read(Path(match), depth + 1)
        if opened:
            # OpenSSH restores the enclosing block after an Include; re-open it.
            self._header, self._in_match = header, in_match
            if not in_match:
                self.lines.append(header if header is not None else "Host *")
        return opened
