"""Host key checks as OpenSSH does them, around asyncssh.

We read `~/.ssh/known_hosts` and gpuws' own known_hosts (`gpuws.core.paths.known_hosts_path()`):
plain and hashed (`|1|salt|hash`) host fields, `[host]:port` for ports other than 22, wildcard
patterns with negation, `@revoked` lines, and `@cert-authority` lines (a host certificate signed
by a CA listed for the host is trusted; asyncssh then checks the certificate's principals and
validity, as OpenSSH does). The verdict is ours rather than asyncssh's so that a refusal can say
exactly what is wrong: an unknown key shows its SHA256 fingerprint, a changed key names the old
and new fingerprints and the file:line to fix. A changed or revoked key is never accepted.

Which key the server shows is chosen as OpenSSH chooses it: the host key algorithms we ask for are
OpenSSH's default order, with the types recorded for the host moved to the front (in that same
order, never in file order). A presented key that matches no recorded key of the host is a
refusal whenever the host has any recorded key: a wrong ed25519 line after a right ecdsa line is
never hidden by negotiating ecdsa.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import asyncssh
from filelock import FileLock

from gpuws.core.errors import GpuwsError
from gpuws.core.files import read_regular_file
from gpuws.core.paths import known_hosts_path

DEFAULT_SSH_PORT = 22
# Larger than any real known_hosts file; a bigger one (or /dev/zero behind a symlink) is refused.
MAX_KNOWN_HOSTS_BYTES = 16 * 1024 * 1024

# OpenSSH 9's default HostKeyAlgorithms, best first (certificates, then plain keys).
OPENSSH_CERT_ALGORITHMS = (
    "ssh-ed25519-cert-v01@openssh.com", "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com", "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "sk-ssh-ed25519-cert-v01@openssh.com", "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "rsa-sha2-512-cert-v01@openssh.com", "rsa-sha2-256-cert-v01@openssh.com",
)
OPENSSH_KEY_ALGORITHMS = (
    "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com", "rsa-sha2-512", "rsa-sha2-256",
)


class UnknownHostKey(GpuwsError):
    """The host offered a key no known_hosts file has for it (and nobody accepted it)."""

    def __init__(self, host: str, port: int, key: asyncssh.SSHKey) -> None:
        self.host, self.port = host, port
        self.key = key
        self.key_type = key_type_label(key)
        self.fingerprint = fingerprint(key)
        super().__init__(
            f"unknown host key for {host_token(host, port)}: {key_type_label(key)} {self.fingerprint}; "
            "verify it with the host's owner, then rerun with --accept-new to trust it"
        )


class HostKeyChanged(GpuwsError):
    """The host offered a different key than the one recorded for it: always refused."""

    def __init__(self, host: str, port: int, key: asyncssh.SSHKey, known: KnownHostEntry) -> None:
        self.host, self.port = host, port
        self.key_type = key_type_label(key)
        self.old_fingerprint = fingerprint(known.key)
        self.new_fingerprint = fingerprint(key)
        self.known = known
        super().__init__(
            f"HOST KEY CHANGED for {host_token(host, port)}: recorded {self.old_fingerprint} "
            f"({known.location}), now offered {self.new_fingerprint}; refusing to connect "
            "(this may be an attack; if the host was really reinstalled, delete line "
            f"{known.line_no} of {known.path})"
        )


class HostKeyRevoked(GpuwsError):
    """The host offered a key marked @revoked in a known_hosts file."""

    def __init__(self, host: str, port: int, key: asyncssh.SSHKey, entry: KnownHostEntry) -> None:
        super().__init__(
            f"host key {fingerprint(key)} of {host_token(host, port)} is revoked ({entry.location}); "
            "refusing to connect"
        )


class HostCertificateInvalid(HostKeyRevoked):
    """A host certificate that cannot be trusted: its CA is not listed for the host, it is not valid
    for this host now (principals, dates), or its key is revoked. Refused like a revoked key (a
    subclass, so every exit-status and state mapping for revoked keys applies)."""

    def __init__(self, message: str) -> None:
        GpuwsError.__init__(self, message)


class HostKeyStatus(StrEnum):
    TRUSTED = "trusted"
    UNKNOWN = "unknown"
    CHANGED = "changed"
    REVOKED = "revoked"


@dataclass(frozen=True)
class KnownHostEntry:
    """One usable line of a known_hosts file."""

    path: Path
    line_no: int
    marker: str | None  # None, "revoked" or "cert-authority"
    hosts: str  # the host field as written: patterns or one |1|salt|hash
    key: asyncssh.SSHKey

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line_no}"

    def matches(self, host: str, port: int) -> bool:
        return host_field_matches(self.hosts, host_token(host, port))


@dataclass(frozen=True)
class HostKeyCheck:
    """The verdict for one offered key, with the entry that decided it (if any)."""

    status: HostKeyStatus
    entry: KnownHostEntry | None = None


def fingerprint(key: asyncssh.SSHKey) -> str:
    """The key's `SHA256:...` fingerprint, as `ssh-keygen -l` prints it."""
    return str(key.get_fingerprint("sha256"))


def key_type_label(key: asyncssh.SSHKey) -> str:
    """A short key type for messages, e.g. ED25519 or RSA."""
    algorithm = key.get_algorithm()
    return algorithm.removeprefix("ssh-").split("-")[0].upper()


def host_token(host: str, port: int) -> str:
    """How known_hosts names a host: `host` on port 22, `[host]:port` elsewhere."""
    host = host.lower()
    return host if port == DEFAULT_SSH_PORT else f"[{host}]:{port}"


def default_known_hosts_files() -> list[Path]:
    """The files we read, in order: the user's OpenSSH file, then gpuws' own."""
    return [Path.home() / ".ssh" / "known_hosts", known_hosts_path()]


def _glob_to_regex(pattern: str) -> re.Pattern[str]:
    # OpenSSH patterns know only `*` and `?`; `[` is literal (it is part of `[host]:port`).
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL)


def _hashed_matches(field: str, token: str) -> bool:
    try:
        _, magic, salt_b64, hash_b64 = field.split("|")
        if magic != "1":
            return False
        salt = base64.b64decode(salt_b64, validate=True)
        expected = base64.b64decode(hash_b64, validate=True)
    except (ValueError, binascii.Error):
        return False
    actual = hmac.new(salt, token.encode(), hashlib.sha1).digest()
    return hmac.compare_digest(actual, expected)


def host_field_matches(field: str, token: str) -> bool:
    """Whether a known_hosts host field matches `token` (OpenSSH semantics, negation wins)."""
    if field.startswith("|"):
        return _hashed_matches(field, token)
    matched = False
    for pattern in field.split(","):
        negated = pattern.startswith("!")
        if _glob_to_regex(pattern.removeprefix("!")).fullmatch(token):
            if negated:
                return False
            matched = True
    return matched


def parse_known_hosts(path: Path) -> list[KnownHostEntry]:
    """The usable lines of one known_hosts file; comments, bad lines and unknown markers are skipped."""
    try:
        data = read_regular_file(path, MAX_KNOWN_HOSTS_BYTES, what="known_hosts file")
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", errors="replace")
    entries: list[KnownHostEntry] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = None
        if fields[0].startswith("@"):
            marker = fields[0][1:]
            fields = fields[1:]
            if marker not in ("revoked", "cert-authority"):
                continue
        if len(fields) < 3:
            continue
        try:
            key = asyncssh.import_public_key(f"{fields[1]} {fields[2]}")
        except (asyncssh.KeyImportError, ValueError):
            continue  # a key type we cannot read cannot match what the server offers either
        entries.append(KnownHostEntry(path, line_no, marker, fields[0], key))
    return entries


class KnownHosts:
    """The known_hosts files gpuws consults, and the one it records new keys in."""

    def __init__(self, files: Sequence[Path] | None = None, record_path: Path | None = None) -> None:
        self.files = list(files) if files is not None else default_known_hosts_files()
        self.record_path = record_path if record_path is not None else self.files[-1]

    def entries_for(self, host: str, port: int) -> list[KnownHostEntry]:
        """Every line, in every file, whose host field matches host:port."""
        return [e for path in self.files for e in parse_known_hosts(path) if e.matches(host, port)]

    def preferred_algorithms(self, host: str, port: int) -> list[str]:
        """Host key algorithms to ask for first, as OpenSSH orders them (never in file order).

        Certificate algorithms come first (all of them when a `@cert-authority` line covers the
        host, else those of the key types recorded for it); then the plain algorithms of the
        recorded types, in OpenSSH's default order.
        """
        entries = self.entries_for(host, port)
        known: set[str] = set()
        for entry in entries:
            if entry.marker is None:
                known.update(alg.decode() for alg in entry.key.sig_algorithms)
        has_ca = any(e.marker == "cert-authority" for e in entries)
        # As OpenSSH's order_hostkeyalgs: every certificate algorithm when a CA line covers the
        # host, else the certificate algorithms of the recorded key types (a certificate whose CA
        # is not trusted is then checked as its plain key), then the recorded plain types.
        algorithms = [cert for cert, plain in zip(OPENSSH_CERT_ALGORITHMS, OPENSSH_KEY_ALGORITHMS, strict=True)
                      if has_ca or plain in known]
        algorithms += [alg for alg in OPENSSH_KEY_ALGORITHMS if alg in known]
        return algorithms

    def check(self, host: str, port: int, key: asyncssh.SSHKey) -> HostKeyCheck:
        """OpenSSH's verdict: revoked, trusted, changed (recorded keys, none this one) or unknown."""
        entries = self.entries_for(host, port)
        for entry in entries:
            if entry.marker == "revoked" and entry.key == key:
                return HostKeyCheck(HostKeyStatus.REVOKED, entry)
        plain = [e for e in entries if e.marker is None]
        for entry in plain:
            if entry.key == key:
                return HostKeyCheck(HostKeyStatus.TRUSTED, entry)
        # Name the recorded key of the same type when there is one, else the first recorded key.
        same_type = [e for e in plain if e.key.get_algorithm() == key.get_algorithm()]
        if same_type or plain:
            return HostKeyCheck(HostKeyStatus.CHANGED, (same_type or plain)[0])
        return HostKeyCheck(HostKeyStatus.UNKNOWN)

    def check_ca(self, host: str, port: int, ca_key: asyncssh.SSHKey) -> HostKeyCheck:
        """Whether `ca_key` may sign host certificates for host:port (revoked CAs never)."""
        entries = self.entries_for(host, port)
        for entry in entries:
            if entry.marker == "revoked" and entry.key == ca_key:
                return HostKeyCheck(HostKeyStatus.REVOKED, entry)
        for entry in entries:
            if entry.marker == "cert-authority" and entry.key == ca_key:
                return HostKeyCheck(HostKeyStatus.TRUSTED, entry)
        return HostKeyCheck(HostKeyStatus.UNKNOWN)

    def revoked_keys(self, host: str, port: int) -> list[KnownHostEntry]:
        """The `@revoked` lines that apply to host:port."""
        return [e for e in self.entries_for(host, port) if e.marker == "revoked"]

    def record(self, host: str, port: int, key: asyncssh.SSHKey) -> Path:
        """Append host:port's key to gpuws' known_hosts in OpenSSH line format."""
        path = self.record_path
        path.parent.mkdir(parents=True, exist_ok=True)
        kind, blob = key.export_public_key("openssh").decode().split()[:2]
        line = f"{host_token(host, port)} {kind} {blob}\n"
        # A lock because two app instances may accept keys at the same moment.
        with FileLock(str(path) + ".lock"):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as handle:
                handle.write(line)
        return path


def parse_public_key(text: str) -> asyncssh.SSHKey:
    """A key from `type base64 [comment]` or a known_hosts line `host type base64`."""
    fields = text.split()
    for start in range(min(2, len(fields))):
        try:
            return asyncssh.import_public_key(" ".join(fields[start : start + 2]))
        except (asyncssh.KeyImportError, ValueError):
            continue
    raise GpuwsError("not an OpenSSH public key or known_hosts line")


def check_or_raise(
    known: KnownHosts, host: str, port: int, key: asyncssh.SSHKey, trusted: Iterable[asyncssh.SSHKey] = ()
) -> HostKeyCheck:
    """Check a key and raise for revoked or changed keys; trusted in-memory keys pass."""
    if any(key == t for t in trusted):
        return HostKeyCheck(HostKeyStatus.TRUSTED)
    result = known.check(host, port, key)
    if result.status is HostKeyStatus.REVOKED:
        assert result.entry is not None
        raise HostKeyRevoked(host, port, key, result.entry)
    if result.status is HostKeyStatus.CHANGED:
        assert result.entry is not None
        raise HostKeyChanged(host, port, key, result.entry)
    return result
