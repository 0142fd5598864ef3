"""The nvidia-smi fallback: which `--query-gpu` fields to ask for and how a row becomes a sample.

Used when the host has no python3 or no working NVML. `nvidia-smi --query-gpu` cannot report
PCIe throughput or per-process memory, so those stay None. Field names are the ones every driver
from 418 to 590 accepts (`clocks_throttle_reasons.*` is still an alias of `clocks_event_reasons.*`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from gpuws.core.telemetry.sample import INT_FIELDS, SOURCE_NVIDIA_SMI, GpuSample
from gpuws.core.telemetry.throttle import decode_mask, decode_text_fields, parse_mask

# query field -> GpuSample attribute (numbers); order is the order asked for.
NUMERIC_FIELDS: Final[Mapping[str, str]] = {
    "utilization.gpu": "util_gpu_pct",
    "utilization.memory": "util_mem_pct",
    "memory.used": "mem_used_mib",
    "memory.total": "mem_total_mib",
    "temperature.gpu": "temp_c",
    "power.draw": "power_w",
    "power.limit": "power_limit_w",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.max.sm": "sm_clock_max_mhz",
    "clocks.current.memory": "mem_clock_mhz",
    "clocks.max.memory": "mem_clock_max_mhz",
    "pcie.link.gen.current": "pcie_gen_current",
    "pcie.link.gen.max": "pcie_gen_max",
    "pcie.link.width.current": "pcie_width_current",
    "pcie.link.width.max": "pcie_width_max",
    "fan.speed": "fan_pct",
    "ecc.errors.corrected.volatile.total": "ecc_errors_corrected",
    "ecc.errors.uncorrected.volatile.total": "ecc_errors_uncorrected",
    "utilization.encoder": "enc_util_pct",
    "utilization.decoder": "dec_util_pct",
}
INTEGER_ATTRS: Final = frozenset(INT_FIELDS)
THROTTLE_MASK_FIELD: Final = "clocks_throttle_reasons.active"
QUERY_FIELDS: Final[tuple[str, ...]] = ("index", "uuid", *NUMERIC_FIELDS, "pstate", THROTTLE_MASK_FIELD)

# Placeholders nvidia-smi prints instead of a value (with or without brackets).
_MISSING = re.compile(
    r"^\[?(n/a|not supported|unknown error|requested functionality has been deprecated"
    r"|insufficient permissions|gpu requires reset|no data)\]?$",
    re.I,
)
# A number optionally followed by nvidia-smi's unit (when `nounits` was not given): "81559 MiB".
_NUMBER = re.compile(r"^([-+]?\d+(?:\.\d+)?)(?:\s*(?:%|[KMG]i?B|W|MHz|C|us|ms|KB/s|MB/s))?$")
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


def invalid_field_in(message: str) -> str | None:
    """The field a driver refused ("Field "x" is not a valid field to query."), or None."""
    match = _INVALID_FIELD.search(message)
    return match.group(1) if match else None


def number(text: str | None) -> float | None:
    """A numeric query value, with or without its unit; None for N/A-style placeholders and junk."""
    if text is None:
        return None
    value = text.strip()
    if not value or _MISSING.match(value):
        return None
    match = _NUMBER.match(value)
    return float(match.group(1)) if match else None


def _text(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if not value or _MISSING.match(value) else value


def sample_from_query_row(
    row: Mapping[str, str | None], *, t: float, simulated: bool = False
) -> GpuSample | None:
    """Build a sample from one `--query-gpu` row keyed by field name (units already dropped from keys).

    Returns None when the row has no usable GPU index (a truncated line).
    """
    index = number(row.get("index"))
    if index is None or index < 0:
        return None
    sample = GpuSample(t=t, gpu=int(index), uuid=_text(row.get("uuid")), source=SOURCE_NVIDIA_SMI,
                       simulated=simulated)
    for query_field, attr in NUMERIC_FIELDS.items():
        value = number(row.get(query_field))
        if value is not None and attr in INTEGER_ATTRS:
            setattr(sample, attr, int(value))
        else:
            setattr(sample, attr, value)
    sample.pstate = _text(row.get("pstate"))
    decoded = None
    for mask_field in (THROTTLE_MASK_FIELD, "clocks_event_reasons.active"):
        raw = _text(row.get(mask_field))
        mask = parse_mask(raw) if raw is not None else None
        if mask is not None and mask >= 0:
            decoded = decode_mask(mask)
            break
    if decoded is None:
        decoded = decode_text_fields(row)
    if decoded is not None:
        sample.throttle_reasons = list(decoded.reasons)
        sample.idle = decoded.idle
    return sample

