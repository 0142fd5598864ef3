"""`nvidia-smi --query-compute-apps=... --format=csv` -> the compute processes on the GPUs.

The usual command is `--query-compute-apps=pid,process_name,gpu_uuid,used_memory
--format=csv,noheader,nounits` (DEFAULT_FIELDS); output with a header (any field order, as in
the real captures) is read by its header instead. A process name is the only free text and may
contain commas, which nvidia-smi does not quote: extra cells are folded back into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuws.core.errors import ParseError
from gpuws.core.nvsmi._values import describe
from gpuws.core.nvsmi.query_csv import clean_cell, header_fields, to_int

DEFAULT_FIELDS: tuple[str, ...] = ("pid", "process_name", "gpu_uuid", "used_memory")

# nvidia-smi accepts both query names; headers say used_gpu_memory.
_ALIASES = {"used_gpu_memory": "used_memory", "name": "process_name"}


@dataclass(frozen=True)
class ComputeApp:
    """One process holding a CUDA context on a GPU."""

    pid: int
    process_name: str
    gpu_uuid: str | None
    used_memory_mib: int | None  # None where the driver cannot say (MIG, WDDM)


def parse_compute_apps(text: str, fields: Sequence[str] | None = None) -> list[ComputeApp]:
    """Parse compute-apps CSV. `fields` is the queried list for `noheader` output (default
    DEFAULT_FIELDS); a header line, when present, takes precedence. Raises ParseError."""
    lines = [line for line in text.splitlines() if line.strip() and not _is_no_process_notice(line)]
    keys = [_canonical(field) for field in (fields or DEFAULT_FIELDS)]
    units: list[str | None] = [None] * len(keys)
    if lines:
        header = header_fields(lines[0])
        if header is not None and "pid" in (_canonical(name) for name in header[0]):
            keys, units = [_canonical(name) for name in header[0]], header[1]
            lines = lines[1:]
    if "pid" not in keys:
        raise ParseError("nvidia-smi compute apps: the field list must include pid")
    return [_parse_app(line, keys, units, number) for number, line in enumerate(lines, start=1)]


def _canonical(name: str) -> str:
    name = name.strip()
    return _ALIASES.get(name, name)


def _is_no_process_notice(line: str) -> bool:
    # Some drivers print this instead of an empty result.
    return line.strip().lower().startswith("no running")


def _parse_app(line: str, keys: list[str], units: list[str | None], number: int) -> ComputeApp:
    cells = _fold_process_name(line, keys)
    if len(cells) != len(keys):
        raise ParseError(
            f"nvidia-smi compute apps row {number} has {len(cells)} columns, expected {len(keys)}: {describe(line)}"
        )
    values = {key: clean_cell(cell, unit) for key, cell, unit in zip(keys, cells, units, strict=True)}
    where = f"nvidia-smi compute apps row {number}"
    pid = _int(values.get("pid"), f"{where} pid")
    if pid is None or pid < 0:
        raise ParseError(f"{where}: no usable pid in {describe(line)}")
    return ComputeApp(
        pid=pid,
        process_name=values.get("process_name") or "",
        gpu_uuid=values.get("gpu_uuid"),
        used_memory_mib=_int(values.get("used_memory"), f"{where} used_memory"),
    )


def _fold_process_name(line: str, keys: list[str]) -> list[str]:
    raw = line.rstrip("\r\n").split(",")
    extra = len(raw) - len(keys)
    if extra > 0 and "process_name" in keys:
        at = keys.index("process_name")
        raw = [*raw[:at], ",".join(raw[at : at + extra + 1]), *raw[at + extra + 1 :]]
    return [cell.strip() for cell in raw]


def _int(value: str | None, where: str) -> int | None:
    try:
        return to_int(value)
    except ParseError:
        raise ParseError(f"{where}: expected a whole number, got {describe(value or '')}") from None
