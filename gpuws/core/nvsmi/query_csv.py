"""`nvidia-smi --query-*=... --format=csv[,noheader][,nounits]` -> one dict per row.

Keys are the query field names ("memory.used"; a header "memory.used [MiB]" loses its unit).
Values are strings with the unit removed ("81559 MiB" -> "81559", "45 %" -> "45"); every
missing marker (`[N/A]`, `N/A`, `[Not Supported]`, `[Requested functionality has been
deprecated]`, an empty cell) is None. Convert with `to_int` / `to_float`.

nvidia-smi separates cells with ", " and never quotes, so a cell containing a comma (only free
text such as a process name can) shifts the columns; that is a ParseError here, and
`compute_apps` handles its one free-text column itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from gpuws.core.errors import ParseError
from gpuws.core.nvsmi._values import clean_text, describe, is_missing

QueryRow = dict[str, str | None]

_HEADER_CELL = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)(?:\s+\[(?P<unit>[^\]]+)\])?$")

# Units nvidia-smi appends in CSV output without `nounits`. Only a number followed by one of
# these is stripped, so text such as a timestamp or "Single Bit ECC" is never cut.
_KNOWN_UNITS = frozenset({"MiB", "KiB", "GiB", "MB", "KB", "GB", "%", "W", "MHz", "C", "us", "ms", "s", "mV", "KB/s"})
_NUMBER_WITH_UNIT = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s+(\S+)$")


def parse_query_csv(text: str, fields: Sequence[str] | None = None) -> list[QueryRow]:
    """Parse a whole `--query-gpu` (or `--query-compute-apps`, ...) CSV output.

    Without `fields` the first non-blank line must be the header and names the keys. With
    `fields` (the list passed to `--query-...=`, for `noheader` output) those are the keys; a
    header line, if present anyway, is recognised and skipped. Raises ParseError.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if fields is None:
        if not lines:
            raise ParseError("nvidia-smi CSV is empty: expected a header line")
        keys, units = _parse_header(lines[0])
        body = lines[1:]
    else:
        keys, units = _check_fields(fields), [None] * len(fields)
        body = lines
    rows = []
    for number, line in enumerate(body, start=1):
        if fields is not None and number == 1 and _looks_like_header(line, keys):
            continue
        rows.append(_parse_row(line, keys, units, number))
    return rows


def parse_query_line(line: str, fields: Sequence[str]) -> QueryRow | None:
    """Parse one line of a streaming (`-l` / `-lms`) query, given the queried field list.

    Returns None for a blank line or a header line (a stream without `noheader` has one), so a
    reader can feed every line it receives. Raises ParseError for a malformed row.
    """
    if not line.strip():
        return None
    keys = _check_fields(fields)
    if _looks_like_header(line, keys):
        return None
    return _parse_row(line, keys, [None] * len(keys), None)


def to_float(value: str | None) -> float | None:
    """A cleaned CSV value as a float; None stays None. Raises ParseError for non-numbers."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    # float() also accepts "nan" and "inf", which no real reading is.
    if not math.isfinite(number):
        raise ParseError(f"nvidia-smi CSV: expected a number, got {describe(value)}")
    return number


def to_int(value: str | None) -> int | None:
    """A cleaned CSV value as an int ("81559", "0x1F", "45.0"); None stays None."""
    if value is None:
        return None
    text = value.strip()
    try:
        if text.lower().startswith("0x"):
            return int(text, 16)
        return int(text)
    except ValueError:
        number = to_float(text)
        if number is None or not number.is_integer():
            raise ParseError(f"nvidia-smi CSV: expected a whole number, got {describe(value)}") from None
        return int(number)


def split_cells(line: str) -> list[str]:
    """The stripped cells of one CSV line (nvidia-smi never quotes)."""
    return [cell.strip() for cell in line.rstrip("\r\n").split(",")]


def _check_fields(fields: Sequence[str]) -> list[str]:
    keys = [field.strip() for field in fields]
    if not keys or any(not key for key in keys):
        raise ParseError("nvidia-smi CSV: the field list is empty or has an empty name")
    return keys


def header_fields(line: str) -> tuple[list[str], list[str | None]] | None:
    """(names, units) when `line` is a CSV header such as "pid, used_gpu_memory [MiB]", else None."""
    keys: list[str] = []
    units: list[str | None] = []
    for cell in split_cells(line):
        match = _HEADER_CELL.match(cell)
        if match is None:
            return None
        keys.append(match.group("name"))
        units.append(match.group("unit"))
    return keys, units


def _parse_header(line: str) -> tuple[list[str], list[str | None]]:
    header = header_fields(line)
    if header is None:
        raise ParseError(f"nvidia-smi CSV: expected a header line of field names, got {describe(line)}")
    return header


def _looks_like_header(line: str, keys: Sequence[str]) -> bool:
    """A header repeats the field names; nvidia-smi renames a few in headers (gpu_util ->
    gpu_utilization), so half of them matching is enough, and no data row comes close."""
    cells = split_cells(line)
    if len(cells) != len(keys):
        return False
    matches = 0
    for cell, key in zip(cells, keys, strict=True):
        match = _HEADER_CELL.match(cell)
        if match is not None and match.group("name").lower() == key.lower():
            matches += 1
    return matches * 2 >= len(keys)


def _parse_row(line: str, keys: Sequence[str], units: Sequence[str | None], number: int | None) -> QueryRow:
    cells = split_cells(line)
    if len(cells) != len(keys):
        where = f"row {number}" if number is not None else "line"
        raise ParseError(f"nvidia-smi CSV {where} has {len(cells)} columns, expected {len(keys)}: {describe(line)}")
    return {key: clean_cell(cell, unit) for key, cell, unit in zip(keys, cells, units, strict=True)}


def clean_cell(cell: str, unit: str | None = None) -> str | None:
    """One cell's value: missing markers -> None, "45 %" -> "45"; `unit` is the header's unit."""
    if is_missing(cell):
        return None
    match = _NUMBER_WITH_UNIT.match(cell)
    if match is not None and (match.group(2) == unit or match.group(2) in _KNOWN_UNITS):
        return match.group(1)
    return clean_text(cell)
