"""Copying files to and from a host over SFTP: progress, cancel, resume, and directory listings.

A transfer writes in place at increasing offsets, so a cancelled or dropped transfer leaves a
partial file that is a prefix of the source. The next transfer of the same file (with `resume`)
compares sizes and continues from the destination's end instead of starting over; a destination
larger than the source is not a prefix, so that one is rewritten from the start. The size is
checked at the end either way.

Cancel by cancelling the task running the transfer (the GUI cancels its future, the CLI gets
Ctrl-C): what was written stays for the next resume.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import asyncssh

from gpuws.core.errors import GpuwsError

if TYPE_CHECKING:
    from gpuws.remote.connection import HostConnection

CHUNK = 256 * 1024
ProgressCallback = Callable[[int, int], None]  # (bytes done, total bytes)


class TransferError(GpuwsError):
    """A file could not be copied (missing, no permission, size mismatch, link lost)."""


@dataclass(frozen=True)
class TransferResult:
    """What a finished transfer did."""

    source: str
    destination: str
    size: int
    resumed_from: int  # bytes already there and kept (0: a full copy)

    @property
    def transferred(self) -> int:
        return self.size - self.resumed_from


@dataclass(frozen=True)
class RemoteEntry:
    """One entry of a remote directory listing."""

    name: str
    path: str
    is_dir: bool
    size: int
    mtime: float | None


def remote_path(path: str) -> str:
    """A path as SFTP takes it: "~/x" and "~" mean the login directory (where SFTP starts)."""
    if path in ("~", "~/", ""):
        return "."
    if path.startswith("~/"):
        return path[2:]
    return path


def _sftp_error(action: str, path: str, exc: BaseException) -> TransferError:
    if isinstance(exc, asyncssh.SFTPNoSuchFile):
        return TransferError(f"{action}: {path}: no such file or directory on the host")
    if isinstance(exc, asyncssh.SFTPPermissionDenied):
        return TransferError(f"{action}: {path}: permission denied on the host")
    if isinstance(exc, asyncssh.SFTPError):
        return TransferError(f"{action}: {path}: {exc.reason}")
    if isinstance(exc, OSError):
        return TransferError(f"{action}: {path}: {exc.strerror or exc}")
    return TransferError(f"{action}: {path}: {exc}")


async def _sftp(connection: HostConnection) -> asyncssh.SFTPClient:
    ssh = await connection.ssh(30.0)
    try:
        return await ssh.start_sftp_client()
    except (asyncssh.Error, OSError) as exc:
        raise TransferError(f"SFTP is not available on {connection.profile.name}: {exc}") from None


def _start_offset(dest_size: int | None, total: int, resume: bool) -> int:
    """Where to continue: the destination's end when it can be a prefix of the source, else 0."""
    if not resume or dest_size is None or dest_size > total:
        return 0
    return dest_size


async def _remote_target(sftp: asyncssh.SFTPClient, remote: str, local_name: str) -> str:
    """`remote`, or `remote`/NAME when it names an existing directory (as scp does)."""
    path = remote_path(remote)
    if remote.endswith("/") or path == ".":
        return posixpath.join(path, local_name)
    try:
        if await sftp.isdir(path):
            return posixpath.join(path, local_name)
    except asyncssh.SFTPError:
        pass
    return path


async def upload(
    connection: HostConnection,
    local: Path,
    remote: str,
    *,
    progress: ProgressCallback | None = None,
    resume: bool = True,
    chunk_size: int = CHUNK,
) -> TransferResult:
    """Copy the local file `local` to `remote` on the host (into it, if it is a directory)."""
    local = Path(local)
    if not local.is_file():
        raise TransferError(f"upload: {local}: no such file here")
    total = local.stat().st_size
    async with await _sftp(connection) as sftp:
        target = await _remote_target(sftp, remote, local.name)
        try:
            dest_size: int | None = (await sftp.stat(target)).size
        except asyncssh.SFTPNoSuchFile:
            dest_size = None
        except asyncssh.SFTPError as exc:
            raise _sftp_error("upload", target, exc) from None
        offset = _start_offset(dest_size, total, resume)
        mode = "r+b" if offset else "wb"
        try:
            async with sftp.open(target, mode) as dst:
                if dest_size is not None and dest_size > offset:
                    await dst.truncate(offset)
                with local.open("rb") as src:
                    src.seek(offset)
                    done = offset
                    if progress:
                        progress(done, total)
                    while data := src.read(chunk_size):
                        await dst.write(data, done)
                        done += len(data)
                        if progress:
                            progress(done, total)
            final = (await sftp.stat(target)).size
        except (asyncssh.SFTPError, OSError) as exc:
            raise _sftp_error("upload", target, exc) from None
    if final != total:
        raise TransferError(f"upload: {target}: size on the host is {final} bytes, expected {total}")
    return TransferResult(str(local), target, total, offset)


async def download(
    connection: HostConnection,
    remote: str,
    local: Path,
    *,
    progress: ProgressCallback | None = None,
    resume: bool = True,
    chunk_size: int = CHUNK,
) -> TransferResult:
    """Copy `remote` from the host to `local` (into it, if it is a directory)."""
    source = remote_path(remote)
    local = Path(local)
    if local.is_dir():
        local = local / posixpath.basename(source.rstrip("/"))
    async with await _sftp(connection) as sftp:
        try:
            attrs = await sftp.stat(source)
            if attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY:
                raise TransferError(f"download: {remote}: is a directory (copy files one by one)")
            total = attrs.size or 0
            dest_size = local.stat().st_size if local.is_file() else None
            offset = _start_offset(dest_size, total, resume)
            local.parent.mkdir(parents=True, exist_ok=True)
            async with sftp.open(source, "rb", encoding=None) as src:
                with local.open("r+b" if offset else "wb") as dst:
                    dst.truncate(offset)
                    dst.seek(offset)
                    done = offset
                    if progress:
                        progress(done, total)
                    while data := await src.read(chunk_size, done):
                        assert isinstance(data, bytes)  # opened without an encoding
                        dst.write(data)
                        done += len(data)
                        if progress:
                            progress(done, total)
        except (asyncssh.SFTPError, OSError) as exc:
            raise _sftp_error("download", remote, exc) from None
    final = local.stat().st_size
    if final != total:
        raise TransferError(f"download: {local}: got {final} bytes, expected {total}")
    return TransferResult(remote, str(local), total, offset)


async def list_dir(connection: HostConnection, path: str = "~") -> tuple[str, list[RemoteEntry]]:
    """The absolute path of `path` on the host and its entries (directories first, by name)."""
    async with await _sftp(connection) as sftp:
        try:
            absolute = await sftp.realpath(remote_path(path))
            names = await sftp.readdir(absolute)
        except asyncssh.SFTPError as exc:
            raise _sftp_error("list", path, exc) from None
    entries = [
        RemoteEntry(
            name=str(n.filename),
            path=posixpath.join(str(absolute), str(n.filename)),
            is_dir=n.attrs.permissions is not None and stat.S_ISDIR(n.attrs.permissions),
            size=n.attrs.size or 0,
            mtime=float(n.attrs.mtime) if n.attrs.mtime is not None else None,
        )
        for n in names
        if n.filename not in (".", "..")
    ]
    entries.sort(key=lambda e: (not e.is_dir, e.name.lower()))
    return str(absolute), entries


def _checked_name(name: str) -> str:
    name = name.strip()
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise TransferError(f"not a usable name for a new folder: {name!r}")
    return name


async def make_dir(connection: HostConnection, parent: str, name: str) -> str:
    """Create folder `name` in `parent` on the host; returns its path."""
    path = posixpath.join(remote_path(parent), _checked_name(name))
    async with await _sftp(connection) as sftp:
        try:
            await sftp.mkdir(path)
        except asyncssh.SFTPError as exc:
            raise _sftp_error("new folder", path, exc) from None
    return path


async def remove(connection: HostConnection, path: str, *, is_dir: bool) -> None:
    """Delete a file, or a folder with everything in it, on the host."""
    async with await _sftp(connection) as sftp:
        try:
            if is_dir:
                await sftp.rmtree(remote_path(path))
            else:
                await sftp.remove(remote_path(path))
        except asyncssh.SFTPError as exc:
            raise _sftp_error("delete", path, exc) from None
