"""Value cleaning shared by the nvidia-smi parsers: missing-value markers, units, hostile text.

nvidia-smi writes "no value" in several ways depending on driver generation and output format
(`N/A` in XML, `[N/A]` in CSV, `[Not Supported]`, `Requested functionality has been deprecated`,
...). All of them mean the same to us: the value is missing, which is `None`, never 0.
"""

from __future__ import annotations

import math
import re

from gpuws.core.errors import ParseError

# Compared case-insensitively after stripping the square brackets the CSV format adds.
_MISSING_MARKERS = frozenset(
    {
        "",
        "n/a",
        "na",
        "not supported",
        "not available",
        "requested functionality has been deprecated",
        "unknown error",
        "insufficient permissions",
        "gpu is lost",
        "gpu requires reset",
    }
)

# A hostile or broken host controls this text: its length is bounded here; it is escaped where shown.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_TEXT_LEN = 256

_QUANTITY = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/]+)?\s*$")


def is_missing(value: str | None) -> bool:
    """True when `value` is one of nvidia-smi's ways of saying "no value"."""
    if value is None:
        return True
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    return text.lower() in _MISSING_MARKERS


def clean_text(value: str | None) -> str | None:
    """The host's string as it is (outer whitespace stripped, length bounded); missing markers
    become None. Control, bidi and zero-width characters are kept, not dropped: JSON carries the
    real string (its encoding escapes them) and every terminal or window view shows it through
    `gpuws.core.terminal.printable`, which escapes them visibly."""
    if value is None or is_missing(value):
        return None
    return value.strip()[:MAX_TEXT_LEN] or None


def describe(value: str, limit: int = 60) -> str:
    """A short, quoted rendering of an offending value for an error message."""
    text = _CONTROL_CHARS.sub("?", value)
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)


def parse_quantity(value: str | None, units: frozenset[str], where: str) -> float | None:
    """Parse "300.00 W" / "1410 MHz" / "81920 MiB" / "4" into a number.

    `units` lists the accepted unit suffixes (case-sensitive, as nvidia-smi writes them); a bare
    number is always accepted. Missing markers give None; anything else is a ParseError naming
    `where`.
    """
    if value is None or is_missing(value):
        return None
    match = _QUANTITY.match(value)
    number = float(match.group(1)) if match is not None else math.nan
    # A digit string long enough to overflow becomes inf, which no reading is.
    if match is None or not math.isfinite(number) or (match.group(2) is not None and match.group(2) not in units):
        expected = "/".join(sorted(units)) or "no unit"
        raise ParseError(f"{where}: expected a number ({expected}), got {describe(value)}")
    return number


def parse_int_quantity(value: str | None, units: frozenset[str], where: str) -> int | None:
    """Like `parse_quantity`, for values that are whole numbers (MiB, MHz, counts)."""
    number = parse_quantity(value, units, where)
    if number is None:
        return None
    if not number.is_integer():
        raise ParseError(f"{where}: expected a whole number, got {describe(str(value))}")
    return int(number)


_LINK_WIDTH = re.compile(r"^\s*(?:x\s*(\d+)|(\d+)\s*x|(\d+))\s*$", re.IGNORECASE)


def parse_link_width(value: str | None, where: str) -> int | None:
    """PCIe link width as nvidia-smi writes it: "16x" (XML), "x16" or "16" -> 16."""
    if value is None or is_missing(value):
        return None
    match = _LINK_WIDTH.match(value)
    if match is None:
        raise ParseError(f"{where}: expected a PCIe link width such as '16x', got {describe(value)}")
    return int(next(g for g in match.groups() if g is not None))
