"""File copy between this computer and a host: the service `gpuws cp` and the Files window call.

The transfers themselves (SFTP with many requests in flight, folders, resume, progress) are
`gpuws.remote.files`; what a copy decides and its progress event are `gpuws.core.transfer`. This
module is where a front end starts: which side is the host (`plan_copy`, from `NAME:PATH`
arguments, several sources like scp), the copy in that direction (`copy`), and the listing, folder
and delete operations of the browser. Progress is a typed event (`TransferProgress`) sent to a
callback on the loop thread; the CLI draws it as a bar or JSON lines, the window as a progress bar.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuws.core.errors import RefusedInput
from gpuws.core.transfer import ProgressCallback, TransferError, TransferProgress
from gpuws.remote.files import (
    RemoteEntry,
    TransferResult,
    copy_paths,
    download,
    list_dir,
    make_dir,
    remove,
    upload,
)

if TYPE_CHECKING:
    from gpuws.remote.connection import HostConnection

__all__ = [
    "CopyOptions", "CopyPlan", "ProgressCallback", "RemoteEntry", "TransferError", "TransferProgress",
    "TransferResult", "copy", "download", "list_dir", "make_dir", "plan_copy", "remove", "split_remote", "upload",
]


def split_remote(arg: str) -> tuple[str | None, str]:
    """("NAME", "PATH") for "NAME:PATH", (None, arg) for a local path (one with "/" before any ":")."""
    head, sep, tail = arg.partition(":")
    if not sep or not head or "/" in head or "\\" in head or (len(head) == 1 and sys.platform.startswith("win")):
        return None, arg
    return head, tail or "~"


@dataclass(frozen=True)
class CopyPlan:
    """One copy: `sources` into `destination`, all of the one side on the host `host`."""

    host: str
    sources: tuple[str, ...]
    destination: str
    to_host: bool  # True: an upload (the destination is on the host)

    @property
    def source(self) -> str:
        """The first source (the only one, in a plain `cp A B`)."""
        return self.sources[0]


@dataclass(frozen=True)
class CopyOptions:
    """How to copy: `-r`, `-p`, resume partial files, compare by checksum."""

    recursive: bool = False
    preserve: bool = False
    resume: bool = True
    checksum: bool = False


def plan_copy(*args: str) -> CopyPlan:
    """The copy that `gpuws cp SOURCE... DESTINATION` asks for; RefusedInput unless the sources are all
    on one side (all `NAME:PATH` on the same host, or all local) and the destination on the other."""
    if len(args) < 2:
        raise RefusedInput("cp: give at least one source and a destination")
    *sources, destination = args
    dst_host, dst = split_remote(destination)
    split = [split_remote(s) for s in sources]
    hosts = {h for h, _ in split}
    if len(hosts) != 1 or (None in hosts) == (dst_host is None):
        raise RefusedInput("cp: give exactly one side as NAME:PATH on a host (the other is a local path)")
    src_host = hosts.pop()
    if dst_host is not None:
        return CopyPlan(dst_host, tuple(sources), dst, to_host=True)
    assert src_host is not None
    return CopyPlan(src_host, tuple(p for _, p in split), dst, to_host=False)


async def copy(
    connection: HostConnection, plan: CopyPlan, *, progress: ProgressCallback | None = None,
    options: CopyOptions | None = None,
) -> TransferResult:
    """Run `plan` over `connection` (local paths may start with ~). Names that could not be written
    are in the result's `failed`; anything that stops the copy raises TransferError."""
    options = options or CopyOptions()
    if plan.to_host:
        sources = [str(Path(s).expanduser()) for s in plan.sources]
        destination = plan.destination
    else:
        sources = list(plan.sources)
        destination = str(Path(plan.destination).expanduser()) + ("/" if plan.destination.endswith("/") else "")
    return await copy_paths(connection, sources, destination, to_host=plan.to_host, recursive=options.recursive,
                            preserve=options.preserve, resume=options.resume, checksum=options.checksum,
                            progress=progress)
