"""Copying files and folders to and from a host over SFTP: many large requests in flight, progress,
cancel, resume, and directory listings.

Speed: SFTP is request/response, so one request at a time waits a round trip per block. Here up to
`MAX_REQUESTS` blocks of the server's largest size (`limits@openssh.com`: 255 KiB on OpenSSH) are in
flight at once, on an SFTP channel with a 16 MiB window and 256 KiB packets (asyncssh's defaults,
2 MiB and 32 KiB, cost a packet's Python overhead per 32 KiB and stall a fast link on window
adjusts). `benchmarks/bench_transfer.py` measures it against scp. A file of `STREAM_MIN` (4 MiB)
or more has its bytes streamed through one exec channel instead (`gpuws.remote.stream_copy`: the
host's `cat`/`tail`, a plain byte stream as `ssh host cat FILE` gives), where the host can; the rest
stays SFTP.

Resume: a download is written here in order, so a cancelled or dropped one leaves a file that is a
prefix of the source. An upload's writes go out in order on one channel and OpenSSH's SFTP server
handles them in order, so the host's partial file is a prefix too; after a failed write it is cut
back to the bytes the host confirmed. The next copy continues from the destination's end
(`gpuws.core.transfer.decide`). Cancel by cancelling the task running the copy (the GUI cancels its
future, the CLI gets Ctrl-C).

Folders: the whole tree is listed first (symlinks with lstat, never followed; a name a hostile
host lists as "..", "." or with "/" in it is refused), then copied in order: directories, files
(skipped when identical), links. A name that cannot be written on the receiving side is recorded and
the copy goes on with the rest (`TransferResult.failed`); a failure while data moves (no space, link
lost) stops the copy at once, with the partial file kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import posixpath
import stat
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import asyncssh

from gpuws.core.transfer import (
    Action,
    EntryKind,
    EntryState,
    ProgressCallback,
    ProgressMeter,
    TransferError,
    TransferProgress,
    decide,
    shown_path,
    size_text,
    unsafe_name,
)
from gpuws.remote import stream_copy
from gpuws.remote.wire import quiet_packet_logging

if TYPE_CHECKING:
    from gpuws.remote.connection import HostConnection

__all__ = [
    "ProgressCallback", "RemoteEntry", "TransferError", "TransferProgress", "TransferResult", "copy_paths",
    "download", "list_dir", "make_dir", "remove", "upload",
]

log = logging.getLogger(__name__)

MAX_BLOCK = 256 * 1024  # never more per request, whatever a server announces
SAFE_BLOCK = 32 * 1024  # what every SFTP server takes (RFC draft: at least 32 KiB)
MAX_REQUESTS = 64  # blocks in flight per file: 16 MiB at 255 KiB, a fast link's bandwidth-delay product
CHANNEL_WINDOW = stream_copy.CHANNEL_WINDOW  # 16 MiB
CHANNEL_MAX_PACKET = stream_copy.CHANNEL_MAX_PACKET  # 256 KiB
MAX_ENTRIES = 1_000_000  # a tree listing larger than this is refused (memory stays bounded)


@dataclass(frozen=True)
class TransferResult:
    """What a finished copy did."""

    source: str
    destination: str
    size: int  # bytes of all the files copied or found identical
    resumed_from: int  # bytes already there and kept (0: a full copy)
    files: int = 1  # files in the copy
    transferred_files: int = 1  # ... of which sent now (fully or resumed)
    skipped: int = 0  # ... found identical
    dirs: int = 0
    links: int = 0
    failed: tuple[tuple[str, str], ...] = ()  # (path, why) of names that could not be written
    skipped_bytes: int = 0  # bytes of the identical files

    @property
    def transferred(self) -> int:
        """Bytes sent over the link by this copy."""
        return self.size - self.resumed_from - self.skipped_bytes


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
    shown = shown_path(path)
    if isinstance(exc, asyncssh.SFTPNoSuchFile):
        return TransferError(f"{action}: {shown}: no such file or directory on the host")
    if isinstance(exc, asyncssh.SFTPPermissionDenied):
        return TransferError(f"{action}: {shown}: permission denied on the host")
    if isinstance(exc, asyncssh.SFTPError):
        return TransferError(f"{action}: {shown}: {exc.reason or 'failed on the host'}")
    if isinstance(exc, OSError):
        return TransferError(f"{action}: {shown}: {exc.strerror or exc}")
    return TransferError(f"{action}: {shown}: {exc}")


async def _sftp(connection: HostConnection) -> asyncssh.SFTPClient:
    """An SFTP client on its own channel, with a large window and packets (see the module's doc);
    host paths are decoded as UTF-8 with undecodable bytes kept (surrogateescape), as Python's own
    file names are, so any name on the host round-trips."""
    ssh = await connection.ssh(30.0)
    try:
        try:
            from asyncssh.sftp import start_sftp_client

            writer, reader, _ = await ssh.open_session(subsystem="sftp", encoding=None, window=CHANNEL_WINDOW,
                                                       max_pktsize=CHANNEL_MAX_PACKET)
            quiet_packet_logging(writer.channel)  # gpuws.remote.wire
            return await start_sftp_client(ssh, asyncio.get_running_loop(), "strict", reader, writer, "utf-8",
                                           "surrogateescape", 3)
        except (ImportError, TypeError):  # an asyncssh whose internals differ: its defaults
            return await ssh.start_sftp_client(path_errors="surrogateescape")
    except (asyncssh.Error, OSError) as exc:
        raise TransferError(f"SFTP is not available on {connection.profile.name}: {exc}") from None


def _block_size(sftp: asyncssh.SFTPClient, write: bool) -> int:
    limits = getattr(sftp, "limits", None)
    size = int(getattr(limits, "max_write_len" if write else "max_read_len", 0) or 0)
    return min(MAX_BLOCK, size) if size > 0 else SAFE_BLOCK


# -- one file each way --------------------------------------------------------------------------


async def _get_file(sftp: asyncssh.SFTPClient, source: str, dest: Path, size: int, offset: int, mode: int,
                    advance: Callable[[int], None], block: int, max_requests: int) -> None:
    """Copy `size` bytes of the host's `source` into `dest` from `offset` (a prefix already there),
    writing in order; raises SFTPError/OSError."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    async with sftp.open(source, "rb", encoding=None, block_size=0) as src:
        fd = os.open(dest, flags | (0 if offset else os.O_TRUNC), mode & 0o777)
        pending: deque[tuple[int, int, asyncio.Future[bytes]]] = deque()
        try:
            if os.fstat(fd).st_size != offset:
                # Exactly the prefix: a longer leftover is not kept. Only when needed: on ext4 any
                # truncate to 0, even of a new empty file, makes close() start writing the whole file
                # out (its auto_da_alloc heuristic): 0.1 s per 256 MiB that scp never spends.
                os.ftruncate(fd, offset)
            os.lseek(fd, offset, os.SEEK_SET)
            next_offset = offset

            def _request() -> None:
                nonlocal next_offset
                count = min(block, size - next_offset)
                pending.append((next_offset, count, asyncio.ensure_future(src.read(count, next_offset))))
                next_offset += count

            while next_offset < size and len(pending) < max_requests:
                _request()
            while pending:
                at, count, future = pending.popleft()
                data = await future
                while len(data) < count:  # a short read (a server's choice, or the file shrank)
                    more = await src.read(count - len(data), at + len(data))
                    assert isinstance(more, bytes)  # opened without an encoding
                    if not more:
                        raise TransferError(f"download: {shown_path(source)}: the file on the host got "
                                            f"shorter while it was copied ({at + len(data)} of {size} bytes)")
                    data += more
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                advance(count)
                if next_offset < size:
                    _request()
        finally:
            for _at, _count, future in pending:
                future.cancel()
            os.close(fd)


async def _put_file(sftp: asyncssh.SFTPClient, source: Path, dest: str, size: int, offset: int, mode: int,
                    advance: Callable[[int], None], block: int, max_requests: int) -> None:
    """Copy `size` bytes of the local `source` to the host's `dest` from `offset`; raises
    SFTPError/OSError. After a failed write the host's file is cut back to what it confirmed."""
    fd = os.open(source, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        pflags = asyncssh.FXF_WRITE | asyncssh.FXF_CREAT | (0 if offset else asyncssh.FXF_TRUNC)
        attrs = asyncssh.SFTPAttrs(permissions=mode & 0o777)
        async with sftp.open(dest, pflags, attrs, encoding=None, block_size=0) as dst:
            pending: deque[tuple[int, asyncio.Future[int]]] = deque()
            confirmed = offset
            next_offset = offset
            os.lseek(fd, offset, os.SEEK_SET)
            try:
                while next_offset < size or pending:
                    while next_offset < size and len(pending) < max_requests:
                        data = os.read(fd, min(block, size - next_offset))
                        if not data:
                            raise TransferError(f"upload: {shown_path(str(source))}: the file here got shorter "
                                                f"while it was copied ({next_offset} of {size} bytes)")
                        pending.append((len(data), asyncio.ensure_future(dst.write(data, next_offset))))
                        next_offset += len(data)
                    count, future = pending[0]
                    # Shielded: a cancel must not stop a write that waits for the channel's window
                    # before it is sent, or the writes after it would leave a hole in the host's file.
                    await asyncio.shield(future)
                    pending.popleft()
                    confirmed += count
                    advance(count)
            except (asyncssh.SFTPError, TransferError):
                for _count, future in pending:
                    future.cancel()
                with contextlib.suppress(asyncssh.Error, OSError):
                    await dst.truncate(confirmed)  # a prefix, whatever a failed write left
                raise
            except BaseException:
                # Cancelled: the writes in flight were sent already and the host will apply them; wait
                # (a little) until it has, so the partial file is settled when the copy returns.
                if pending:
                    with contextlib.suppress(BaseException):
                        await asyncio.wait_for(asyncio.shield(asyncio.gather(*(f for _c, f in pending),
                                                                             return_exceptions=True)), 5.0)
                raise
    finally:
        os.close(fd)


# -- what each side holds -----------------------------------------------------------------------


def _state_of(st: os.stat_result) -> EntryState:
    if stat.S_ISDIR(st.st_mode):
        kind = EntryKind.DIR
    elif stat.S_ISLNK(st.st_mode):
        kind = EntryKind.SYMLINK
    else:
        kind = EntryKind.FILE
    return EntryState(kind, st.st_size, int(st.st_mtime), int(st.st_atime), stat.S_IMODE(st.st_mode))


def _remote_state(attrs: asyncssh.SFTPAttrs) -> EntryState:
    perms = attrs.permissions or 0
    if attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY or stat.S_ISDIR(perms):
        kind = EntryKind.DIR
    elif attrs.type == asyncssh.FILEXFER_TYPE_SYMLINK or stat.S_ISLNK(perms):
        kind = EntryKind.SYMLINK
    else:
        kind = EntryKind.FILE
    return EntryState(kind, attrs.size or 0, int(attrs.mtime or 0), int(attrs.atime or attrs.mtime or 0),
                      stat.S_IMODE(perms) if perms else 0o644)


class _Local:
    """This computer's side of a copy."""

    def join(self, parent: str, name: str) -> str:
        """The path of `name` in the folder `parent` on this side."""
        return os.path.join(parent, name)

    def basename(self, path: str) -> str:
        """The last part of `path` (a trailing '/' ignored)."""
        return os.path.basename(path.rstrip("/")) or path

    async def stat(self, path: str, follow: bool) -> EntryState | None:
        """`path`'s state (followed when `follow`), None when it does not exist."""
        try:
            return _state_of(os.stat(path) if follow else os.lstat(path))
        except FileNotFoundError:
            return None

    async def listdir(self, path: str) -> list[tuple[str, EntryState]]:
        """The entries of folder `path` as (name, lstat state), '.' and '..' left out."""
        out = []
        with os.scandir(path) as it:
            for entry in it:
                with contextlib.suppress(FileNotFoundError):
                    out.append((entry.name, _state_of(entry.stat(follow_symlinks=False))))
        return out

    async def readlink(self, path: str) -> str:
        """The target of the symlink `path`, as stored."""
        return os.readlink(path)

    async def mkdir(self, path: str) -> None:
        """Create the folder `path`."""
        os.mkdir(path)

    async def symlink(self, target: str, path: str) -> None:
        """Create the symlink `path` pointing at `target`."""
        os.symlink(target, path)

    async def unlink(self, path: str) -> None:
        """Remove the file or link `path`."""
        os.unlink(path)

    async def set_attrs(self, path: str, state: EntryState, preserve: bool) -> None:
        """Give `path` the source's modification time (and, with `preserve`, its mode and access time)."""
        if preserve:
            os.chmod(path, state.mode & 0o7777)
        os.utime(path, (state.atime if preserve else state.mtime, state.mtime))


class _Remote:
    """The host's side of a copy, through one SFTP client."""

    def __init__(self, sftp: asyncssh.SFTPClient) -> None:
        self.sftp = sftp

    def join(self, parent: str, name: str) -> str:
        """The path of `name` in the folder `parent` on this side."""
        return posixpath.join(parent, name)

    def basename(self, path: str) -> str:
        """The last part of `path` (a trailing '/' ignored)."""
        return posixpath.basename(path.rstrip("/")) or path

    async def stat(self, path: str, follow: bool) -> EntryState | None:
        """`path`'s state (followed when `follow`), None when it does not exist."""
        try:
            attrs = await (self.sftp.stat(path) if follow else self.sftp.lstat(path))
        except asyncssh.SFTPNoSuchFile:
            return None
        return _remote_state(attrs)

    async def listdir(self, path: str) -> list[tuple[str, EntryState]]:
        """The entries of folder `path` as (name, lstat state), '.' and '..' left out."""
        return [(str(n.filename), _remote_state(n.attrs)) for n in await self.sftp.readdir(path)
                if n.filename not in (".", "..")]

    async def readlink(self, path: str) -> str:
        """The target of the symlink `path`, as stored."""
        return str(await self.sftp.readlink(path))

    async def mkdir(self, path: str) -> None:
        """Create the folder `path`."""
        await self.sftp.mkdir(path)

    async def symlink(self, target: str, path: str) -> None:
        """Create the symlink `path` pointing at `target`."""
        await self.sftp.symlink(target, path)

    async def unlink(self, path: str) -> None:
        """Remove the file or link `path`."""
        await self.sftp.remove(path)

    async def set_attrs(self, path: str, state: EntryState, preserve: bool) -> None:
        """Give `path` the source's modification time (and, with `preserve`, its mode and access time)."""
        attrs = asyncssh.SFTPAttrs(atime=state.atime if preserve else state.mtime, mtime=state.mtime)
        if preserve:
            attrs.permissions = state.mode & 0o7777
        await self.sftp.setstat(path, attrs)


_Side = _Local | _Remote


@dataclass
class _Item:
    """One entry to copy: where it is on the sending side, where it goes, what it is."""

    source: str
    dest: str
    state: EntryState
    shown: str  # the source as the user would name it, for progress and messages
    action: Action = Action.COPY
    offset: int = 0


@dataclass
class _Plan:
    items: list[_Item] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


_LINK_LOST = (asyncssh.SFTPConnectionLost, asyncssh.SFTPNoConnection)


async def _why_not_written(side: _Side, path: str, exc: BaseException) -> str:
    """Why `path` could not be created on `side`, in words (an SFTP "Failure" says little)."""
    if isinstance(side, _Remote):
        if isinstance(exc, asyncssh.SFTPPermissionDenied):
            return "permission denied on the host"
        if isinstance(exc, asyncssh.SFTPError):
            namemax = 255
            with contextlib.suppress(asyncssh.Error, OSError):
                namemax = int((await side.sftp.statvfs(posixpath.dirname(path) or ".")).namemax) or 255
            if any(len(part.encode("utf-8", "surrogateescape")) > namemax for part in path.split("/")):
                return f"a name longer than the host's {namemax} bytes"
            if len(path.encode("utf-8", "surrogateescape")) >= 4096:
                return "a path longer than the host's 4,096 bytes"
            return f"the host refused it ({exc.reason or type(exc).__name__})"
    if isinstance(exc, OSError):
        if exc.errno == errno.ENAMETOOLONG:
            return "name too long for this computer"
        return f"{exc.strerror or exc} here"
    return str(exc)


async def _space_note(side: _Side, path: str, exc: BaseException) -> str:
    """" (no space left ...)" when the receiving side's disk is full, else ""."""
    if isinstance(side, _Local):
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            return f"no space left on this computer ({exc.strerror})"
        return ""
    with contextlib.suppress(asyncssh.Error, OSError):
        fs = await side.sftp.statvfs(posixpath.dirname(path) or ".")
        free = int(fs.bavail) * int(fs.frsize or fs.bsize)
        if free < MAX_BLOCK:
            return f"no space left on the host ({size_text(free)} free)"
    return ""


class _Copier:
    """One copy of several sources into one destination, sender -> receiver."""

    def __init__(self, sender: _Side, receiver: _Side, *, to_host: bool, recursive: bool, preserve: bool,
                 resume: bool, checksum: Callable[[list[str], list[str]], Awaitable[list[bool | None]]] | None,
                 block: int, max_requests: int) -> None:
        self.sender, self.receiver = sender, receiver
        self.to_host = to_host
        self.recursive, self.preserve, self.resume = recursive, preserve, resume
        self.checksum = checksum
        self.block, self.max_requests = block, max_requests
        self.verb = "upload" if to_host else "download"
        self.streamer: stream_copy.Streamer | None = None  # large files' bytes, when the host can
        self.sent_files = 0  # files whose data went through (fully or resumed)

    # planning

    async def plan(self, sources: Sequence[str], destination: str) -> tuple[_Plan, str]:
        """The entries to copy (listing folders) and the destination the copy ends up at."""
        plan = _Plan()
        dest_state = await self.receiver.stat(destination, follow=True)
        into = (dest_state is not None and dest_state.kind is EntryKind.DIR) or destination.endswith("/")
        if len(sources) > 1 and not into:
            raise TransferError(f"{self.verb}: {shown_path(destination)}: copying several sources needs an existing "
                                "folder to copy into")
        if into and dest_state is None:
            await self.receiver.mkdir(destination.rstrip("/") or destination)
        elif not into and isinstance(self.receiver, _Local) and os.path.dirname(destination):
            os.makedirs(os.path.dirname(destination), exist_ok=True)
        for source in sources:
            try:
                state = await self.sender.stat(source, follow=True)  # a named source is followed, as scp does
            except (asyncssh.SFTPError, OSError) as exc:
                raise self._send_error(source, exc) from None
            if state is None:
                where = "on the host" if not self.to_host else "here"
                raise TransferError(f"{self.verb}: {shown_path(source)}: no such file or directory {where}")
            target = self.receiver.join(destination, self.sender.basename(source)) if into else destination
            if state.kind is EntryKind.DIR:
                if not self.recursive:
                    raise TransferError(f"{self.verb}: {shown_path(source)}: is a directory (copy folders with -r)")
                await self._walk(source, target, state, plan)
            else:
                plan.items.append(_Item(source, target, state, source))
        if len(plan.items) > MAX_ENTRIES:
            raise TransferError(f"{self.verb}: more than {MAX_ENTRIES:,} entries; copy the folder in parts")
        target = (self.receiver.join(destination, self.sender.basename(sources[0]))
                  if into and len(sources) == 1 else destination)
        return plan, target

    async def _walk(self, root: str, target: str, state: EntryState, plan: _Plan) -> None:
        stack = [(root, target, state)]
        while stack:
            source, dest, st = stack.pop()
            plan.items.append(_Item(source, dest, st, source))
            try:
                entries = await self.sender.listdir(source)
            except (asyncssh.SFTPError, OSError) as exc:
                plan.failed.append((source, f"cannot list it: {self._send_error(source, exc)}"))
                continue
            seen: set[str] = set()
            children = []
            for name, child in sorted(entries, key=lambda e: e[0]):
                path = self.sender.join(source, name)
                why = unsafe_name(name)
                if why is None and name in seen:
                    why = "listed twice"
                if why is not None:
                    plan.failed.append((path, f"refused: {why}"))
                    continue
                seen.add(name)
                if child.kind is EntryKind.SYMLINK:
                    try:
                        child = EntryState(EntryKind.SYMLINK, child.size, child.mtime, child.atime, child.mode,
                                           await self.sender.readlink(path))
                    except (asyncssh.SFTPError, OSError) as exc:
                        plan.failed.append((path, f"cannot read the link: {exc}"))
                        continue
                if child.kind is EntryKind.DIR:
                    children.append((path, self.receiver.join(dest, name), child))
                else:
                    plan.items.append(_Item(path, self.receiver.join(dest, name), child, path))
                if len(plan.items) > MAX_ENTRIES:
                    raise TransferError(f"{self.verb}: more than {MAX_ENTRIES:,} entries; copy the folder in parts")
            stack.extend(reversed(children))

    async def decide_all(self, plan: _Plan) -> None:
        """Set each file's action from what the receiving side already holds (one listing per folder)."""
        listings: dict[str, dict[str, EntryState] | None] = {}
        same_size: list[_Item] = []
        for item in plan.items:
            if item.state.kind is not EntryKind.FILE:
                continue
            parent = os.path.dirname(item.dest) if isinstance(self.receiver, _Local) else posixpath.dirname(item.dest)
            if parent not in listings:
                try:
                    listings[parent] = dict(await self.receiver.listdir(parent or "."))
                except (asyncssh.SFTPError, OSError):
                    listings[parent] = None  # not there yet: everything in it is new
            existing = (listings[parent] or {}).get(self.receiver.basename(item.dest))
            item.action, item.offset = decide(item.state, existing, resume=self.resume)
            if self.checksum is not None and existing is not None and existing.size == item.state.size:
                same_size.append(item)
        if same_size and self.checksum is not None:
            sender_side = [i.source for i in same_size]
            receiver_side = [i.dest for i in same_size]
            local, remote = (sender_side, receiver_side) if self.to_host else (receiver_side, sender_side)
            for item, same in zip(same_size, await self.checksum(local, remote), strict=True):
                item.action, item.offset = decide(item.state, EntryState(EntryKind.FILE, item.state.size),
                                                  resume=self.resume, same_content=bool(same))

    # copying

    async def run(self, plan: _Plan, progress: ProgressCallback | None) -> tuple[int, int, int, int]:
        """Copy the planned entries in order; (total bytes, bytes skipped as identical, folders, links)."""
        files = [i for i in plan.items if i.state.kind is EntryKind.FILE and i.action is not Action.SKIP]
        total = sum(i.state.size for i in plan.items if i.state.kind is EntryKind.FILE)
        skipped_bytes = sum(i.state.size for i in plan.items if i.state.kind is EntryKind.FILE
                            and i.action is Action.SKIP)
        meter = ProgressMeter(progress, total=total, file_count=len(files), already=skipped_bytes)
        failed_dirs: list[str] = []
        dirs = links = 0
        for item in plan.items:
            if any(_under(item.dest, d) for d in failed_dirs):
                continue
            kind = item.state.kind
            if kind is EntryKind.DIR:
                if await self._make_dir(item, plan):
                    dirs += 1
                else:
                    failed_dirs.append(item.dest)
            elif kind is EntryKind.SYMLINK:
                links += await self._make_link(item, plan)
            elif item.action is not Action.SKIP:
                await self._copy_file(item, plan, meter)
        if self.preserve:  # folders last, deepest first: writing into them changed their times
            for item in reversed(plan.items):
                if item.state.kind is EntryKind.DIR and not any(_under(item.dest, d) for d in failed_dirs):
                    with contextlib.suppress(asyncssh.SFTPError, OSError):
                        await self.receiver.set_attrs(item.dest, item.state, True)
        return total, skipped_bytes, dirs, links

    async def _make_dir(self, item: _Item, plan: _Plan) -> bool:
        existing = await self._receiver_lstat(item.dest)
        if existing is not None and existing.kind is EntryKind.DIR:
            return True
        if existing is not None:
            plan.failed.append((item.dest, "a file or link of that name is in the way"))
            return False
        try:
            await self.receiver.mkdir(item.dest)
            return True
        except (asyncssh.SFTPError, OSError) as exc:
            plan.failed.append((item.dest, await _why_not_written(self.receiver, item.dest, exc)))
            return False

    async def _make_link(self, item: _Item, plan: _Plan) -> int:
        try:
            existing = await self._receiver_lstat(item.dest)
            if existing is not None and existing.kind is EntryKind.SYMLINK:
                if await self.receiver.readlink(item.dest) == item.state.link:
                    return 1
                await self.receiver.unlink(item.dest)
            elif existing is not None:
                plan.failed.append((item.dest, "a file or folder of that name is in the way of the link"))
                return 0
            await self.receiver.symlink(item.state.link, item.dest)
            return 1
        except (asyncssh.SFTPError, OSError) as exc:
            plan.failed.append((item.dest, await _why_not_written(self.receiver, item.dest, exc)))
            return 0

    async def _receiver_lstat(self, path: str) -> EntryState | None:
        try:
            return await self.receiver.stat(path, follow=False)
        except (asyncssh.SFTPError, OSError):
            return None

    async def _copy_file(self, item: _Item, plan: _Plan, meter: ProgressMeter) -> None:
        size = item.state.size
        existing = await self._receiver_lstat(item.dest)
        if existing is not None and existing.kind is EntryKind.SYMLINK:
            # Never write through a link at the destination: the link is replaced by the file.
            try:
                await self.receiver.unlink(item.dest)
            except (asyncssh.SFTPError, OSError) as exc:
                plan.failed.append((item.dest, await _why_not_written(self.receiver, item.dest, exc)))
                return
            item.action, item.offset = Action.COPY, 0
        meter.start_file(item.shown, size, item.offset)
        moved = [0]

        def _advance(count: int) -> None:
            moved[0] += count
            meter.advance(count)

        try:
            if not await self._stream_file(item, _advance):
                if self.to_host:
                    assert isinstance(self.receiver, _Remote)
                    await _put_file(self.receiver.sftp, Path(item.source), item.dest, size, item.offset,
                                    item.state.mode, _advance, self.block, self.max_requests)
                else:
                    assert isinstance(self.sender, _Remote)
                    await _get_file(self.sender.sftp, item.source, Path(item.dest), size, item.offset,
                                    item.state.mode, _advance, self.block, self.max_requests)
        except (asyncssh.SFTPError, OSError) as exc:
            if isinstance(exc, stream_copy.StreamFailed):
                moved[0] = exc.written  # what the host really wrote, not what was sent
            if moved[0] == 0 and not isinstance(exc, _LINK_LOST) and not await _space_note(self.receiver, item.dest,
                                                                                             exc):
                # Nothing moved: this name could not be opened or created. Recorded; the copy goes on.
                if _sender_failed(exc, self.to_host):
                    plan.failed.append((item.source, str(self._send_error(item.source, exc)).split(": ", 2)[-1]))
                else:
                    plan.failed.append((item.dest, await _why_not_written(self.receiver, item.dest, exc)))
                return
            raise await self._data_error(item, exc, moved[0]) from None
        self.sent_files += 1
        try:
            await self.receiver.set_attrs(item.dest, item.state, self.preserve)
        except (asyncssh.SFTPError, OSError) as exc:
            plan.failed.append((item.dest, f"copied, but its time could not be set: {exc}"))

    async def _stream_file(self, item: _Item, advance: Callable[[int], None]) -> bool:
        """Copy a large file's bytes through one exec channel (`gpuws.remote.stream_copy`); False when
        it is not streamed (small, a name only SFTP carries, a host that cannot), nothing moved."""
        host_path = item.dest if self.to_host else item.source
        if (self.streamer is None or item.state.size - item.offset < stream_copy.STREAM_MIN
                or not stream_copy.streamable(host_path)):
            return False
        try:
            if self.to_host:
                await self.streamer.put(Path(item.source), item.dest, item.state.size, item.offset, item.state.mode,
                                        advance)
            else:
                await self.streamer.get(item.source, Path(item.dest), item.state.size, item.offset, item.state.mode,
                                        advance)
        except stream_copy.StreamUnavailable as why:
            log.debug("streaming %s: %s; over SFTP", shown_path(host_path), why)
            if why.for_host:
                self.streamer = None
            return False
        return True

    async def _data_error(self, item: _Item, exc: BaseException, moved: int) -> TransferError:
        """A failure while the file's data moved: one line saying what, and that the prefix is kept."""
        done = item.offset + moved
        note = await _space_note(self.receiver, item.dest, exc)
        if not note:
            note = str(self._send_error(item.source, exc)).split(": ", 2)[-1] if _sender_failed(exc, self.to_host) \
                else str(_sftp_error(self.verb, item.dest, exc)).split(": ", 2)[-1]
        kept = (f"; the partial file ({size_text(done)} of {size_text(item.state.size)}) is kept: run the same "
                "copy again to resume") if done else ""
        return TransferError(f"{self.verb}: {shown_path(item.dest)}: {note}{kept}")

    def _send_error(self, path: str, exc: BaseException) -> TransferError:
        if isinstance(exc, OSError) and not isinstance(exc, asyncssh.Error):
            return TransferError(f"{self.verb}: {shown_path(path)}: {exc.strerror or exc}"
                                 + (" here" if self.to_host else ""))
        return _sftp_error(self.verb, path, exc)


def _sender_failed(exc: BaseException, to_host: bool) -> bool:
    """True when `exc` came from the sending side (a local OSError on upload, an SFTP error on download)."""
    local = isinstance(exc, OSError) and not isinstance(exc, asyncssh.Error)
    return local if to_host else not local


def _under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


async def _remote_checksums(connection: HostConnection, paths: list[str]) -> list[str | None]:
    """SHA-256 of each host file (None where it could not be read), by `sha256sum -z` on the host (NUL
    after each line: no escaping of names with newlines), in batches that keep argv short."""
    out: list[str | None] = []
    batch: list[str] = []

    async def _flush() -> None:
        result = await connection.runner.run(["sha256sum", "-z", "--", *batch], timeout=3600,
                                             max_output=len(batch) * 4200 + 4096)
        lines = result.stdout.split("\0")
        if result.ok and len(lines) >= len(batch):
            out.extend(line.lstrip("\\")[:64] for line in lines[: len(batch)])
        else:
            out.extend([None] * len(batch))
        batch.clear()

    for path in paths:
        batch.append(path)
        if sum(len(p) + 1 for p in batch) > 64_000:
            await _flush()
    if batch:
        await _flush()
    return out


def _local_checksum(path: str) -> str | None:
    import hashlib

    try:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


async def copy_paths(
    connection: HostConnection,
    sources: Sequence[str],
    destination: str,
    *,
    to_host: bool,
    recursive: bool = False,
    preserve: bool = False,
    resume: bool = True,
    checksum: bool = False,
    progress: ProgressCallback | None = None,
    block_size: int | None = None,
    max_requests: int = MAX_REQUESTS,
    stream: bool = True,
) -> TransferResult:
    """Copy `sources` (files; folders with `recursive`) to `destination`, here -> host when `to_host`.

    Local paths are as given (`~` already expanded); host paths are SFTP paths ("~/x" is made
    relative to the login directory). A name that could not be written is in `failed`; anything
    else that stops the copy raises TransferError (what was copied stays). `stream`: a large file's
    bytes may go through an exec channel (`gpuws.remote.stream_copy`; False: SFTP only)."""
    if not sources:
        raise TransferError("cp: nothing to copy")
    async with await _sftp(connection) as sftp:
        remote = _Remote(sftp)
        local = _Local()
        sender: _Side
        receiver: _Side
        if to_host:
            sender, receiver = local, remote
            srcs, dest = list(sources), remote_path(destination)
            if destination.endswith("/") and not dest.endswith("/"):
                dest += "/"
        else:
            sender, receiver = remote, local
            srcs, dest = [remote_path(s) for s in sources], destination
            srcs = await _expand_globs(sftp, srcs)
        block = block_size or _block_size(sftp, write=to_host)
        if checksum:
            async def _sums(local_paths: list[str], remote_paths: list[str]) -> list[bool | None]:
                theirs = await _remote_checksums(connection, remote_paths)
                ours = await asyncio.to_thread(lambda: [_local_checksum(p) for p in local_paths])
                return [None if a is None or b is None else a == b for a, b in zip(ours, theirs, strict=True)]

        copier = _Copier(sender, receiver, to_host=to_host, recursive=recursive, preserve=preserve, resume=resume,
                         checksum=_sums if checksum else None, block=block, max_requests=max(1, max_requests))
        if stream:
            copier.streamer = stream_copy.Streamer(connection, sftp)
        try:
            plan, target = await copier.plan(srcs, dest)
            await copier.decide_all(plan)
            total, skipped_bytes, dirs, links = await copier.run(plan, progress)
        except (asyncssh.SFTPError, OSError) as exc:
            raise _sftp_error(copier.verb, destination, exc) from None
        except asyncssh.Error as exc:
            raise TransferError(f"{copier.verb}: the connection to {connection.profile.name} was lost "
                                f"({exc.reason}); run the same copy again to resume") from None
    file_items = [i for i in plan.items if i.state.kind is EntryKind.FILE]
    return TransferResult(
        source=sources[0] if len(sources) == 1 else ", ".join(sources), destination=target, size=total,
        resumed_from=sum(i.offset for i in file_items if i.action is Action.RESUME),
        files=len(file_items), transferred_files=copier.sent_files,
        skipped=len([i for i in file_items if i.action is Action.SKIP]), dirs=dirs, links=links,
        failed=tuple(plan.failed), skipped_bytes=skipped_bytes)


async def _expand_globs(sftp: asyncssh.SFTPClient, sources: list[str]) -> list[str]:
    """Host paths with *, ? or [...] become the names they match (as scp has the host's shell do)."""
    out: list[str] = []
    for source in sources:
        if any(c in source for c in "*?["):
            try:
                matches = [str(m) for m in await sftp.glob(source)]
            except asyncssh.SFTPError:
                matches = []
            if not matches:
                raise TransferError(f"download: {shown_path(source)}: no match on the host")
            out.extend(sorted(matches))
        else:
            out.append(source)
    return out


async def upload(
    connection: HostConnection,
    local: Path,
    remote: str,
    *,
    progress: ProgressCallback | None = None,
    resume: bool = True,
    chunk_size: int | None = None,
    max_requests: int = MAX_REQUESTS,
) -> TransferResult:
    """Copy the local file `local` to `remote` on the host (into it, if it is a directory)."""
    local = Path(local)
    if not local.is_file():
        raise TransferError(f"upload: {shown_path(str(local))}: no such file here")
    return _one(await copy_paths(connection, [str(local)], remote, to_host=True, resume=resume, progress=progress,
                                 block_size=chunk_size, max_requests=max_requests))


async def download(
    connection: HostConnection,
    remote: str,
    local: Path,
    *,
    progress: ProgressCallback | None = None,
    resume: bool = True,
    chunk_size: int | None = None,
    max_requests: int = MAX_REQUESTS,
) -> TransferResult:
    """Copy `remote` from the host to `local` (into it, if it is a directory)."""
    return _one(await copy_paths(connection, [remote], str(local), to_host=False, resume=resume, progress=progress,
                                 block_size=chunk_size, max_requests=max_requests))


def _one(result: TransferResult) -> TransferResult:
    if result.failed:
        path, why = result.failed[0]
        raise TransferError(f"{shown_path(path)}: {why}")
    return result


# -- browsing -----------------------------------------------------------------------------------


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
        if n.filename not in (".", "..") and unsafe_name(str(n.filename)) is None
    ]
    entries.sort(key=lambda e: (not e.is_dir, e.name.lower()))
    return str(absolute), entries


def _checked_name(name: str) -> str:
    name = name.strip()
    if unsafe_name(name) is not None:
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
