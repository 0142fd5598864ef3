"""Import host profiles from an OpenSSH client config (`~/.ssh/config`), read as OpenSSH reads it.

Each alias is resolved the way `ssh -G ALIAS` resolves it (OpenSSH 9), for the fields gpuws keeps:
hostname, user, port, identity files in order, and the proxy jump chain.

- Lines are split into words as OpenSSH does (quotes, backslash escapes, a word starting with
  `#` ends the line); the first value of an option wins, `IdentityFile` accumulates (duplicates
  dropped); `ProxyJump` and `ProxyCommand` exclude each other, the first one wins.
- `Host` patterns match the alias case-sensitively (`*`, `?`, `!` negation wins).
- `Include`: relative paths against `~/.ssh`, `~`, globs in lexical order, 16 levels deep. As in
  OpenSSH, an `Include` inside a block that does not apply to the alias is read but never applies
  (its `Host` lines never match), and the enclosing block's state returns after it.
- `Match host/originalhost/user/localuser/all` are evaluated. `Match exec` is never run (an
  importer must never execute what a config file says), nor are `localnetwork`, `canonical` and
  `final` evaluated: such a block counts as not matching, and every host it could concern says so.
- `%h` and `%%` in `HostName`; `${VAR}` and `%d %u %h %r %p %n %l %L %i %%` in `IdentityFile`, `~`
  kept for connect time and a relative one made absolute against the import's working directory
  (OpenSSH opens it relative to the directory `ssh` runs in). Every identity file is kept in
  order: the first that exists becomes the profile's key, the others its `identity_files` (tried
  in turn at connect time, as ssh tries them); each one missing at import is kept and noted.

Only literal aliases become profiles. Wildcard patterns (`*`, `*.example`, `!x`), values that fail
validation and `ProxyCommand` hosts are listed in `skipped` with the reason; `LocalCommand` and
unevaluated `Match` criteria are listed in `notes` per host. Jump hosts become a chain: a hop that
is an imported alias refers to that profile, any other hop is kept as an address
(`ssh://user@host:port`, resolved through the config as `ssh` would). Every file read must be a
regular file under a size cap; nothing in the file can make the import crash or run anything.
"""

from __future__ import annotations

import getpass
import glob
import heapq
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from gpuws.core.errors import GpuwsError, ValidationError
from gpuws.core.files import LocalFileRefused, is_regular_file, read_regular_file
from gpuws.core.jumps import MAX_JUMP_HOPS, JumpHop, parse_jump
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.terminal import printable
from gpuws.core.validation import MAX_IDENTITY_FILES, validate_profile

MAX_INCLUDE_DEPTH = 16
MAX_CONFIG_BYTES = 4 * 1024 * 1024  # per file; real configs are a few KiB
_KEYWORD_RE = re.compile(r"\s*([^\s=]+)\s*(?:=\s*)?(.*)", re.DOTALL)
_SINGLE = ("hostname", "user", "port", "proxyjump", "proxycommand", "localcommand")


@dataclass
class SshConfigImport:
    """Profiles ready to add (jump hosts before their users), what was left out and why, and
    per-host notes on what gpuws does not follow."""

    profiles: list[HostProfile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class ResolvedHost:
    """What `ssh -G ALIAS` says for the fields gpuws keeps (values as written, tokens unexpanded
    except in `hostname`), plus what gpuws could not follow for this alias."""

    alias: str
    hostname: str
    user: str | None
    port: str | None
    identity_files: list[str]
    proxy_jump: str | None
    proxy_command: str | None = None
    local_command: str | None = None
    configured: bool = False  # a Host line naming the alias literally applied
    notes: list[str] = field(default_factory=list)


def default_ssh_config() -> Path:
    return Path("~/.ssh/config").expanduser()


class _Skip(GpuwsError):
    """An alias we do not import (the message is the reason)."""


# -- reading -----------------------------------------------------------------------------------


def split_words(text: str) -> list[str]:
    """OpenSSH's argv_split with comments: quotes, `\\` escapes, a word starting with `#` ends it."""
    words: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in " \t\r\n\f":
            i += 1
            continue
        if text[i] == "#":
            break
        word: list[str] = []
        quote = ""
        while i < n:
            c = text[i]
            if c == "\\" and i + 1 < n and (text[i + 1] in "'\"\\" or (not quote and text[i + 1] == " ")):
                i += 1
                word.append(text[i])
            elif not quote and c in " \t\r\n\f":
                break
            elif not quote and c in "'\"":
                quote = c
            elif quote and c == quote:
                quote = ""
            else:
                word.append(c)
            i += 1
        if quote:
            raise ValueError("unbalanced quotes")
        words.append("".join(word))
    return words


@dataclass
class _Line:
    where: str
    keyword: str
    words: list[str]
    include: list[list[_Line]] | None = None  # the included files' lines, for Include


class _Reader:
    """Reads a config and its Includes once into line lists, reporting what it cannot read."""

    def __init__(self, ssh_dir: Path) -> None:
        self.ssh_dir = ssh_dir
        self.skipped: list[tuple[str, str]] = []
        self.host_patterns: list[str] = []
        self._stack: list[Path] = []

    def read(self, path: Path, depth: int) -> list[_Line]:
        try:
            real = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop, a name the OS refuses
            real = path
        if real in self._stack:
            self.skipped.append((f"Include {printable(path)}", "includes itself (a loop); ignored"))
            return []
        if depth > MAX_INCLUDE_DEPTH:
            self.skipped.append((f"Include {printable(path)}", f"nested more than {MAX_INCLUDE_DEPTH} deep; ignored"))
            return []
        try:
            text = read_regular_file(path, MAX_CONFIG_BYTES, what="ssh config file").decode("utf-8", "replace")
        except FileNotFoundError:
            self.skipped.append((f"Include {printable(path)}", "no such file; ignored"))
            return []
        except LocalFileRefused as exc:
            self.skipped.append((f"Include {printable(path)}", str(exc)))
            return []
        self._stack.append(real)
        try:
            lines: list[_Line] = []
            for number, raw in enumerate(text.splitlines(), start=1):
                line = self._line(raw, f"{printable(path.name)}:{number}", depth)
                if line is not None:
                    lines.append(line)
            return lines
        finally:
            self._stack.pop()

    def _line(self, raw: str, where: str, depth: int) -> _Line | None:
        match = _KEYWORD_RE.fullmatch(raw)
        if match is None or not match.group(1) or match.group(1).startswith("#"):
            return None
        keyword, rest = match.group(1).lower(), match.group(2)
        try:
            words = split_words(rest)
        except ValueError:
            self.skipped.append((where, "line has unbalanced quotes; ignored"))
            if keyword in ("host", "match"):  # its block must not apply to anyone
                return _Line(where, "match", ["!all"])
            return None
        if not words:
            if keyword in ("host", "match"):
                self.skipped.append((where, f"{keyword} line without arguments; its block is ignored"))
                return _Line(where, "match", ["!all"])
            self.skipped.append((where, "line cannot be parsed; ignored"))
            return None
        if keyword == "host":
            self.host_patterns.extend(words)
        if keyword == "include":
            return _Line(where, keyword, words, self._include(words, depth))
        return _Line(where, keyword, words)

    def _include(self, patterns: list[str], depth: int) -> list[list[_Line]]:
        files: list[list[_Line]] = []
        for pattern in patterns:
            base = Path(pattern).expanduser()
            if not base.is_absolute():
                base = self.ssh_dir / base
            for match in sorted(glob.glob(str(base))):
                files.append(self.read(Path(match), depth + 1))
        return files


# -- resolving one alias -------------------------------------------------------------------------


def _glob_match(pattern: str, value: str, fold: bool = False) -> bool:
    """OpenSSH's `*` and `?` wildcards, in O(len(pattern) x len(value)) at worst: a regex of
    `*a*a*a*...` backtracks exponentially on a hostile config, this never does."""
    if fold:
        pattern, value = pattern.lower(), value.lower()
    p = v = 0
    star, mark = -1, 0
    while v < len(value):
        if p < len(pattern) and pattern[p] != "*" and (pattern[p] == "?" or pattern[p] == value[v]):
            p += 1
            v += 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark = p, v  # match nothing for now; widen it on a later mismatch
            p += 1
        elif star >= 0:
            p, mark = star + 1, mark + 1
            v = mark
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def _pattern_list_matches(patterns: str, value: str, fold: bool = False) -> bool:
    """OpenSSH's match_pattern_list: a negated match anywhere is False, else any positive match."""
    matched = False
    for pattern in patterns.split(","):
        negated = pattern.startswith("!")
        if _glob_match(pattern.removeprefix("!"), value, fold):
            if negated:
                return False
            matched = True
    return matched


@dataclass
class _Header:
    """A `Host` or `Match` line (or, number 0, the top of the file). `gate` is the header active
    where the Include holding it was read: OpenSSH evaluates no Host/Match line in an included
    file when the including block does not apply."""

    line: _Line | None
    gate: int | None


@dataclass
class _Segment:
    """Option lines, in file order, that apply exactly when header `header` is active."""

    header: int
    options: list[_Line] = field(default_factory=list)


class _Index:
    """The config flattened once into segments, and which of them can concern an alias.

    Resolving every alias by walking every line is quadratic (10,000 `Host` blocks: 10^8 lines).
    A `Host` line of literal patterns applies only to the aliases it names, so an alias is resolved
    from the segments of the headers naming it plus the generic ones (wildcards, `Match`), in file
    order: the same answer as the whole walk, in the time of the lines that can concern it.
    """

    def __init__(self, lines: list[_Line]) -> None:
        self.headers: list[_Header] = [_Header(None, None)]
        self.segments: list[_Segment] = []
        self.generic: list[int] = []  # segments every alias must look at
        self.by_alias: dict[str, list[int]] = {}
        self._names: list[tuple[str, ...] | None] = [None]  # per header: the only aliases it can apply to
        self._open(0)
        self._file(lines, gate=None, active=0)

    def _file(self, lines: list[_Line], gate: int | None, active: int) -> None:
        # Recursion only per Include level: the reader stops at MAX_INCLUDE_DEPTH.
        for line in lines:
            if line.keyword in ("host", "match"):
                active = self._header(line, gate)
                self._open(active)
            elif line.keyword == "include":
                assert line.include is not None
                for included in line.include:
                    self._open(active)  # an included file starts in the including block's state
                    self._file(included, gate=active, active=active)
                self._open(active)  # and that state is back after it
            else:
                self.segments[-1].options.append(line)

    def _header(self, line: _Line, gate: int | None) -> int:
        self.headers.append(_Header(line, gate))
        names: tuple[str, ...] | None = None
        if line.keyword == "host" and not any(ch in word for word in line.words for ch in "*?"):
            names = tuple(dict.fromkeys(word for word in line.words if not word.startswith("!")))
        elif gate is not None:
            names = self._names[gate]  # active only under its gate: at most the aliases the gate names
        self._names.append(names)
        return len(self.headers) - 1

    def _open(self, header: int) -> None:
        """Start a segment of `header` (every header gets one, empty or not: evaluating it is what
        marks an alias configured and notes a Match that gpuws does not follow)."""
        last = self.segments[-1] if self.segments else None
        if last is not None and last.header == header and not last.options:
            return
        self.segments.append(_Segment(header))
        number = len(self.segments) - 1
        names = self._names[header]
        if names is None:
            self.generic.append(number)
        else:
            for alias in names:
                self.by_alias.setdefault(alias, []).append(number)

    def segments_for(self, alias: str) -> list[_Segment]:
        """The segments that can apply to `alias`, in file order."""
        own = self.by_alias.get(alias)
        numbers = heapq.merge(self.generic, own) if own else self.generic
        return [self.segments[i] for i in numbers]


class _Resolver:
    def __init__(self, alias: str, local_user: str) -> None:
        self.alias = alias
        self.local_user = local_user
        self.values: dict[str, str] = {}
        self.identity_files: list[str] = []
        self.configured = False
        self.notes: list[str] = []

    def run(self, index: _Index) -> None:
        active: dict[int, bool] = {0: True}  # a header not reached is a literal block naming another alias
        for segment in index.segments_for(self.alias):
            number = segment.header
            if number not in active:
                header = index.headers[number]
                assert header.line is not None
                gate_open = header.gate is None or active.get(header.gate, False)
                if header.line.keyword == "host":
                    active[number] = self._host(header.line.words, never_match=not gate_open)
                else:
                    active[number] = gate_open and self._match(header.line)
            if active[number]:
                for line in segment.options:
                    self._option(line)

    def _host(self, patterns: list[str], never_match: bool) -> bool:
        if never_match:
            return False
        active = False
        for pattern in patterns:
            negated = pattern.startswith("!")
            if _glob_match(pattern.removeprefix("!"), self.alias):
                if negated:
                    return False
                active = True
                if pattern == self.alias:
                    self.configured = True
        return active

    def _match(self, line: _Line) -> bool:
        words = list(line.words)
        result = True
        while words:
            criterion = words.pop(0)
            negated = criterion.startswith("!")
            name = criterion.removeprefix("!").lower()
            if name in ("all", "canonical", "final"):
                if name == "all":
                    value = True
                else:
                    self.notes.append(f"Match {name} ({line.where}) is not evaluated; its block was not applied")
                    value = False
                result = result and (value != negated)
                continue
            if not words:
                self.notes.append(f"Match {name} ({line.where}) has no argument; its block was not applied")
                return False
            argument = words.pop(0)
            if name == "exec":
                self.notes.append(
                    f"Match exec ({line.where}) is never run by gpuws; its block was not applied")
                result = False
                continue
            if name == "localnetwork":
                self.notes.append(f"Match localnetwork ({line.where}) is not evaluated; its block was not applied")
                result = False
                continue
            if name == "host":
                hostname = self.values.get("hostname")
                current = _expand_hostname(hostname, self.alias) if hostname else self.alias
                value = _pattern_list_matches(argument, current.lower(), fold=True)
            elif name == "originalhost":
                value = _pattern_list_matches(argument, self.alias)
            elif name == "user":
                value = _pattern_list_matches(argument, self.values.get("user", self.local_user))
            elif name == "localuser":
                value = _pattern_list_matches(argument, self.local_user)
            else:
                self.notes.append(f"Match {name[:40]} ({line.where}) is not understood; its block was not applied")
                return False
            result = result and (value != negated)
        return result

    def _option(self, line: _Line) -> None:
        key, first = line.keyword, line.words[0]
        if key == "identityfile":
            if first not in self.identity_files and len(self.identity_files) < MAX_IDENTITY_FILES:
                self.identity_files.append(first)
        elif key in ("proxyjump", "proxycommand"):
            # They exclude each other: whichever comes first is the one ssh uses.
            if "proxyjump" not in self.values and "proxycommand" not in self.values:
                self.values[key] = " ".join(line.words) if key == "proxycommand" else first
        elif key in _SINGLE:
            # ssh refuses extra words after a one-value option; joined, validation refuses them too.
            self.values.setdefault(key, " ".join(line.words))


def _expand_hostname(hostname: str, alias: str) -> str:
    return re.sub(r"%([%h])", lambda m: "%" if m.group(1) == "%" else alias, hostname)


def _load(path: Path | None, ssh_dir: Path | None) -> tuple[Path, _Reader, _Index]:
    config_path = (path if path is not None else default_ssh_config()).expanduser()
    reader = _Reader(ssh_dir if ssh_dir is not None else Path("~/.ssh").expanduser())
    try:
        # The top-level file must be there and readable; the reader then reads it with its includes.
        read_regular_file(config_path, MAX_CONFIG_BYTES, what="ssh config file")
    except FileNotFoundError:
        raise ValidationError("path", f"{printable(config_path)}: no such file") from None
    except LocalFileRefused as exc:
        raise ValidationError("path", str(exc)) from None
    return config_path, reader, _Index(reader.read(config_path, depth=0))


def _resolve(lines: _Index, alias: str, local_user: str) -> ResolvedHost:
    resolver = _Resolver(alias, local_user)
    resolver.run(lines)
    values = resolver.values
    hostname = _expand_hostname(values.get("hostname", alias), alias).lower()
    return ResolvedHost(
        alias=alias, hostname=hostname, user=values.get("user"), port=values.get("port"),
        identity_files=resolver.identity_files, proxy_jump=values.get("proxyjump"),
        proxy_command=values.get("proxycommand"), local_command=values.get("localcommand"),
        configured=resolver.configured, notes=resolver.notes,
    )


def resolve_host(alias: str, path: Path | None = None, *, ssh_dir: Path | None = None,
                 local_user: str | None = None) -> ResolvedHost:
    """What `ssh -G ALIAS -F PATH` resolves for the fields gpuws keeps."""
    _, _, lines = _load(path, ssh_dir)
    return _resolve(lines, alias, local_user or getpass.getuser())


def expand_identity_file(value: str, resolved: ResolvedHost, local_user: str) -> str:
    """An IdentityFile value as a profile keeps it: `${VAR}` and %-tokens expanded now, `~` kept
    (expanded at connect time), and a relative path made absolute against the working directory
    of the import, as `ssh` run there would open it."""
    home = os.path.expanduser("~")

    def env(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise _Skip(f"IdentityFile {printable(value, 80)!s}: environment variable {name} is not set")
        return os.environ[name]

    text = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", env, value)
    tokens: dict[str, Callable[[], str]] = {
        "%": lambda: "%", "d": lambda: home, "u": lambda: local_user, "h": lambda: resolved.hostname,
        "r": lambda: resolved.user or local_user, "p": lambda: resolved.port or "22",
        "n": lambda: resolved.alias, "l": lambda: socket.gethostname().split(".")[0],
        "L": lambda: socket.gethostname(), "i": lambda: str(os.getuid()) if hasattr(os, "getuid") else "0",
    }

    def token(match: re.Match[str]) -> str:
        getter = tokens.get(match.group(1))
        if getter is None:
            raise _Skip(f"IdentityFile {printable(value, 80)!s}: unknown token %{match.group(1)}")
        return getter()

    text = re.sub(r"%(.)", token, text)
    if text.startswith("~") or Path(text).is_absolute():
        return text
    # OpenSSH opens a relative IdentityFile as given, i.e. against the directory ssh runs in
    # (checked with `ssh -G` and a login from two directories): a profile outlives that
    # directory, so the path is made absolute against the directory of the import.
    return os.path.abspath(text)


# -- import ------------------------------------------------------------------------------------


def import_ssh_config(path: Path | None = None, *, ssh_dir: Path | None = None) -> SshConfigImport:
    """Read `path` (default `~/.ssh/config`) and turn its Host aliases into profiles.

    `ssh_dir` is where relative `Include` paths are looked up (default `~/.ssh`).
    """
    _, reader, lines = _load(path, ssh_dir)
    local_user = getpass.getuser()
    result = SshConfigImport(skipped=reader.skipped)
    aliases = _literal_aliases(reader.host_patterns, result.skipped)
    alias_set = set(aliases)
    resolved = {alias: _resolve(lines, alias, local_user) for alias in aliases}
    candidates: list[HostProfile] = []
    for alias in aliases:
        host = resolved[alias]
        try:
            if not host.configured:
                raise _Skip("its Host line never applies (it sits in an Include inside another host's block)")
            profile = _profile_for(host, alias_set, lines, local_user)
            candidates.append(validate_profile(profile))
        except (ValidationError, _Skip) as exc:
            result.skipped.append((alias, str(exc)))
            continue
        result.notes.extend((alias, note) for note in host.notes)
        if host.local_command:
            result.notes.append((alias, "LocalCommand is never run by gpuws; ignored"))
    result.profiles = _resolve_jumps(candidates, result.skipped)
    return result


def _literal_aliases(patterns: list[str], skipped: list[tuple[str, str]]) -> list[str]:
    """Aliases in file order, each once; wildcard and negated patterns reported once."""
    aliases: list[str] = []
    seen: set[str] = set()
    for pattern in patterns:
        if pattern in seen:
            continue
        seen.add(pattern)
        if pattern.startswith("!"):
            skipped.append((pattern, "negated pattern, not a host"))
        elif any(ch in pattern for ch in "*?"):
            skipped.append((pattern, "wildcard pattern, not a host (its settings apply to the hosts it matches)"))
        else:
            aliases.append(pattern)
    return aliases


def _profile_for(host: ResolvedHost, aliases: set[str], lines: _Index, local_user: str) -> HostProfile:
    if host.proxy_command:
        raise _Skip("uses ProxyCommand, which gpuws never runs; use a jump host profile instead")
    # Every IdentityFile in order, as ssh tries them all: the first that exists now is key_path
    # (the key auth uses), every other one is kept in identity_files (tried in turn at connect
    # time once it exists); each missing one is named in a note, as it may never have existed.
    keys = [expand_identity_file(value, host, local_user) for value in host.identity_files]
    first = next((i for i, key in enumerate(keys) if is_regular_file(Path(key).expanduser())), None)
    key_path = keys[first] if first is not None else None
    later = [key for i, key in enumerate(keys) if i != first]
    missing = [key for key in later if not is_regular_file(Path(key).expanduser())]
    if missing:
        shown = ", ".join(printable(m, 120) for m in missing)
        host.notes.append(f"IdentityFile not found: {shown}; kept in the profile"
                          + ("" if key_path else " (the agent is used until it exists)"))
    jump: str | None = None
    if host.proxy_jump and host.proxy_jump.lower() != "none":
        jump = _jump_spec(host.proxy_jump, aliases, lines, local_user)
    return HostProfile(
        name=host.alias,
        host=host.hostname,
        port=cast(int, host.port or 22),  # a string from the file; validation parses and checks it
        user=host.user,
        auth=AuthMethod.KEY if key_path else AuthMethod.AGENT,
        key_path=key_path,
        identity_files=later,
        jump=jump,
    )


def _jump_spec(value: str, aliases: set[str], lines: _Index, local_user: str) -> str:
    """A ProxyJump value as a gpuws jump chain: imported aliases by name, other hops as addresses
    resolved through the config as `ssh` resolves a jump host."""
    try:
        hops = parse_jump(value)
    except ValidationError as exc:
        raise _Skip(f"ProxyJump {printable(value, 60)}: {exc.reason}") from None
    parts: list[str] = []
    for hop in hops:
        if hop.profile is not None and hop.profile in aliases:
            parts.append(hop.profile)
            continue
        target = hop.profile if hop.profile is not None else hop.host
        assert target is not None
        via = _resolve(lines, target, local_user)
        if via.proxy_command or via.proxy_jump not in (None, "none"):
            raise _Skip(f"jump host {printable(target, 60)} needs its own proxy; add it as a profile first")
        port = hop.port if hop.port is not None else int(via.port) if via.port and via.port.isdigit() else None
        parts.append(JumpHop(host=via.hostname, user=hop.user or via.user, port=port).spec())
    return ",".join(parts)


def _resolve_jumps(candidates: list[HostProfile], skipped: list[tuple[str, str]]) -> list[HostProfile]:
    """Order profiles so each jump host comes first; drop those whose jump host was dropped, whose
    jump hosts loop, or whose chain is longer than gpuws follows (MAX_JUMP_HOPS, as at connect).

    A walk with an explicit stack and each profile visited once: a 5,000-hop chain is 5,000 steps,
    never 5,000 nested calls.
    """
    by_name = {p.name: p for p in candidates}
    failed: dict[str, str] = {}
    hops: dict[str, int] = {}  # placed profile -> how many hosts `jump_hops` passes on the way to it
    ordered: list[HostProfile] = []
    for root in candidates:
        if root.name in hops or root.name in failed:
            continue
        stack: list[tuple[HostProfile, list[str]]] = [(root, _names(root.jump))]
        on_path = {root.name}
        while stack:
            profile, pending = stack[-1]
            reason: str | None = None
            while pending and reason is None:
                name = pending[0]
                if name in hops:
                    pending.pop(0)
                elif name in failed:
                    reason = f"its jump host {name!r} was skipped"
                elif name in on_path:
                    reason = f"jump hosts form a cycle through {name!r}"
                elif name not in by_name:
                    reason = f"its jump host {name!r} was skipped"
                else:
                    break  # visit it first
            if reason is None and pending:
                target = by_name[pending[0]]
                stack.append((target, _names(target.jump)))
                on_path.add(target.name)
                continue
            stack.pop()
            on_path.discard(profile.name)
            if reason is None:
                count = _hop_count(profile, hops)
                if count > MAX_JUMP_HOPS:
                    reason = f"its jump chain passes {count} hosts; gpuws follows at most {MAX_JUMP_HOPS}"
                else:
                    hops[profile.name] = count
                    ordered.append(profile)
                    continue
            failed[profile.name] = reason
            cycle = reason.startswith("jump hosts form a cycle")
            for waiting, _ in stack:  # everything above it on the path needs it
                failed.setdefault(waiting.name, reason if cycle else f"its jump host {profile.name!r} was skipped")
            stack.clear()
    skipped.extend((p.name, failed[p.name]) for p in candidates if p.name in failed)
    return ordered


def _hop_count(profile: HostProfile, placed: dict[str, int]) -> int:
    """The hosts `gpuws.core.jumps.jump_hops` passes to reach `profile` (its jump hosts placed)."""
    if not profile.jump:
        return 0
    count = 0
    for position, hop in enumerate(parse_jump(profile.jump)):
        if hop.profile is not None and position == 0:  # `ssh -J a,b`: a's own jump hosts apply
            count += placed[hop.profile]
        count += 1
    return count


def _names(spec: str | None) -> list[str]:
    from gpuws.core.jumps import jump_profile_names

    return jump_profile_names(spec)
