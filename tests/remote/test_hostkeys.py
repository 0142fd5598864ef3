"""known_hosts reading and verdicts, checked against OpenSSH's own ssh-keygen where it can say."""

from __future__ import annotations

import subprocess
from pathlib import Path

import asyncssh
import pytest

from gpuws.core.errors import GpuwsError
from gpuws.core.paths import known_hosts_path
from gpuws.remote.hostkeys import (
    HostKeyChanged,
    HostKeyRevoked,
    HostKeyStatus,
    KnownHosts,
    check_or_raise,
    default_known_hosts_files,
    fingerprint,
    host_field_matches,
    host_token,
    parse_public_key,
)
from tests.remote.helpers import ssh_keygen_fingerprint
from tests.support.sshd import keygen


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    return {name: keygen(tmp_path / "keys" / name) for name in ("a", "b")}


def public(path: Path) -> asyncssh.SSHKey:
    return asyncssh.read_public_key(f"{path}.pub")


def line(token: str, key_file: Path, marker: str = "") -> str:
    kind, blob = Path(f"{key_file}.pub").read_text().split()[:2]
    return f"{marker}{token} {kind} {blob}\n"


def test_host_token_uses_brackets_for_non_default_ports() -> None:
    assert host_token("Example.COM", 22) == "example.com"
    assert host_token("10.0.0.1", 2222) == "[10.0.0.1]:2222"


def test_default_files_are_users_openssh_file_then_ours(isolated_home: Path) -> None:
    assert default_known_hosts_files() == [isolated_home / ".ssh" / "known_hosts", known_hosts_path()]


def test_fingerprint_is_what_ssh_keygen_prints(keys: dict[str, Path]) -> None:
    assert fingerprint(public(keys["a"])) == ssh_keygen_fingerprint(Path(f"{keys['a']}.pub"))


@pytest.mark.parametrize(
    ("field", "token", "expected"),
    [
        ("gpu1,10.0.0.1", "gpu1", True),
        ("*.example.com", "a.example.com", True),
        ("*.example.com,!bad.example.com", "bad.example.com", False),
        ("gpu?", "gpu7", True),
        ("[10.0.0.1]:2222", "[10.0.0.1]:2222", True),
        ("[10.0.0.1]:2222", "10.0.0.1", False),  # a port-22 lookup must not take another port's key
        ("10.0.0.1", "[10.0.0.1]:2222", False),
        ("GPU1", "gpu1", True),
    ],
)
def test_host_patterns(field: str, token: str, expected: bool) -> None:
    assert host_field_matches(field, token) is expected


def test_hashed_entries_written_by_ssh_keygen_match(tmp_path: Path, keys: dict[str, Path]) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(line("[gpu.example.com]:2200", keys["a"]) + line("other", keys["b"]))
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    assert "gpu.example.com" not in path.read_text()  # really hashed now
    known = KnownHosts([path])
    assert known.check("gpu.example.com", 2200, public(keys["a"])).status is HostKeyStatus.TRUSTED
    assert known.check("gpu.example.com", 22, public(keys["a"])).status is HostKeyStatus.UNKNOWN
    assert known.check("other", 22, public(keys["b"])).status is HostKeyStatus.TRUSTED


def test_changed_key_names_both_fingerprints_and_the_line(tmp_path: Path, keys: dict[str, Path]) -> None:
    path = tmp_path / "known_hosts"
    path.write_text("# comment\n\ngarbage line\n" + line("gpu1", keys["a"]))
    known = KnownHosts([path])
    with pytest.raises(HostKeyChanged) as info:
        check_or_raise(known, "gpu1", 22, public(keys["b"]))
    message = str(info.value)
    assert fingerprint(public(keys["a"])) in message
    assert fingerprint(public(keys["b"])) in message
    assert f"{path}:4" in message and "gpu1" in message
    assert "\n" not in message


def test_in_memory_trusted_key_wins_and_unknown_is_reported(tmp_path: Path, keys: dict[str, Path]) -> None:
    known = KnownHosts([tmp_path / "missing"])
    key = public(keys["a"])
    assert check_or_raise(known, "demo", 2222, key, [key]).status is HostKeyStatus.TRUSTED
    assert check_or_raise(known, "demo", 2222, key).status is HostKeyStatus.UNKNOWN


def test_revoked_key_is_refused_even_when_also_listed(tmp_path: Path, keys: dict[str, Path]) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(line("gpu1", keys["a"]) + line("*", keys["a"], marker="@revoked "))
    with pytest.raises(HostKeyRevoked, match="revoked"):
        check_or_raise(KnownHosts([path]), "gpu1", 22, public(keys["a"]))


def test_revoked_in_one_file_wins_over_trusted_in_another_whatever_the_order(tmp_path: Path,
                                                                           keys: dict[str, Path]) -> None:
    """A second, independent test of "revoked before trusted" (issue 36): the @revoked line first,
    in the user's own file, the trusting line after it in gpuws's file; `check` itself (not the
    raising wrapper), and another key of the host still trusted."""
    users, ours = tmp_path / "user_known_hosts", tmp_path / "gpuws_known_hosts"
    users.write_text(line("[gpu2]:2222", keys["b"], marker="@revoked "))
    ours.write_text(line("[gpu2]:2222", keys["a"]) + line("[gpu2]:2222", keys["b"]))
    for files in ([users, ours], [ours, users]):
        known = KnownHosts(files)
        result = known.check("gpu2", 2222, public(keys["b"]))
        assert result.status is HostKeyStatus.REVOKED
        assert result.entry is not None and result.entry.location == f"{users}:1"
        assert known.check("gpu2", 2222, public(keys["a"])).status is HostKeyStatus.TRUSTED
        assert known.check("gpu2", 22, public(keys["b"])).status is HostKeyStatus.UNKNOWN  # port 22: none of them


def test_cert_authority_lines_do_not_trust_a_plain_key(tmp_path: Path, keys: dict[str, Path]) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(line("*", keys["a"], marker="@cert-authority "))
    assert KnownHosts([path]).check("gpu1", 22, public(keys["a"])).status is HostKeyStatus.UNKNOWN


def test_recorded_key_is_found_by_openssh(tmp_path: Path, keys: dict[str, Path]) -> None:
    path = tmp_path / "config" / "known_hosts"
    known = KnownHosts([path])
    known.record("127.0.0.1", 2222, public(keys["a"]))
    found = subprocess.run(["ssh-keygen", "-F", "[127.0.0.1]:2222", "-f", str(path)],
                           capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert Path(f"{keys['a']}.pub").read_text().split()[1] in found.stdout
    assert known.check("127.0.0.1", 2222, public(keys["a"])).status is HostKeyStatus.TRUSTED
    assert path.stat().st_mode & 0o077 == 0


def test_preferred_algorithms_put_known_types_first(tmp_path: Path) -> None:
    rsa = keygen(tmp_path / "rsa", "rsa")
    path = tmp_path / "known_hosts"
    path.write_text(line("gpu1", rsa))
    assert KnownHosts([path]).preferred_algorithms("gpu1", 22)[0].startswith("rsa-sha2")
    assert KnownHosts([path]).preferred_algorithms("gpu2", 22) == []


def test_parse_public_key_takes_a_known_hosts_line_or_a_pub_file(keys: dict[str, Path]) -> None:
    text = Path(f"{keys['a']}.pub").read_text()
    assert parse_public_key(text) == public(keys["a"])
    assert parse_public_key("[127.0.0.1]:22 " + text) == public(keys["a"])
    with pytest.raises(GpuwsError):
        parse_public_key("$(reboot) nonsense")
