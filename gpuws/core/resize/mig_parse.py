"""Parsers for `nvidia-smi mig` listings: -lgi, -lci, -lgip, -lgipp.

The tables are boxed text meant for people; rows are recognised by their shape and anything
else inside the box that is not a border, header or known message is a ParseError, so a format
change is noticed instead of read as "no instances".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuws.core.errors import ParseError


@dataclass(frozen=True)
class GpuInstance:
    """One row of `nvidia-smi mig -lgi`."""

    gpu: int
    profile: str  # "3g.40gb" (without the "MIG " prefix)
    profile_id: int
    instance_id: int
    placement_start: int
    placement_size: int


@dataclass(frozen=True)
class ComputeInstance:
    """One row of `nvidia-smi mig -lci`."""

    gpu: int
    gpu_instance_id: int
    profile: str
    profile_id: int
    instance_id: int
    placement_start: int | None = None  # newer drivers print Start:Size
    placement_size: int | None = None


@dataclass(frozen=True)
class GpuInstanceProfileInfo:
    """One profile of `nvidia-smi mig -lgip`."""

    gpu: int
    profile: str  # "1g.10gb", "1g.10gb+me"
    profile_id: int
    free: int
    total: int
    memory_gib: float
    sm_count: int


@dataclass(frozen=True)
class ProfilePlacements:
    """One line of `nvidia-smi mig -lgipp`."""

    gpu: int
    profile_id: int
    starts: tuple[int, ...]
    size: int


# Messages nvidia-smi prints instead of an empty table (exit status is non-zero for some).
_EMPTY_MESSAGES = (
    "no gpu instances found",
    "no compute instances found",
    "no mig-enabled devices found",
    "no gpu instance profiles found",
)

_LGI_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s*\|$")
_LCI_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)(?:\s+(\d+):(\d+))?\s*\|$")
_LGIP_ROW = re.compile(
    r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s+(?:Yes|No|N/A)\s+(\d+)\s+\d+\s+\d+\s*\|$"
)
_LGIPP_ROW = re.compile(r"^GPU\s+(\d+)\s+Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,\s]*)\}:(\d+)\s*$")


def _is_empty_message(text: str) -> bool:
    lowered = text.strip().lower()
    return any(lowered.startswith(m) for m in _EMPTY_MESSAGES)


def _table_rows(text: str, what: str, header_words: tuple[str, ...]) -> list[str] | None:
    """Lines of a boxed table that are data rows; None when the output says there is nothing."""
    if _is_empty_message(text):
        return None
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if not lines or not lines[0].startswith("+"):
        raise ParseError(f"`nvidia-smi mig {what}` output is not the expected table: {text.strip()[:80]!r}")
    try:
        body_start = next(i for i, ln in enumerate(lines) if ln.startswith("|=")) + 1
    except StopIteration:
        raise ParseError(f"`nvidia-smi mig {what}` output has no table header") from None
    header = " ".join(lines[:body_start])
    if not all(w in header for w in header_words):
        raise ParseError(f"`nvidia-smi mig {what}` table header is not recognised")
    return [ln for ln in lines[body_start:] if not ln.startswith("+")]


def parse_lgi(text: str) -> list[GpuInstance]:
    """`nvidia-smi mig -lgi` -> GPU instances (empty when the driver reports none)."""
    rows = _table_rows(text, "-lgi", ("GPU instances", "Placement"))
    result = []
    for row in rows or []:
        m = _LGI_ROW.match(row)
        if not m:
            raise ParseError(f"`nvidia-smi mig -lgi`: unexpected row {row.strip()[:80]!r}")
        gpu, name, pid, iid, start, size = m.groups()
        result.append(GpuInstance(int(gpu), name, int(pid), int(iid), int(start), int(size)))
    return result


def parse_lci(text: str) -> list[ComputeInstance]:
    """`nvidia-smi mig -lci` -> compute instances (with or without the Placement column)."""
    rows = _table_rows(text, "-lci", ("Compute instances",))
    result = []
    for row in rows or []:
        m = _LCI_ROW.match(row)
        if not m:
            raise ParseError(f"`nvidia-smi mig -lci`: unexpected row {row.strip()[:80]!r}")
        gpu, gi, name, pid, iid, start, size = m.groups()
        result.append(
            ComputeInstance(
                int(gpu), int(gi), name, int(pid), int(iid),
                int(start) if start is not None else None,
                int(size) if size is not None else None,
            )
        )
    return result


def parse_lgip(text: str) -> list[GpuInstanceProfileInfo]:
    """`nvidia-smi mig -lgip` -> profiles (first line of each two-line row)."""
    rows = _table_rows(text, "-lgip", ("GPU instance profiles",))
    result = []
    for row in rows or []:
        m = _LGIP_ROW.match(row)
        if m:
            gpu, name, pid, free, total, mem, sm = m.groups()
            result.append(
                GpuInstanceProfileInfo(int(gpu), name, int(pid), int(free), int(total), float(mem), int(sm))
            )
        elif not re.fullmatch(r"\|[\s\d]*\|", row):  # the second line: CE/JPEG/OFA numbers
            raise ParseError(f"`nvidia-smi mig -lgip`: unexpected row {row.strip()[:80]!r}")
    return result


def parse_lgipp(text: str) -> list[ProfilePlacements]:
    """`nvidia-smi mig -lgipp` -> valid placements per profile (`{0,2,4}:2`)."""
    if _is_empty_message(text):
        return []
    result = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _LGIPP_ROW.match(line.strip())
        if not m:
            raise ParseError(f"`nvidia-smi mig -lgipp`: unexpected line {line.strip()[:80]!r}")
        gpu, pid, starts, size = m.groups()
        start_list = tuple(int(s) for s in starts.replace(" ", "").split(",") if s)
        result.append(ProfilePlacements(int(gpu), int(pid), start_list, int(size)))
    return result
