"""ssh_config import under hostile sizes and relative identity files (issue 36).

- Import is linear: each alias is resolved from the Host lines that can concern it, counted here
  as operations (the 10,000-host figure is in `benchmarks/bench_sshconfig.py`, not a timed test).
- A 5,000-hop ProxyJump chain is refused past MAX_JUMP_HOPS, without recursion.
- A relative IdentityFile is opened as OpenSSH opens it: against the working directory (checked
  here with the real `ssh -v` from two directories against a loopback listener).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuws.core import sshconfig
from gpuws.core.errors import ValidationError
from gpuws.core.jumps import MAX_JUMP_HOPS, JumpChainError, jump_hops
from gpuws.core.models import HostProfile
from gpuws.core.sshconfig import import_ssh_config
from gpuws.core.validation import validate_profile


@pytest.fixture
def ssh_dir(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(isolated_home))
    path = isolated_home / ".ssh"
    path.mkdir(exist_ok=True)
    return path


def _plain_hosts(count: int) -> str:
    return "".join(f"Host h{i}\n  HostName 10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}\n" for i in range(count))


def test_each_alias_is_resolved_from_its_own_host_lines_only(ssh_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: every alias walked every Host line (3,000 aliases: 9 million evaluations)."""
    aliases = 3000
    config = ssh_dir / "config"
    config.write_text(_plain_hosts(aliases) + "Host *\n  User everyone\n")
    evaluated = 0
    original = sshconfig._Resolver._host

    def counting(self: sshconfig._Resolver, patterns: list[str], never_match: bool) -> bool:
        nonlocal evaluated
        evaluated += 1
        return original(self, patterns, never_match)

    monkeypatch.setattr(sshconfig._Resolver, "_host", counting)
    result = import_ssh_config(config)
    assert len(result.profiles) == aliases
    assert {p.user for p in result.profiles} == {"everyone"}
    assert evaluated == 2 * aliases  # its own Host line and `Host *`


def _chain(hops: int) -> str:
    lines = ["Host j0\n  HostName 10.0.0.1\n"]
    lines += [f"Host j{i}\n  HostName 10.1.{i // 256 % 256}.{i % 256}\n  ProxyJump j{i - 1}\n" for i in range(1, hops)]
    return "".join(lines)


def test_a_5000_hop_proxyjump_chain_is_refused_past_the_limit_without_recursion(ssh_dir: Path) -> None:
    """Before: 1,600 hops ended in RecursionError; now the chain is walked with a stack, the hosts
    gpuws can reach are imported and the rest are skipped with the reason."""
    config = ssh_dir / "config"
    config.write_text(_chain(5000))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)  # far below 5,000: any recursion per hop fails
    try:
        result = import_ssh_config(config)
    finally:
        sys.setrecursionlimit(limit)
    assert [p.name for p in result.profiles] == [f"j{i}" for i in range(MAX_JUMP_HOPS + 1)]
    reasons = dict(result.skipped)
    assert f"at most {MAX_JUMP_HOPS}" in reasons[f"j{MAX_JUMP_HOPS + 1}"]
    assert reasons["j4999"] == "its jump host 'j4998' was skipped"
    assert len(result.skipped) == 5000 - MAX_JUMP_HOPS - 1


def test_a_profile_behind_5000_jump_profiles_is_refused_without_recursion() -> None:
    """A hand-edited file can hold such a chain: validating it (every load) and connecting through
    it were nested calls per hop (RecursionError); now the walk is a loop that stops past the
    MAX_JUMP_HOPS a connection follows, and says so."""
    known = {f"p{i}": HostProfile(name=f"p{i}", host="10.0.0.1", jump=f"p{i - 1}" if i else None) for i in range(5000)}
    target = HostProfile(name="target", host="10.0.0.2", jump="p4999")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)
    try:
        with pytest.raises(ValidationError, match=f"nests more than {MAX_JUMP_HOPS} jump hosts"):
            validate_profile(target, known, check_files=False)
        with pytest.raises(JumpChainError, match=f"longer than {MAX_JUMP_HOPS} hosts"):
            jump_hops(target, known.__getitem__)
    finally:
        sys.setrecursionlimit(limit)
    near = {f"p{i}": known[f"p{i}"] for i in range(MAX_JUMP_HOPS)}
    assert validate_profile(HostProfile(name="t", host="10.0.0.2", jump=f"p{MAX_JUMP_HOPS - 1}"), near,
                            check_files=False).jump == f"p{MAX_JUMP_HOPS - 1}"


def test_a_cycle_among_many_profiles_is_still_refused_by_name() -> None:
    known = {f"p{i}": HostProfile(name=f"p{i}", host="10.0.0.1", jump=f"p{(i + 1) % 5}") for i in range(5)}
    with pytest.raises(ValidationError, match="cycle: target -> p0 -> p1 -> p2 -> p3 -> p4 -> p0"):
        validate_profile(HostProfile(name="target", host="10.0.0.2", jump="p0"), known, check_files=False)


# -- relative IdentityFile, as OpenSSH opens it ----------------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback TCP port that accepts and closes: ssh loads its identity files once connected."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    server.close()


def _ssh_loads(config: Path, cwd: Path, home: Path) -> list[str]:
    ssh = shutil.which("ssh")
    if ssh is None:
        pytest.fail("needs the OpenSSH client (scripts/install-deps.sh installs it)")
    err = subprocess.run([ssh, "-v", "-F", str(config), "-o", "BatchMode=yes", "k", "true"], cwd=cwd,
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30,
                         env={"HOME": str(home), "PATH": "/usr/bin:/bin"}).stderr
    return [line.split("debug1: ", 1)[1] for line in err.splitlines() if "identity file rel/key " in line]


def test_a_relative_identity_file_resolves_against_the_working_directory_as_ssh_does(
    ssh_dir: Path, isolated_home: Path, tmp_path: Path, listener: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: placed under ~/.ssh (a path that does not exist) with no note."""
    with_key, without = tmp_path / "with-key", tmp_path / "without"
    (with_key / "rel").mkdir(parents=True)
    without.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(with_key / "rel" / "key")], check=True)
    config = ssh_dir / "config"
    config.write_text(f"Host k\n  HostName 127.0.0.1\n  Port {listener}\n  IdentityFile rel/key\n")
    config.chmod(0o600)
    # OpenSSH itself: the key is found from one directory (type 3, ed25519), not from the other.
    assert _ssh_loads(config, with_key, isolated_home) == ["identity file rel/key type 3"]
    assert _ssh_loads(config, without, isolated_home) == ["identity file rel/key type -1"]

    monkeypatch.chdir(with_key)
    found = import_ssh_config(config)
    (profile,) = found.profiles
    assert profile.key_path == str(with_key / "rel" / "key")
    assert [note for _, note in found.notes] == []

    monkeypatch.chdir(without)
    missing = import_ssh_config(config)
    (profile,) = missing.profiles
    assert profile.key_path is None and profile.identity_files == [str(without / "rel" / "key")]
    (note,) = [note for host, note in missing.notes if host == "k"]
    assert str(without / "rel" / "key") in note and "not found" in note and "kept" in note


def test_the_cli_import_shows_the_note_of_a_missing_identity_file(
    ssh_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from gpuws.cli.main import main

    config = ssh_dir / "config"
    config.write_text("Host k\n  HostName 10.0.0.9\n  IdentityFile rel/key\n")
    monkeypatch.chdir(tmp_path)
    assert main(["hosts", "import-ssh-config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"Note for k: IdentityFile not found: {tmp_path / 'rel' / 'key'}; kept in the profile" in out
    assert main(["hosts", "show", "k", "--json"]) == 0
    assert str(tmp_path / "rel" / "key") in capsys.readouterr().out


def test_a_hostile_wildcard_pattern_cannot_stall_the_import(ssh_dir: Path) -> None:
    """`Host *a*a*a...c` against a long alias: as a regex it backtracks for hours (found while fixing
    issue 36); the wildcard matcher is bounded by pattern x alias length."""
    alias = "a" * 64  # the longest profile name
    config = ssh_dir / "config"
    config.write_text(f"Host {alias}\n  HostName 10.0.0.1\nHost {'*a' * 40}c\n  User never\n")
    (profile,) = import_ssh_config(config).profiles
    assert profile.name == alias and profile.user is None
