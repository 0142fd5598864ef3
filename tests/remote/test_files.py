"""SFTP copies through a real OpenSSH sshd: large files both ways byte for byte, folders of many small
files, cancel and kill mid-way then resume, a full disk on either side, hostile names, listings.

The sshd host is this machine, so "on the host" is a folder of the test's own."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuws.core.transfer import TransferProgress
from gpuws.remote import stream_copy
from gpuws.remote.connection import HostConnection
from gpuws.remote.files import TransferError, copy_paths, download, list_dir, upload
from tests.remote.helpers import key_profile, trust
from tests.support.sshd import REPO_ROOT, SshdServer

pytestmark = pytest.mark.sshd

SIZE = 3 * 1024 * 1024 + 12345  # several chunks, not a multiple of the chunk size
CHUNK = 64 * 1024


@pytest.fixture
def payload(tmp_path: Path) -> Path:
    path = tmp_path / "local" / "weights.bin"
    path.parent.mkdir()
    path.write_bytes(os.urandom(SIZE))
    return path


class Route:
    """Which way a file's bytes go in a test: "sftp" only, or "stream" (the exec-channel stream of
    gpuws.remote.stream_copy for any size); `streamed` lists the host paths a stream copied whole,
    `failed` the errors streams ended with."""

    def __init__(self, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.name = name
        self.streamed: list[str] = []
        self.failed: list[BaseException] = []
        monkeypatch.setattr(stream_copy, "STREAM_MIN", 0 if name == "stream" else 1 << 62)
        for verb, host_arg in (("get", 0), ("put", 1)):
            real = getattr(stream_copy.Streamer, verb)

            async def spy(streamer: stream_copy.Streamer, *args: object, _real: object = real,
                          _at: int = host_arg) -> None:
                try:
                    await _real(streamer, *args)  # type: ignore[operator]
                except BaseException as exc:
                    self.failed.append(exc)
                    raise
                self.streamed.append(str(args[_at]))

            monkeypatch.setattr(stream_copy.Streamer, verb, spy)


@pytest.fixture(params=["sftp", "stream"])
def route(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Route:
    return Route(request.param, monkeypatch)


async def cancel_after(coro_factory: object, limit: int) -> None:
    """Run a transfer and cancel it from its progress callback once `limit` bytes are done."""
    seen: list[int] = []

    def progress(event: TransferProgress) -> None:
        seen.append(event.done)
        if event.done >= limit:
            task.cancel()

    task = asyncio.ensure_future(coro_factory(progress))  # type: ignore[operator]
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen[-1] >= limit


async def test_upload_cancel_then_resume_is_byte_identical(
    sshd: SshdServer, isolated_home: Path, payload: Path, tmp_path: Path, route: Route
) -> None:
    trust(sshd, isolated_home)
    remote_dir = tmp_path / "remote"
    remote_dir.mkdir()
    target = remote_dir / "weights.bin"
    async with HostConnection(key_profile(sshd)) as conn:
        await cancel_after(lambda p: upload(conn, payload, str(remote_dir) + "/", progress=p, chunk_size=CHUNK,
                                            max_requests=4), SIZE // 3)
        partial = target.stat().st_size
        assert 0 < partial < SIZE
        assert target.read_bytes() == payload.read_bytes()[:partial]  # a prefix, ready to resume

        reports: list[TransferProgress] = []
        result = await upload(conn, payload, str(remote_dir), progress=reports.append, chunk_size=CHUNK)
    assert result.resumed_from == partial and result.size == SIZE
    assert result.destination == str(target)
    assert (reports[0].done, reports[0].total) == (partial, SIZE) and reports[-1].done == SIZE
    assert [r.done for r in reports] == sorted(r.done for r in reports)
    assert {(r.file_index, r.file_count) for r in reports} == {(1, 1)}
    assert target.read_bytes() == payload.read_bytes()
    assert route.streamed == ([str(target)] if route.name == "stream" else [])


async def test_download_cancel_then_resume_is_byte_identical(
    sshd: SshdServer, isolated_home: Path, payload: Path, tmp_path: Path, route: Route
) -> None:
    trust(sshd, isolated_home)
    local = tmp_path / "downloads" / "copy.bin"
    async with HostConnection(key_profile(sshd)) as conn:
        await cancel_after(lambda p: download(conn, str(payload), local, progress=p, chunk_size=CHUNK), SIZE // 2)
        partial = local.stat().st_size
        assert 0 < partial < SIZE
        assert local.read_bytes() == payload.read_bytes()[:partial]
        result = await download(conn, str(payload), local, chunk_size=CHUNK)
        assert result.resumed_from == partial
        assert local.read_bytes() == payload.read_bytes()

        # A destination larger than the source is no prefix: it is rewritten, not "resumed".
        local.write_bytes(b"x" * (SIZE + 10))
        again = await download(conn, str(payload), local)
        assert again.resumed_from == 0
        assert local.read_bytes() == payload.read_bytes()
        # Same size, other time (not a copy this made): copied again, not taken as done.
        local.write_bytes(b"y" * SIZE)
        os.utime(local, (payload.stat().st_mtime - 100, payload.stat().st_mtime - 100))
        again = await download(conn, str(payload), local)
        assert again.transferred == SIZE and local.read_bytes() == payload.read_bytes()
        # The copy carries the source's time: the next copy finds it identical and sends nothing.
        again = await download(conn, str(payload), local)
        assert again.skipped == 1 and again.transferred == 0
    assert route.streamed == ([str(payload)] * 3 if route.name == "stream" else [])  # the 3 copies that ran


async def test_large_files_both_ways_are_byte_identical(
    sshd: SshdServer, isolated_home: Path, tmp_path: Path
) -> None:
    """Many large requests in flight (the fast path), checked byte for byte."""
    trust(sshd, isolated_home)
    size = 40 * 1024 * 1024 + 777
    source = tmp_path / "big.bin"
    with source.open("wb") as f:
        for i in range(41):
            f.write(os.urandom(1024 * 1024 if i < 40 else 777))
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    async with HostConnection(key_profile(sshd)) as conn:
        up = await upload(conn, source, str(host_dir))
        down = await download(conn, str(host_dir / "big.bin"), tmp_path / "back.bin")
    assert up.size == down.size == size
    assert hashlib.sha256((host_dir / "big.bin").read_bytes()).hexdigest() == digest
    assert hashlib.sha256((tmp_path / "back.bin").read_bytes()).hexdigest() == digest


def _tree(root: Path) -> None:
    """A folder of many small files, nested, with modes, an empty file, an empty folder, links."""
    for d in range(6):
        sub = root / f"dir{d}" / "nested"
        sub.mkdir(parents=True)
        for f in range(40):
            (sub / f"f{f}.txt").write_bytes(os.urandom(f * 37))
    (root / "empty").mkdir()
    (root / "zero.bin").write_bytes(b"")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o750)
    (root / "secret.txt").write_text("s")
    (root / "secret.txt").chmod(0o600)
    (root / "name\nwith newline.txt").write_text("newline")
    (root / "link-in").symlink_to("dir0/nested/f1.txt")
    (root / "link-out").symlink_to("../../../../etc/passwd")  # copied as a link, never followed
    os.utime(root / "run.sh", (1_600_000_000, 1_600_000_000))


def _listing(root: Path) -> dict[str, tuple[str, object]]:
    out: dict[str, tuple[str, object]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir", None)
            else:
                out[rel] = ("file", path.read_bytes())
    return out


@pytest.mark.parametrize("to_host", [True, False], ids=["upload", "download"])
async def test_a_folder_of_many_small_files_with_modes_times_and_links(
    sshd: SshdServer, isolated_home: Path, tmp_path: Path, to_host: bool
) -> None:
    trust(sshd, isolated_home)
    source = tmp_path / "src" / "project"
    _tree(source)
    dest_root = tmp_path / "dest"
    dest_root.mkdir()
    events: list[TransferProgress] = []
    async with HostConnection(key_profile(sshd)) as conn:
        result = await copy_paths(conn, [str(source)], str(dest_root), to_host=to_host, recursive=True,
                                  preserve=True, progress=events.append)
        copied = dest_root / "project"
        assert result.failed == () and result.destination == str(copied)
        assert _listing(copied) == _listing(source)
        assert result.files == 6 * 40 + 4 and result.links == 2
        assert os.readlink(copied / "link-out") == "../../../../etc/passwd"
        assert stat.S_IMODE((copied / "run.sh").stat().st_mode) == 0o750
        assert stat.S_IMODE((copied / "secret.txt").stat().st_mode) == 0o600
        assert int((copied / "run.sh").stat().st_mtime) == 1_600_000_000
        assert events[-1].done == events[-1].total == result.size
        assert max(e.file_index for e in events) == events[-1].file_count == result.transferred_files

        # Again: everything is already there (size and time), nothing is sent.
        again = await copy_paths(conn, [str(source)], str(dest_root), to_host=to_host, recursive=True)
        assert again.skipped == again.files and again.transferred == 0
        # Same size and time but other bytes: only --checksum sees it.
        victim = copied / "dir3" / "nested" / "f9.txt"
        before = victim.stat()
        victim.write_bytes(bytes(b ^ 0xFF for b in victim.read_bytes()))
        os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))
        plain = await copy_paths(conn, [str(source)], str(dest_root), to_host=to_host, recursive=True)
        assert plain.transferred == 0
        checked = await copy_paths(conn, [str(source)], str(dest_root), to_host=to_host, recursive=True,
                                   checksum=True)
        assert checked.transferred_files == 1 and checked.transferred == victim.stat().st_size
        assert victim.read_bytes() == (source / "dir3" / "nested" / "f9.txt").read_bytes()


async def test_several_sources_and_a_host_glob(sshd: SshdServer, isolated_home: Path, tmp_path: Path) -> None:
    trust(sshd, isolated_home)
    host = tmp_path / "host"
    host.mkdir()
    for name in ("a.ckpt", "b.ckpt", "c.log"):
        (host / name).write_text(name)
    here = tmp_path / "here"
    async with HostConnection(key_profile(sshd)) as conn:
        with pytest.raises(TransferError, match="existing folder"):
            await copy_paths(conn, [str(host / "a.ckpt"), str(host / "c.log")], str(tmp_path / "nope"),
                             to_host=False)
        result = await copy_paths(conn, [str(host / "*.ckpt")], str(here) + "/", to_host=False)
        assert sorted(p.name for p in here.iterdir()) == ["a.ckpt", "b.ckpt"] and result.files == 2
        with pytest.raises(TransferError, match="is a directory"):
            await copy_paths(conn, [str(host)], str(here), to_host=False)


def _write_tree_sizes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_a_folder_copy_killed_half_way_resumes_where_it_stopped(
    sshd: SshdServer, isolated_home: Path, tmp_path: Path
) -> None:
    """`gpuws cp -r` killed with SIGKILL part-way; the next run keeps every finished file and the
    partial one's prefix, sends the rest, and the tree ends identical."""
    from tests.cli.test_session_cli import save

    trust(sshd, isolated_home)
    save(sshd)
    source = tmp_path / "host" / "data"
    source.mkdir(parents=True)
    for i in range(16):
        (source / f"shard{i:02d}.bin").write_bytes(os.urandom(6 * 1024 * 1024))
    total = 16 * 6 * 1024 * 1024
    dest = tmp_path / "here"
    dest.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "gpuws", "cp", "-r", f"rig:{source}", str(dest)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    copied = dest / "data"
    try:
        while proc.poll() is None and (not copied.exists() or _write_tree_sizes(copied) < 2 * 6 * 1024 * 1024):
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL, "the copy ended before it could be killed"
    kept = _write_tree_sizes(copied)
    assert 0 < kept < total
    expected_sent = total
    for path in copied.iterdir():  # every file there, complete or not, is a prefix of its source
        src = source / path.name
        assert src.read_bytes()[: path.stat().st_size] == path.read_bytes()
        if path.stat().st_size < src.stat().st_size:
            expected_sent -= path.stat().st_size  # resumed from its end
        elif int(path.stat().st_mtime) == int(src.stat().st_mtime):
            expected_sent -= path.stat().st_size  # finished: skipped
        # (complete but killed before its time was set: sent again, nothing says it is the same)

    async def again() -> object:
        async with HostConnection(key_profile(sshd)) as conn:
            return await copy_paths(conn, [str(source)], str(dest), to_host=False, recursive=True)

    result = asyncio.run(again())
    assert result.transferred == expected_sent < total  # type: ignore[attr-defined]
    assert result.skipped + result.transferred_files == 16  # type: ignore[attr-defined]
    assert _listing(copied) == _listing(source)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB file system (tmpfs), so a write runs out of space (ENOSPC) as on a full disk.

    Mounting needs root (the test machine runs as root); without it the test is skipped with the reason.
    """
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a size-limited tmpfs needs root to mount")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0777", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("to_host", [True, False], ids=["host-disk-full", "local-disk-full"])
async def test_a_full_disk_is_a_clear_error_and_the_partial_file_resumes(
    sshd: SshdServer, isolated_home: Path, tmp_path: Path, small_disk: Path, to_host: bool, route: Route
) -> None:
    trust(sshd, isolated_home)
    data = os.urandom(3 * 1024 * 1024)
    source = tmp_path / "checkpoint.bin"
    source.write_bytes(data)
    blocker = small_disk / "blocker"
    blocker.write_bytes(b"\0" * (2 * 1024 * 1024))  # leaves about 2 MiB: the copy stops part-way
    target = small_disk / "checkpoint.bin"
    async with HostConnection(key_profile(sshd)) as conn:
        def run() -> object:
            if to_host:
                return upload(conn, source, str(small_disk))
            return download(conn, str(source), target)

        with pytest.raises(TransferError) as failure:
            await run()  # type: ignore[misc]
        message = str(failure.value)
        where = "on the host" if to_host else "on this computer"
        assert f"no space left {where}" in message and "kept" in message and "\n" not in message
        partial = target.stat().st_size
        assert 0 < partial < len(data) and target.read_bytes() == data[:partial]
        blocker.unlink()
        result = await run()  # type: ignore[misc]
    assert result.resumed_from == partial  # type: ignore[attr-defined]
    assert target.read_bytes() == data
    assert len(route.streamed) == (1 if route.name == "stream" else 0)  # the resumed copy
    if route.name == "stream":  # the full disk was met by the stream itself, not by SFTP after it
        assert len(route.failed) == 1
        assert isinstance(route.failed[0], stream_copy.StreamFailed if to_host else OSError)


async def test_hostile_names_links_and_long_paths(sshd: SshdServer, isolated_home: Path, tmp_path: Path) -> None:
    """A name that cannot be written on the receiving side is named in `failed` and the rest is copied;
    a link in the destination is never written through; a name with a newline round-trips."""
    trust(sshd, isolated_home)
    source = tmp_path / "s"
    (source / "deep").mkdir(parents=True)
    (source / "ok.txt").write_text("fine")
    (source / "two\nlines.txt").write_text("nl")
    long_rel = source / "deep" / ("d" * 200) / ("e" * 200)
    long_rel.mkdir(parents=True)
    (long_rel / "far.txt").write_text("too far")
    # A destination whose own path is near PATH_MAX: the deep file's path there passes 4,096 bytes.
    base = tmp_path / "long"
    part = "p" * 250
    dest = base
    while len(str(dest)) < 4096 - 300:
        dest = dest / part
    dest.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    for to_host in (True, False):
        target = dest / ("up" if to_host else "down")
        target.mkdir()
        (target / "s").mkdir()
        (target / "s" / "deep").symlink_to(outside)  # planted: the copy must not write through it
        async with HostConnection(key_profile(sshd)) as conn:
            result = await copy_paths(conn, [str(source)], str(target), to_host=to_host, recursive=True)
        assert (target / "s" / "ok.txt").read_text() == "fine"
        assert (target / "s" / "two\nlines.txt").read_text() == "nl"
        assert list(outside.iterdir()) == []
        assert [p for p, _ in result.failed] == [str(target / "s" / "deep")]
        assert "in the way" in result.failed[0][1]
        (target / "s" / "deep").unlink()
        async with HostConnection(key_profile(sshd)) as conn:
            result = await copy_paths(conn, [str(source)], str(target), to_host=to_host, recursive=True)
        assert len(result.failed) == 1 and result.failed[0][0].startswith(str(target / "s" / "deep" / "d"))
        why = result.failed[0][1]
        assert ("4,096" in why) if to_host else ("too long" in why)
        assert (target / "s" / "ok.txt").read_text() == "fine"  # what was copied stays


async def test_errors_and_listing(sshd: SshdServer, isolated_home: Path, payload: Path, tmp_path: Path) -> None:
    trust(sshd, isolated_home)
    (tmp_path / "remote" / "sub").mkdir(parents=True)
    (tmp_path / "remote" / "b.txt").write_text("bee")
    async with HostConnection(key_profile(sshd)) as conn:
        with pytest.raises(TransferError, match="no such file or directory on the host"):
            await download(conn, str(tmp_path / "nope.bin"), tmp_path / "x")
        with pytest.raises(TransferError, match="no such file here"):
            await upload(conn, tmp_path / "missing.bin", "/tmp/")
        with pytest.raises(TransferError, match="is a directory"):
            await download(conn, str(tmp_path / "remote"), tmp_path / "x")
        path, entries = await list_dir(conn, str(tmp_path / "remote"))
    assert path == str(tmp_path / "remote")
    assert [(e.name, e.is_dir, e.size) for e in entries][:1] == [("sub", True, entries[0].size)]
    assert [(e.name, e.is_dir, e.size) for e in entries][1:] == [("b.txt", False, 3)]
