"""What a passive health check reads from a host, parsed: per-GPU facts from `nvidia-smi -q -x`,
NVLink counters from `nvidia-smi nvlink -e` / `-s`, and XIDs from the kernel log.

Every value the driver does not report is None (never 0): a missing field is never a pass.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from gpuws.core.errors import ParseError
from gpuws.core.nvsmi._values import clean_text, parse_link_width, parse_quantity
from gpuws.core.nvsmi._xmldoc import parse_xml_document
from gpuws.core.nvsmi.readings import (
    BadReading,
    GoneGpu,
    bad_document_readings,
    bad_gpu_readings,
    check_number,
    gone_gpu,
)
from gpuws.core.nvsmi.xml_inventory import CUDA_VERSION_PATHS, DRIVER_VERSION_PATHS
from gpuws.core.simulation import SIM_XML_MARKER

_WATTS = frozenset({"W"})
_NO_UNIT: frozenset[str] = frozenset()


@dataclass
class GpuFacts:
    """One GPU's health-relevant fields from `nvidia-smi -q -x`."""

    index: int
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    persistence_mode: str | None = None
    mig_mode: str | None = None
    recovery_action: str | None = None  # gpu_recovery_action: None / Reset / Reboot / Drain P2P / Drain and Reset
    # Before gpu_recovery_action (drivers ~535-550, DTD v12): gpu_reset_status/reset_required and
    # drain_and_reset_recommended, Yes / No (later drivers say "deprecated" there: None).
    reset_required: bool | None = None
    drain_and_reset_recommended: bool | None = None
    sram_threshold_exceeded: bool | None = None  # ecc_errors/aggregate: SRAM errors past the field-diag threshold
    ecc_mode: str | None = None
    ecc_volatile_uncorrectable: int | None = None
    ecc_aggregate_uncorrectable: int | None = None
    ecc_volatile_correctable: int | None = None
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retirement_pending: bool | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    remapped_unc: int | None = None
    remapped_corr: int | None = None
    repair_pending: list[str] = field(default_factory=list)  # channel / TPC repair pending (driver 570+)
    unrepairable_memory: bool | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max_system: int | None = None  # the most card and platform can train at together (max_link_gen)
    pcie_gen_max_device: int | None = None  # what the card itself can do (max_device_link_gen)
    pcie_gen_max_host: int | None = None  # the host's root port (max_host_link_gen; not always right)
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replays: int | None = None
    performance_state: str | None = None
    utilization_pct: float | None = None
    throttle_active: list[str] = field(default_factory=list)
    throttle_reported: bool = False  # a clocks_event_reasons / clocks_throttle_reasons section was there
    power_limit_w: float | None = None
    power_default_w: float | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    # fabric/health (driver 550+ on NVSwitch and multi-node NVLink systems): "summary" (Healthy /
    # Unhealthy / Limited Capacity), "bandwidth", "route_unhealthy", ... as the driver writes them.
    fabric_health: dict[str, str] = field(default_factory=dict)
    gone: GoneGpu | None = None  # nvidia-smi answers "GPU is lost" / "GPU requires reset" for its readings
    c2c_mode: str | None = None  # "Enabled" on Grace Hopper / Grace Blackwell (NVLink-C2C to a Grace CPU)
    bad_readings: list[BadReading] = field(default_factory=list)  # values no GPU can give (NaN, -5 errors, ...)


@dataclass
class SmiDocument:
    """The whole `nvidia-smi -q -x` document."""

    driver_version: str | None
    cuda_version: str | None
    gpus: list[GpuFacts]
    simulated: bool
    bad_readings: list[BadReading] = field(default_factory=list)  # document-wide (attached_gpus)


def _t(node: ET.Element, path: str) -> str | None:
    found = node.find(path)
    return None if found is None else clean_text(found.text)


def _first(node: ET.Element, *paths: str) -> str | None:
    for path in paths:
        value = _t(node, path)
        if value is not None:
            return value
    return None


class _Numbers:
    """Reads one GPU's numbers; a value no GPU can give (NaN, infinite, negative, not a number)
    is None and is kept in `bad`, so that the health checks call the GPU inconclusive, never
    healthy, and the rest of the document is still read."""

    def __init__(self, node: ET.Element, position: int) -> None:
        self.node = node
        self.position = position
        self.bad: list[BadReading] = []

    def raw(self, *paths: str) -> tuple[str, str | None]:
        """(path, text) of the first of `paths` that has a value; (first path, None) otherwise."""
        for path in paths:
            found = self.node.find(path)
            if found is not None and clean_text(found.text) is not None:
                return path, found.text
        return paths[0], None

    def number(self, units: frozenset[str], *paths: str, high: float = 2.0**53) -> float | None:
        """The first of `paths` with a value, as a number in `units` (or bare) from 0 to `high`."""
        path, raw = self.raw(*paths)
        if raw is None:
            return None
        try:
            value = parse_quantity(raw, units, path)
        except ParseError:
            value = None
        why = check_number(raw, 0.0, high, next(iter(units), ""))
        if why is None and value is None:
            why = "not a number"
        if why is not None:
            self.bad.append(BadReading(self.position, path, raw.strip(), why))
            return None
        return value

    def count(self, *paths: str) -> int | None:
        """A whole, non-negative count."""
        value = self.number(_NO_UNIT, *paths)
        if value is not None and not value.is_integer():
            path, raw = self.raw(*paths)
            self.bad.append(BadReading(self.position, path, (raw or "").strip(), "not a whole number"))
            return None
        return None if value is None else int(value)


def _yes(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("yes", "true", "active", "enabled")


def _wanted(path: str, wanted: str) -> bool:
    unc = "uncorrectable" in path or "double_bit" in path
    corr = ("correctable" in path or "single_bit" in path) and not unc
    return "threshold" not in path and ((wanted == "uncorrectable" and unc) or (wanted == "correctable" and corr))


def _sum_counts(section: ET.Element | None, wanted: str, numbers: _Numbers, base: str) -> int | None:
    """The `wanted` ("uncorrectable" or "correctable") ECC count of a volatile or aggregate
    section, on every schema; None when the driver reports none of them.

    Ampere and newer list one count per memory (`sram_uncorrectable_parity`, `dram_uncorrectable`,
    ...): they are added. Before Ampere each kind (`single_bit`, `double_bit`) lists a count per
    location (`device_memory`, `register_file`, `l1_cache`, ...) and their `<total>`: the total is
    the count, never added to its own parts (which double it); the parts are added only when the
    driver gives no total.
    """
    if section is None:
        return None

    def walk(node: ET.Element, path: str) -> int | None:
        children = list(node)
        if not children:
            return numbers.count(path.removeprefix("gpu/")) if _wanted(path, wanted) else None
        total = node.find("total")
        if total is not None and _wanted(f"{path}/total", wanted):
            counted = walk(total, f"{path}/total")
            if counted is not None:
                return counted
        parts = [walk(child, f"{path}/{child.tag}") for child in children if child.tag != "total"]
        known = [p for p in parts if p is not None]
        return sum(known) if known else None

    return walk(section, f"gpu/{base}")


def _gpu(node: ET.Element, index: int) -> GpuFacts:
    where = f"nvidia-smi XML gpu {index}"
    n = _Numbers(node, index)
    f = GpuFacts(index=index)
    f.name = _t(node, "product_name")
    f.uuid = _t(node, "uuid")
    f.serial = _t(node, "serial")
    f.pci_bus_id = clean_text(node.get("id")) or _t(node, "pci/pci_bus_id")
    f.persistence_mode = _t(node, "persistence_mode")
    f.mig_mode = _t(node, "mig_mode/current_mig")
    f.recovery_action = _t(node, "gpu_recovery_action")
    f.reset_required = _yes(_t(node, "gpu_reset_status/reset_required"))
    f.drain_and_reset_recommended = _yes(_t(node, "gpu_reset_status/drain_and_reset_recommended"))
    f.sram_threshold_exceeded = _yes(_t(node, "ecc_errors/aggregate/sram_threshold_exceeded"))
    f.ecc_mode = _t(node, "ecc_mode/current_ecc")
    volatile, aggregate = "ecc_errors/volatile", "ecc_errors/aggregate"
    f.ecc_volatile_uncorrectable = _sum_counts(node.find(volatile), "uncorrectable", n, volatile)
    f.ecc_aggregate_uncorrectable = _sum_counts(node.find(aggregate), "uncorrectable", n, aggregate)
    f.ecc_volatile_correctable = _sum_counts(node.find(volatile), "correctable", n, volatile)
    f.retired_sbe = n.count("retired_pages/multiple_single_bit_retirement/retired_count")
    f.retired_dbe = n.count("retired_pages/double_bit_retirement/retired_count")
    f.retirement_pending = _yes(_first(node, "retired_pages/pending_retirement", "retired_pages/pending_blacklist"))
    f.remap_pending = _yes(_t(node, "remapped_rows/remapped_row_pending"))
    f.remap_failure = _yes(_t(node, "remapped_rows/remapped_row_failure"))
    f.remapped_unc = n.count("remapped_rows/remapped_row_unc")
    f.remapped_corr = n.count("remapped_rows/remapped_row_corr")
    f.repair_pending = [kind for kind in ("channel", "tpc") if _yes(_t(node, f"ecc_errors/{kind}_repair_pending"))]
    f.unrepairable_memory = _yes(_t(node, "ecc_errors/unrepairable_memory"))
    link = "pci/pci_gpu_link_info"
    f.pcie_gen_current = n.count(f"{link}/pcie_gen/current_link_gen")
    f.pcie_gen_max_system = n.count(f"{link}/pcie_gen/max_link_gen")
    f.pcie_gen_max_device = n.count(f"{link}/pcie_gen/max_device_link_gen")
    f.pcie_gen_max_host = n.count(f"{link}/pcie_gen/max_host_link_gen")
    f.pcie_width_current = _width(n, f"{link}/link_widths/current_link_width", where)
    f.pcie_width_max = _width(n, f"{link}/link_widths/max_link_width", where)
    f.pcie_replays = n.count("pci/replay_counter")
    f.performance_state = _t(node, "performance_state")
    f.utilization_pct = n.number(frozenset({"%"}), "utilization/gpu_util", high=100.0)
    for group in ("clocks_event_reasons", "clocks_throttle_reasons"):
        section = node.find(group)
        if section is not None:
            f.throttle_reported = True
            for child in section:
                if _yes(clean_text(child.text)):
                    f.throttle_active.append(re.sub(r"^clocks_(event|throttle)_reason_", "", child.tag))
            break
    for group in ("gpu_power_readings", "power_readings"):
        if node.find(group) is None:
            continue
        f.power_limit_w = n.number(_WATTS, f"{group}/current_power_limit", f"{group}/enforced_power_limit",
                                   f"{group}/power_limit")
        f.power_default_w = n.number(_WATTS, f"{group}/default_power_limit")
        break
    f.fabric_state = _t(node, "fabric/state")
    f.fabric_status = _t(node, "fabric/status")
    for item in node.findall("fabric/health/*"):
        value = clean_text(item.text)
        if value is not None and len(item) == 0:
            f.fabric_health[item.tag] = value
    f.gone = gone_gpu(node, index)
    f.c2c_mode = _t(node, "c2c_mode")
    # Readings no check above uses (temperature, power draw, ...), judged by the same rule.
    seen = {(b.field, b.value) for b in n.bad}
    f.bad_readings = n.bad + [b for b in bad_gpu_readings(node, index) if (b.field, b.value) not in seen]
    return f


def _width(n: _Numbers, path: str, where: str) -> int | None:
    raw = n.raw(path)[1]
    try:
        width = parse_link_width(raw, where)
    except ParseError:
        n.bad.append(BadReading(n.position, path, (raw or "").strip(), "not a PCIe link width"))
        return None
    if width is not None and not 1 <= width <= 64:
        n.bad.append(BadReading(n.position, path, (raw or "").strip(), "impossible PCIe link width"))
        return None
    return width


def parse_smi_document(text: str) -> SmiDocument:
    """`nvidia-smi -q -x` as health facts; a ParseError naming the field for anything unreadable."""
    doc = parse_xml_document(text)
    root = doc.root
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"nvidia-smi XML: root element is <{root.tag[:40]}>, not <nvidia_smi_log>")
    gpus = [_gpu(node, i) for i, node in enumerate(root.findall("gpu"))]
    return SmiDocument(driver_version=_first(root, *DRIVER_VERSION_PATHS),
                       cuda_version=_first(root, *CUDA_VERSION_PATHS),
                       gpus=gpus, simulated=any(SIM_XML_MARKER in c for c in doc.comments),
                       bad_readings=bad_document_readings(root))


@dataclass
class NvlinkCounters:
    """One GPU's NVLink error counters summed over its links, and its links' state."""

    errors: dict[str, int] = field(default_factory=dict)  # "CRC Errors" -> total over links
    per_link: dict[int, dict[str, int]] = field(default_factory=dict)
    links_active: int = 0
    links_inactive: list[int] = field(default_factory=list)


_GPU_HEAD = re.compile(r"^GPU (\d+): .*\(UUID: ([^)]+)\)")
_LINK_LINE = re.compile(r"^\s*Link (\d+): (.*)$")
_COUNTER = re.compile(r"([A-Za-z][A-Za-z ]*?(?:Errors|errors|events|discards))\s*:\s*(\d+)")


def parse_nvlink(errors_text: str, status_text: str = "") -> dict[str, NvlinkCounters]:
    """`nvidia-smi nvlink -e` (error counters) and `-s` (link speeds, `<inactive>`) by GPU UUID.

    Older drivers print one counter per line ("Link 0: Replay Errors: 0"); newer ones print
    several per link, comma-separated. Counters with "Errors", "events" or "discards" in the name
    are kept (Tx/Rx packet and byte counts are not errors).
    """
    out: dict[str, NvlinkCounters] = {}
    for text, is_status in ((errors_text, False), (status_text, True)):
        current: NvlinkCounters | None = None
        for line in text.splitlines():
            head = _GPU_HEAD.match(line.strip())
            if head:
                current = out.setdefault(head.group(2).strip(), NvlinkCounters())
                continue
            link = _LINK_LINE.match(line)
            if current is None or link is None:
                continue
            number, rest = int(link.group(1)), link.group(2)
            if is_status:
                if "inactive" in rest.lower():
                    current.links_inactive.append(number)
                else:
                    current.links_active += 1
                continue
            for name, value in _COUNTER.findall(rest):
                key = name.strip()
                if key.lower().startswith(("link recovery successful", "total link recovery")):
                    continue  # a successful recovery is the link working as designed
                current.per_link.setdefault(number, {})[key] = int(value)
                current.errors[key] = current.errors.get(key, 0) + int(value)
    return out
