"""Local files gpuws reads (profiles, ssh_config and Includes, known_hosts) must be regular files
under a size cap; anything else is refused with a message and never read (issue 13)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuws.core.files import LocalFileRefused, read_regular_file
from gpuws.core.models import HostProfile
from gpuws.core.profiles import ProfileStore
from gpuws.core.recordfile import ReadOnlyFile
from gpuws.core.sshconfig import import_ssh_config
from gpuws.remote.hostkeys import KnownHosts


def test_regular_file_under_the_cap_is_read(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert read_regular_file(path, 3) == b"abc"
    with pytest.raises(LocalFileRefused, match="more than the 2 allowed"):
        read_regular_file(path, 2)
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "missing", 10)


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "directory"])
def test_special_files_are_refused_without_reading(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "special"
    if kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)  # opening must not wait for a writer
    else:
        path.mkdir()
    with pytest.raises(LocalFileRefused):
        read_regular_file(path, 1024)


def test_deeply_nested_profiles_file_is_read_only_not_a_traceback() -> None:
    store = ProfileStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    content = b"schema_version = 1\nx = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"
    store.path.write_bytes(content)
    assert store.load() == []
    problem = store.state.read_only
    assert problem is not None and "nested more than 64 levels deep" in problem.message and problem.line == 2
    assert store.path.read_bytes() == content  # left for the user to fix
    with pytest.raises(ReadOnlyFile):
        store.add(HostProfile(name="fresh", host="h.example"))
    assert store.repair() is not None
    store.add(HostProfile(name="fresh", host="h.example"))
    assert [p.name for p in ProfileStore().load()] == ["fresh"]


@pytest.mark.timeout(20)
def test_profiles_symlinked_to_dev_zero_is_refused_unread() -> None:
    store = ProfileStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.symlink_to("/dev/zero")
    assert store.load() == []
    problem = store.state.read_only
    assert problem is not None and "not a regular file" in problem.message
    assert store.path.is_symlink()  # left as it is
    with pytest.raises(ReadOnlyFile):
        store.add(HostProfile(name="fresh", host="h.example"))


def test_oversized_profiles_file_is_refused() -> None:
    store = ProfileStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_bytes(b"# " + b"x" * (9 * 1024 * 1024) + b"\nschema_version = 1\n")
    assert store.load() == []
    assert store.state.read_only is not None and "allowed" in store.state.read_only.message


@pytest.mark.timeout(20)
def test_ssh_config_and_includes_that_are_not_regular_files_are_reported(isolated_home: Path) -> None:
    ssh_dir = isolated_home / ".ssh"
    (ssh_dir / "zero").symlink_to("/dev/zero")
    (ssh_dir / "config").write_text("Include zero\nHost gpu\n  HostName gpu.example\n")
    result = import_ssh_config()
    assert [p.name for p in result.profiles] == ["gpu"]
    assert any("not a regular file" in reason for _, reason in result.skipped)
    with pytest.raises(Exception, match="not a regular file"):
        import_ssh_config(ssh_dir / "zero")


@pytest.mark.timeout(20)
def test_known_hosts_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.symlink_to("/dev/zero")
    with pytest.raises(LocalFileRefused, match="not a regular file"):
        KnownHosts([path]).entries_for("gpu1", 22)
