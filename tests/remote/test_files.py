"""SFTP transfers through a real OpenSSH sshd: progress, cancel mid-way, resume, listings."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from gpuws.remote.connection import HostConnection
from gpuws.remote.files import TransferError, download, list_dir, upload
from tests.remote.helpers import key_profile, trust
from tests.support.sshd import SshdServer

pytestmark = pytest.mark.sshd

SIZE = 3 * 1024 * 1024 + 12345  # several chunks, not a multiple of the chunk size
CHUNK = 64 * 1024


@pytest.fixture
def payload(tmp_path: Path) -> Path:
    path = tmp_path / "local" / "weights.bin"
    path.parent.mkdir()
    path.write_bytes(os.urandom(SIZE))
    return path


async def cancel_after(coro_factory: object, limit: int) -> None:
    """Run a transfer and cancel it from its progress callback once `limit` bytes are done."""
    seen: list[int] = []

    def progress(done: int, _total: int) -> None:
        seen.append(done)
        if done >= limit:
            task.cancel()

    task = asyncio.ensure_future(coro_factory(progress))  # type: ignore[operator]
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen[-1] >= limit


async def test_upload_cancel_then_resume_is_byte_identical(
    sshd: SshdServer, isolated_home: Path, payload: Path, tmp_path: Path
) -> None:
    trust(sshd, isolated_home)
    remote_dir = tmp_path / "remote"
    remote_dir.mkdir()
    target = remote_dir / "weights.bin"
    async with HostConnection(key_profile(sshd)) as conn:
        await cancel_after(
            lambda p: upload(conn, payload, str(remote_dir) + "/", progress=p, chunk_size=CHUNK), SIZE // 3
        )
        partial = target.stat().st_size
        assert 0 < partial < SIZE
        assert target.read_bytes() == payload.read_bytes()[:partial]  # a prefix, ready to resume

        reports: list[tuple[int, int]] = []
        result = await upload(conn, payload, str(remote_dir), progress=lambda d, t: reports.append((d, t)),
                              chunk_size=CHUNK)
    assert result.resumed_from == partial and result.size == SIZE
    assert result.destination == str(target)
    assert reports[0] == (partial, SIZE) and reports[-1] == (SIZE, SIZE)
    assert [d for d, _ in reports] == sorted(d for d, _ in reports)
    assert target.read_bytes() == payload.read_bytes()


async def test_download_cancel_then_resume_is_byte_identical(
    sshd: SshdServer, isolated_home: Path, payload: Path, tmp_path: Path
) -> None:
    trust(sshd, isolated_home)
    local = tmp_path / "downloads" / "copy.bin"
    async with HostConnection(key_profile(sshd)) as conn:
        await cancel_after(
            lambda p: download(conn, str(payload), local, progress=p, chunk_size=CHUNK), SIZE // 2
        )
        partial = local.stat().st_size
        assert 0 < partial < SIZE
        result = await download(conn, str(payload), local, chunk_size=CHUNK)
        assert result.resumed_from == partial
        assert local.read_bytes() == payload.read_bytes()

        # A destination larger than the source is no prefix: it is rewritten, not "resumed".
        local.write_bytes(b"x" * (SIZE + 10))
        again = await download(conn, str(payload), local)
        assert again.resumed_from == 0
        assert local.read_bytes() == payload.read_bytes()


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
