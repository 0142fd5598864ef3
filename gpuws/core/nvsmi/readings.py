"""Readings of `nvidia-smi -q -x` that no working GPU can give: NaN or infinite values, numbers
outside what the quantity can be (a negative count, 250 % utilisation, a GPU at -300 C), a GPU
count that is not a count.

Such a value is not a reading of the card but a sign that the driver, the tool or something
between them is broken, so nothing concluded from that document can be called healthy:
`gpuws health` makes each one an inconclusive finding and `gpuws probe` prints it as a warning.
Both come here, so the two say the same.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from enum import StrEnum

from gpuws.core.nvsmi._values import describe, is_missing

# (path under <gpu>, lowest, highest, unit). Bounds are physical, not operating limits: a card
# at 95 C is hot but real; one at 900 C or -300 C is a broken reading.
GPU_READINGS: tuple[tuple[str, float, float, str], ...] = (
    ("temperature/gpu_temp", -60.0, 200.0, "C"),
    ("temperature/memory_temp", -60.0, 200.0, "C"),
    ("gpu_power_readings/power_draw", 0.0, 10_000.0, "W"),
    ("gpu_power_readings/average_power_draw", 0.0, 10_000.0, "W"),
    ("gpu_power_readings/instant_power_draw", 0.0, 10_000.0, "W"),
    ("gpu_power_readings/current_power_limit", 0.0, 10_000.0, "W"),
    ("gpu_power_readings/enforced_power_limit", 0.0, 10_000.0, "W"),
    ("gpu_power_readings/default_power_limit", 0.0, 10_000.0, "W"),
    ("power_readings/power_draw", 0.0, 10_000.0, "W"),
    ("power_readings/power_limit", 0.0, 10_000.0, "W"),
    ("power_readings/enforced_power_limit", 0.0, 10_000.0, "W"),
    ("power_readings/default_power_limit", 0.0, 10_000.0, "W"),
    ("utilization/gpu_util", 0.0, 100.0, "%"),
    ("utilization/memory_util", 0.0, 100.0, "%"),
    ("fb_memory_usage/total", 0.0, 2.0**40, "MiB"),
)
# Anything that reads as a number, NaN and infinity included, so that they can be named.
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|nan|inf(?:inity)?))\s*(\S+)?\s*$",
                     re.IGNORECASE)


@dataclass(frozen=True)
class BadReading:
    """One reading no GPU can give: where it is, what it said, and why it cannot be."""

    gpu: int | None  # position of the <gpu> in the document; None for a document-wide field
    field: str
    value: str
    why: str

    def __str__(self) -> str:
        where = f"GPU {self.gpu} " if self.gpu is not None else ""
        return f"{where}{self.field} = {describe(self.value)}: {self.why}"


def check_number(value: str | None, low: float, high: float, unit: str) -> str | None:
    """Why `value` (as nvidia-smi writes it, e.g. "41 C") is impossible, or None when it is a
    plausible reading or missing ("N/A")."""
    if value is None or is_missing(value):
        return None
    match = _NUMBER.match(value)
    if match is None or (match.group(2) is not None and match.group(2) != unit):
        return f"not a number of {unit}" if unit else "not a number"
    number = float(match.group(1))
    if math.isnan(number):
        return "not a number (NaN)"
    if math.isinf(number):
        return "infinite"
    if number < low or number > high:
        return f"impossible (outside {low:g} to {high:g}{' ' + unit if unit else ''})"
    return None


# nvidia-smi writes "Unknown Error" where NVML failed to read a value. One such field can be a
# quirk of a driver; several mean the driver cannot read this GPU, and nothing read from it is
# to be called healthy.
UNKNOWN_ERROR = "Unknown Error"
UNKNOWN_ERRORS_UNREADABLE = 3


def bad_gpu_readings(gpu: ET.Element, position: int) -> list[BadReading]:
    """The impossible readings of one `<gpu>` element, and its "Unknown Error" fields when there
    are several."""
    out = []
    for path, low, high, unit in GPU_READINGS:
        node = gpu.find(path)
        if node is None or node.text is None:
            continue
        why = check_number(node.text, low, high, unit)
        if why is not None:
            out.append(BadReading(position, path, node.text.strip(), why))
    unknown = [path for path, node in _leaves(gpu, "") if (node.text or "").strip().lower() == UNKNOWN_ERROR.lower()]
    if len(unknown) >= UNKNOWN_ERRORS_UNREADABLE:
        out += [BadReading(position, path, UNKNOWN_ERROR, "the driver could not read it") for path in unknown]
    return out


def _leaves(node: ET.Element, path: str) -> list[tuple[str, ET.Element]]:
    """(path under the <gpu>, element) of every element without children, in document order."""
    children = list(node)
    if not children:
        return [(path, node)] if path else []
    return [leaf for child in children for leaf in _leaves(child, f"{path}/{child.tag}" if path else child.tag)]


def bad_document_readings(root: ET.Element) -> list[BadReading]:
    """Document-wide impossible readings: an `attached_gpus` that is not a count. (It may well
    differ from the number of `<gpu>` elements: `nvidia-smi -q -x -i 0` lists one of four.)"""
    node = root.find("attached_gpus")
    if node is None or node.text is None or is_missing(node.text):
        return []
    text = node.text.strip()
    if not re.fullmatch(r"\d{1,6}", text):
        why = check_number(text, 0, 1e6, "") or "not a whole number"
        return [BadReading(None, "attached_gpus", text, why)]
    return []


class GoneMarker(StrEnum):
    """What nvidia-smi writes in place of a GPU's readings when the driver has lost the GPU (it
    fell off the bus: XID 79) or the GPU needs a reset before it answers again. Not a missing
    value: the GPU is there and broken, so health calls it unhealthy and probe warns."""

    LOST = "GPU is lost"
    RESET = "GPU requires reset"


@dataclass(frozen=True)
class GoneGpu:
    """A GPU nvidia-smi answers with "GPU is lost" or "GPU requires reset" instead of readings."""

    gpu: int  # position of the <gpu> in the document
    marker: GoneMarker
    fields: tuple[str, ...]  # the paths under <gpu> that say it, in document order

    @property
    def meaning(self) -> str:
        """What the marker means for the user, in words."""
        if self.marker is GoneMarker.LOST:
            return ("the driver has lost this GPU (fallen off the bus, as XID 79 reports): it needs a reset, "
                    "usually a reboot of the host")
        return "the GPU needs a reset before it answers again (nvidia-smi -r, or a reboot of the host)"

    def __str__(self) -> str:
        shown = ", ".join(self.fields[:3]) + (f" and {len(self.fields) - 3} more" if len(self.fields) > 3 else "")
        return f"GPU {self.gpu}: nvidia-smi answers {self.marker.value!r} for {len(self.fields)} readings ({shown})"


def gone_gpu(gpu: ET.Element, position: int) -> GoneGpu | None:
    """Whether nvidia-smi answers this `<gpu>`'s readings with a "lost" or "requires reset" marker."""
    found: dict[GoneMarker, list[str]] = {}
    for path, node in _leaves(gpu, ""):
        text = (node.text or "").strip().lower()
        marker = next((m for m in GoneMarker if text == m.value.lower()), None)
        if marker is not None:
            found.setdefault(marker, []).append(path)
    if not found:
        return None
    # "lost" outranks "requires reset": a lost GPU needs at least the reset.
    marker = next(m for m in GoneMarker if m in found)
    return GoneGpu(position, marker, tuple(found[marker]))


def gone_gpus(root: ET.Element) -> list[GoneGpu]:
    """Every GPU of a parsed `nvidia-smi -q -x` document that nvidia-smi calls lost or in need of a reset."""
    return [g for position, node in enumerate(root.findall("gpu")) if (g := gone_gpu(node, position)) is not None]


def bad_readings(root: ET.Element) -> list[BadReading]:
    """Every impossible reading of a parsed `nvidia-smi -q -x` document, document-wide first."""
    out = bad_document_readings(root)
    for position, gpu in enumerate(root.findall("gpu")):
        out.extend(bad_gpu_readings(gpu, position))
    return out
