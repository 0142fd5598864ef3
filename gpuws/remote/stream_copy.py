"""A large file's bytes through one exec channel: the host's `cat`/`tail` stream them (as
`ssh host cat FILE` would), while SFTP keeps the listing, the decisions, modes, times and the final
size.

Why: an SFTP copy frames every 255 KiB in a request and its reply, and asyncssh (Python) handles
each; a plain byte stream on one channel costs per byte what the tunnel costs (which matches
`ssh -L`). `benchmarks/bench_transfer.py` measures both against scp.

Safety (a host path never reaches a shell as code):
- the command is a constant `sh -c 'SCRIPT' sh PATH N`: the login shell parses only that, the path
  is one argument quoted by `shlex.quote`, and `sh` reads it as "$1", never as code. Only a path of
  printable UTF-8 without a backslash or `!` (which csh and fish treat apart inside single quotes)
  is streamed; any other (a newline, undecodable bytes) goes through SFTP, which needs no quoting.
- the script first prints a marker line and `pwd -P`: output before the marker (a login script that
  prints), or a working directory other than SFTP's (a chrooted or different SFTP namespace, as the
  built-in demo host's), means the exec side does not see the files SFTP sees, and the copy uses
  SFTP. An upload sends its first byte only after those lines, once the script reads "go": nothing
  a login script reads can eat the file's bytes.
- a host that has no `sh`, `tail` or `cat`, or runs only SFTP (`ForceCommand internal-sftp`), sends no
  marker (or exits 126/127 having moved nothing): `StreamUnavailable`, and SFTP copies the file and
  the rest of the copy. (An SFTP-only host is known at once on a download, which closes its input;
  an upload, which must not send before the marker, waits `START_TIMEOUT_S` for it, once per copy.)
- the check of the working directory cannot tell apart an SFTP server chrooted to "/" of another
  tree whose commands also run in "/": no server gpuws knows does that (OpenSSH's ChrootDirectory
  applies to commands and SFTP alike).

What the SFTP copy promises holds here too: a download is written here in order (a cancelled or
failed one leaves a prefix, kept to resume); an upload is appended on the host in order by `cat >>`
after SFTP made the file (its mode; truncated for a fresh copy) or found it exactly the resume offset
long, so a partial one is a prefix too; its size is checked by SFTP at the end. A full disk on the
host ends `cat` with its error: `StreamFailed` (an SFTP failure, so the copy reports it as it does an
SFTP one, with the bytes really written).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import asyncssh

from gpuws.core.transfer import TransferError, shown_path
from gpuws.remote.wire import quiet_packet_logging

if TYPE_CHECKING:
    from gpuws.remote.connection import HostConnection

STREAM_MIN = 4 * 1024 * 1024  # smaller files: SFTP (a channel and a shell cost more than they save)
START_TIMEOUT_S = 15.0  # for the marker (a host that only speaks SFTP never sends it)
SETTLE_TIMEOUT_S = 5.0  # a cancelled upload waits this long for the host to write what was sent
READ_BLOCK = 1024 * 1024
CHANNEL_WINDOW = 16 * 1024 * 1024
CHANNEL_MAX_PACKET = 256 * 1024
MARKER = b"gpuws-stream\n"
_HEADER_MAX = 8192 + len(MARKER)
_STDERR_MAX = 2000

# Constant scripts: the path and the offset come in as "$1" and "$2", never as code.
# (`cat` for a whole file: GNU tail copies in 8 KiB reads, cat in 128 KiB ones.)
_DOWNLOAD = 'echo gpuws-stream; pwd -P; if [ "$2" = 1 ]; then exec cat -- "$1"; fi; exec tail -c "+$2" -- "$1"'
_UPLOAD = 'echo gpuws-stream; pwd -P; IFS= read -r go && [ "$go" = go ] && exec cat >> "$1"'


class StreamUnavailable(Exception):
    """The host cannot stream this file; nothing was moved: copy it over SFTP. `for_host`: it never
    will on this connection (no marker, another namespace), so later files go straight to SFTP."""

    def __init__(self, why: str, *, for_host: bool) -> None:
        super().__init__(why)
        self.for_host = for_host


class StreamFailed(asyncssh.SFTPFailure):
    """The host's side of a stream failed part-way (its disk full, a read error): reported like an
    SFTP failure; `written` bytes of this copy are in the destination (a prefix)."""

    def __init__(self, reason: str, written: int) -> None:
        super().__init__(reason)
        self.written = written


def streamable(path: str) -> bool:
    """Whether host path `path` may be streamed (see the module's doc: printable UTF-8, no backslash
    or `!`, shorter than the host's 4,096-byte limit)."""
    try:
        raw = path.encode("utf-8")  # strict: a name with undecodable bytes is not
    except UnicodeEncodeError:
        return False
    return 0 < len(raw) < 4096 and all(c.isprintable() and c not in "\\!" for c in path)


def _command(script: str, *args: str) -> str:
    """`sh -c SCRIPT sh ARGS...`, every word quoted for the login shell."""
    return " ".join(["sh", "-c", shlex.quote(script), "sh", *(shlex.quote(a) for a in args)])


class _Session(asyncssh.SSHClientSession[bytes]):
    """The channel's events: the header (marker, working directory), stderr's tail, flow control, and
    for a download the data written to `fd`."""

    def __init__(self, home: bytes, fd: int = -1, want: int = 0, advance: Callable[[int], None] | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.home = home
        self.fd, self.want, self.advance = fd, want, advance
        self.got = 0
        self.error: OSError | None = None
        self.head = b""
        self.started = False
        self.ready: asyncio.Future[bool] = loop.create_future()
        self.closed: asyncio.Future[Exception | None] = loop.create_future()
        self.writable = asyncio.Event()
        self.writable.set()
        self.stderr = bytearray()
        self.chan: asyncssh.SSHClientChannel[bytes] | None = None

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:  # type: ignore[override]
        """Keep the channel (to close it on a refusal, an error, or once all bytes came)."""
        self.chan = chan

    def _refuse(self) -> None:
        if not self.ready.done():
            self.ready.set_result(False)
        if self.chan is not None:
            self.chan.close()

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        """Check the header, then write a download's bytes here in order (stderr: its tail kept)."""
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            self.stderr += data
            del self.stderr[:-_STDERR_MAX]
            return
        if not self.started:
            self.head += data
            if not self.head.startswith(MARKER[: len(self.head)]):
                self._refuse()  # something printed before the marker: not our stream alone
                return
            end = self.head.find(b"\n", len(MARKER))
            if end < 0:
                if len(self.head) > _HEADER_MAX:
                    self._refuse()
                return
            if self.head[len(MARKER):end] != self.home:
                self._refuse()  # the exec side is not where SFTP is
                return
            self.started = True
            data, self.head = self.head[end + 1:], b""
            self.ready.set_result(True)
        if self.fd < 0 or not data or self.error is not None or self.got >= self.want:
            return
        if len(data) > self.want - self.got:
            data = data[: self.want - self.got]  # the file grew: its size when the copy began is copied
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
        except OSError as exc:  # this computer's disk is full, ...: stop, keep the prefix
            self.error = exc
            if self.chan is not None:
                self.chan.close()
            return
        self.got += len(data)
        if self.advance is not None:
            self.advance(len(data))
        if self.got >= self.want and self.chan is not None:
            self.chan.close()  # all of it (a file that grew sends more)

    def eof_received(self) -> bool:
        """Stay open: the exit status follows the end of the output."""
        return True

    def pause_writing(self) -> None:
        """The channel's buffer is full: an upload waits."""
        self.writable.clear()

    def resume_writing(self) -> None:
        """Room again: an upload goes on."""
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        """The channel closed (`exc`: the connection dropped): whoever waits hears it."""
        if not self.ready.done():
            self.ready.set_result(False)
        if not self.closed.done():
            self.closed.set_result(exc)
        self.writable.set()

    def last_error_line(self) -> str:
        """The host command's last stderr line ("" if it said nothing)."""
        lines = bytes(self.stderr).decode("utf-8", "replace").strip().splitlines()
        return lines[-1].strip() if lines else ""


class Streamer:
    """Streams the large files of one copy over `connection`; SFTP's home (its working directory) is
    read once, to check that an exec channel sees the same files."""

    def __init__(self, connection: HostConnection, sftp: asyncssh.SFTPClient) -> None:
        self.connection, self.sftp = connection, sftp
        self._home: bytes | None = None

    async def _home_dir(self) -> bytes:
        """SFTP's working directory (the login directory on OpenSSH), asked once."""
        if self._home is None:
            self._home = str(await self.sftp.realpath(".")).encode("utf-8", "surrogateescape")
        return self._home

    async def _open(self, script: str, args: tuple[str, ...], session: _Session, *,
                    no_input: bool = False) -> asyncssh.SSHClientChannel[bytes]:
        """The command's channel, once its header came and matched; StreamUnavailable if not."""
        ssh = await self.connection.ssh(30.0)
        chan, _ = await ssh.create_session(lambda: session, _command(script, *args), encoding=None,
                                           window=CHANNEL_WINDOW, max_pktsize=CHANNEL_MAX_PACKET)
        quiet_packet_logging(chan)  # gpuws.remote.wire
        if no_input:
            # A download reads nothing: the end of its input at once also ends an SFTP server that a
            # host runs in place of every command, so such a host is known without waiting.
            chan.write_eof()
        try:
            started = await asyncio.wait_for(asyncio.shield(session.ready), START_TIMEOUT_S)
        except TimeoutError:
            started = False
        except BaseException:
            chan.abort()
            raise
        if not started:
            chan.abort()
            raise StreamUnavailable("no stream from the host's shell", for_host=True)
        return chan

    async def get(self, source: str, dest: Path, size: int, offset: int, mode: int,
                  advance: Callable[[int], None]) -> None:
        """The host's `source` from `offset` to `size` into `dest` (a prefix of `offset` bytes kept)."""
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        home = await self._home_dir()
        fd = os.open(dest, flags | (0 if offset else os.O_TRUNC), mode & 0o777)
        session = _Session(home, fd, size - offset, advance)
        chan: asyncssh.SSHClientChannel[bytes] | None = None
        try:
            if os.fstat(fd).st_size != offset:
                os.ftruncate(fd, offset)  # see gpuws.remote.files._get_file (ext4 and a needless truncate)
            os.lseek(fd, offset, os.SEEK_SET)
            chan = await self._open(_DOWNLOAD, (source, str(offset + 1)), session, no_input=True)
            lost = await session.closed
            if session.error is not None:
                raise session.error
            if session.got >= session.want:
                return
            status = chan.get_exit_status()
            if session.got == 0 and status not in (0, None):
                # Could not read it (no such file, no permission, no `tail`): SFTP says why, or copies it.
                raise StreamUnavailable(session.last_error_line() or f"exit status {status}", for_host=False)
            if lost is not None:
                raise asyncssh.SFTPConnectionLost(str(lost))
            if status == 0:
                raise TransferError(f"download: {shown_path(source)}: the file on the host got shorter while it "
                                    f"was copied ({offset + session.got} of {size} bytes)")
            raise StreamFailed(session.last_error_line() or "the host stopped sending", session.got)
        finally:
            session.fd = -1  # data still on its way (after a cancel) is dropped, never written to a reused fd
            if chan is not None:
                chan.abort()  # a no-op once closed; a cancel ends the host's `tail` here
            os.close(fd)

    async def put(self, source: Path, dest: str, size: int, offset: int, mode: int,
                  advance: Callable[[int], None]) -> None:
        """The local `source` from `offset` to `size` appended to the host's `dest`."""
        pflags = asyncssh.FXF_WRITE | asyncssh.FXF_CREAT | (0 if offset else asyncssh.FXF_TRUNC)
        async with self.sftp.open(dest, pflags, asyncssh.SFTPAttrs(permissions=mode & 0o777)):
            pass  # made with its mode (or emptied) as an SFTP copy makes it
        if offset and (await self.sftp.stat(dest)).size != offset:
            raise StreamUnavailable("the host's partial file changed", for_host=False)
        session = _Session(await self._home_dir())
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            os.lseek(fd, offset, os.SEEK_SET)
            chan = await self._open(_UPLOAD, (dest,), session)
            try:
                chan.write(b"go\n")
                sent = offset
                while sent < size and not session.closed.done():
                    if not session.writable.is_set():
                        await session.writable.wait()
                        continue
                    data = os.read(fd, min(READ_BLOCK, size - sent))
                    if not data:
                        raise TransferError(f"upload: {shown_path(str(source))}: the file here got shorter while "
                                            f"it was copied ({sent} of {size} bytes)")
                    chan.write(data)
                    sent += len(data)
                    advance(len(data))
                if not session.closed.done():
                    chan.write_eof()
                lost = await session.closed
            except BaseException:
                # Cancelled (or this side failed): what was sent is written by the host; wait (a
                # little) until it has, so the partial file is a settled prefix when the copy returns.
                with contextlib.suppress(BaseException):
                    chan.write_eof()
                    await asyncio.wait_for(asyncio.shield(session.closed), SETTLE_TIMEOUT_S)
                chan.abort()
                raise
        finally:
            os.close(fd)
        status = chan.get_exit_status()
        written = int((await self.sftp.stat(dest)).size or 0) - offset
        if status == 0 and written == size - offset:
            return
        if written == 0 and status in (126, 127):
            raise StreamUnavailable(session.last_error_line() or f"exit status {status}", for_host=True)
        if lost is not None and not session.last_error_line():
            raise asyncssh.SFTPConnectionLost(str(lost))
        raise StreamFailed(session.last_error_line() or f"the host's copy ended early (exit status {status})",
                           max(0, written))
