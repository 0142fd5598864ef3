"""File copy between this computer and a host: the service `gpuws cp` and the Files window call.

The transfers themselves (SFTP, progress, cancel, resume) are `gpuws.remote.files`; this module is
where a front end starts: which side is the host (`plan_copy`, from `NAME:PATH` arguments), the
copy in that direction (`copy`), and the listing, folder and delete operations of the browser.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuws.core.errors import RefusedInput
from gpuws.remote.files import (
    ProgressCallback,
    RemoteEntry,
    TransferError,
    TransferResult,
    download,
    list_dir,
    make_dir,
    remove,
    upload,
)

if TYPE_CHECKING:
    from gpuws.remote.connection import HostConnection

__all__ = [
    "CopyPlan", "ProgressCallback", "RemoteEntry", "TransferError", "TransferResult", "copy", "download",
    "list_dir", "make_dir", "plan_copy", "remove", "split_remote", "upload",
]


def split_remote(arg: str) -> tuple[str | None, str]:
    """("NAME", "PATH") for "NAME:PATH", (None, arg) for a local path (one with "/" before any ":")."""
    head, sep, tail = arg.partition(":")
    if not sep or not head or "/" in head or "\\" in head or (len(head) == 1 and sys.platform.startswith("win")):
        return None, arg
    return head, tail or "~"


@dataclass(frozen=True)
class CopyPlan:
    """One copy: `source` to `destination`, one of them on the host `host`."""

    host: str
    source: str
    destination: str
    to_host: bool  # True: an upload (the destination is on the host)


def plan_copy(source: str, destination: str) -> CopyPlan:
    """The copy that `gpuws cp SOURCE DESTINATION` asks for; RefusedInput unless exactly one side
    is `NAME:PATH` on a host."""
    src_host, src = split_remote(source)
    dst_host, dst = split_remote(destination)
    if (src_host is None) == (dst_host is None):
        raise RefusedInput("cp: give exactly one side as NAME:PATH on a host (the other is a local path)")
    if dst_host is not None:
        return CopyPlan(dst_host, src, dst, to_host=True)
    assert src_host is not None
    return CopyPlan(src_host, src, dst, to_host=False)


async def copy(
    connection: HostConnection, plan: CopyPlan, *, progress: ProgressCallback | None = None, resume: bool = True
) -> TransferResult:
    """Run `plan` over `connection` (local paths may start with ~)."""
    if plan.to_host:
        return await upload(connection, Path(plan.source).expanduser(), plan.destination, progress=progress,
                            resume=resume)
    return await download(connection, plan.source, Path(plan.destination).expanduser(), progress=progress,
                          resume=resume)
