"""Clock event ("throttle") reasons: decode NVML's bitmask and nvidia-smi's text fields.

NVML reports why clocks are below their maximum as a bitmask (`nvmlClocksEventReason*`, formerly
`nvmlClocksThrottleReason*`). The GPU-idle bit is not a throttle: an idle GPU drops its clocks on
purpose. It is therefore reported apart (`idle`), never among the throttle names, so an idle host
does not look throttled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuws.core.gpus.throttle import CLOCK_EVENT_BITS, GPU_IDLE

# Bit values from nvml.h (nvmlClocksEventReason*), from the GPU registry's one table.
GPU_IDLE_BIT = GPU_IDLE
REASON_BITS: tuple[tuple[int, str], ...] = tuple((bit, name) for bit, name in CLOCK_EVENT_BITS if bit != GPU_IDLE)
KNOWN_REASONS = frozenset(name for _, name in REASON_BITS)

# Reasons that mean "too hot" or "too much power": these raise alerts.
THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown"})
POWER_REASONS = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})

# nvidia-smi --query-gpu text fields, under both the old and the new prefix.
_FIELD_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")
_ACTIVE_TEXT = "active"


@dataclass(frozen=True)
class DecodedReasons:
    """Throttle reasons by name (idle kept apart) plus any unknown bits, for display."""

    reasons: tuple[str, ...]
    idle: bool
    unknown_bits: int = 0


def decode_mask(mask: int) -> DecodedReasons:
    """Decode an NVML clocks event/throttle reasons bitmask."""
    if mask < 0:
        raise ValueError(f"negative clock reason mask: {mask}")
    names = tuple(name for bit, name in REASON_BITS if mask & bit)
    known = GPU_IDLE_BIT
    for bit, _ in REASON_BITS:
        known |= bit
    return DecodedReasons(names, bool(mask & GPU_IDLE_BIT), mask & ~known)


def parse_mask(text: str) -> int | None:
    """Parse nvidia-smi's hex mask ("0x0000000000000001") or a decimal one; None when unusable."""
    value = text.strip()
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        return None


def decode_text_fields(row: Mapping[str, str | None]) -> DecodedReasons | None:
    """Decode the per-reason `clocks_event_reasons.<name>` / `clocks_throttle_reasons.<name>` fields.

    Values are "Active" / "Not Active"; None when the row has none of these fields.
    """
    seen = False
    idle = False
    names: list[str] = []
    for key, value in row.items():
        prefix = next((p for p in _FIELD_PREFIXES if key.startswith(p)), None)
        if prefix is None:
            continue
        reason = key[len(prefix) :]
        if reason not in KNOWN_REASONS and reason != "gpu_idle":
            continue  # "supported", "active" (the masks) and counters are not per-reason flags
        seen = True
        if value is None or value.strip().lower() != _ACTIVE_TEXT:
            continue
        if reason == "gpu_idle":
            idle = True
        elif reason not in names:
            names.append(reason)
    if not seen:
        return None
    order = {name: i for i, (_, name) in enumerate(REASON_BITS)}
    return DecodedReasons(tuple(sorted(names, key=order.__getitem__)), idle)
