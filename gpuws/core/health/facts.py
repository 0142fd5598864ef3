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
    pcie_gen_max_system: int | None = None  # what the slot / system allows (max_link_gen)
    pcie_gen_max_device: int | None = None  # what the card itself can do (max_device_link_gen)
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replays: int | None = None
    performance_state: str | None = None
    utilization_pct: float | None = None
    throttle_active: list[str] = field(default_factory=list)
    power_limit_w: float | None = None
    power_default_w: float | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None


@dataclass
class SmiDocument:
    """The whole `nvidia-smi -q -x` document."""

    driver_version: str | None
    cuda_version: str | None
    gpus: list[GpuFacts]
    simulated: bool


def _t(node: ET.Element, path: str) -> str | None:
    found = node.find(path)
    return None if found is None else clean_text(found.text)


def _first(node: ET.Element, *paths: str) -> str | None:
    for path in paths:
        value = _t(node, path)
        if value is not None:
            return value
    return None


def _int(node: ET.Element, where: str, *paths: str) -> int | None:
    value = parse_quantity(_first(node, *paths), _NO_UNIT, where)
    return None if value is None else int(value)


def _yes(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("yes", "true", "active", "enabled")


def _sum_counts(section: ET.Element | None, wanted: str, where: str) -> int | None:
    """Sum the numeric leaves of an ECC section whose tag path says `wanted`
    ("uncorrectable" or "correctable"); None when the driver reports none of them."""
    if section is None:
        return None
    total: int | None = None

    def walk(node: ET.Element, path: str) -> None:
        nonlocal total
        children = list(node)
        if not children:
            unc = "uncorrectable" in path or "double_bit" in path
            corr = ("correctable" in path or "single_bit" in path) and not unc
            if (wanted == "uncorrectable" and unc) or (wanted == "correctable" and corr):
                if "threshold" in path:
                    return
                value = parse_quantity(node.text, _NO_UNIT, f"{where}/{path}")
                if value is not None:
                    total = (total or 0) + int(value)
            return
        for child in children:
            walk(child, f"{path}/{child.tag}")

    walk(section, section.tag)
    return total


def _gpu(node: ET.Element, index: int) -> GpuFacts:
    where = f"nvidia-smi XML gpu {index}"
    f = GpuFacts(index=index)
    f.name = _t(node, "product_name")
    f.uuid = _t(node, "uuid")
    f.serial = _t(node, "serial")
    f.pci_bus_id = clean_text(node.get("id")) or _t(node, "pci/pci_bus_id")
    f.persistence_mode = _t(node, "persistence_mode")
    f.mig_mode = _t(node, "mig_mode/current_mig")
    f.recovery_action = _t(node, "gpu_recovery_action")
    f.ecc_mode = _t(node, "ecc_mode/current_ecc")
    f.ecc_volatile_uncorrectable = _sum_counts(node.find("ecc_errors/volatile"), "uncorrectable", where)
    f.ecc_aggregate_uncorrectable = _sum_counts(node.find("ecc_errors/aggregate"), "uncorrectable", where)
    f.ecc_volatile_correctable = _sum_counts(node.find("ecc_errors/volatile"), "correctable", where)
    f.retired_sbe = _int(node, where, "retired_pages/multiple_single_bit_retirement/retired_count")
    f.retired_dbe = _int(node, where, "retired_pages/double_bit_retirement/retired_count")
    f.retirement_pending = _yes(_first(node, "retired_pages/pending_retirement", "retired_pages/pending_blacklist"))
    f.remap_pending = _yes(_t(node, "remapped_rows/remapped_row_pending"))
    f.remap_failure = _yes(_t(node, "remapped_rows/remapped_row_failure"))
    f.remapped_unc = _int(node, where, "remapped_rows/remapped_row_unc")
    f.remapped_corr = _int(node, where, "remapped_rows/remapped_row_corr")
    f.repair_pending = [kind for kind in ("channel", "tpc") if _yes(_t(node, f"ecc_errors/{kind}_repair_pending"))]
    f.unrepairable_memory = _yes(_t(node, "ecc_errors/unrepairable_memory"))
    link = "pci/pci_gpu_link_info"
    f.pcie_gen_current = _int(node, where, f"{link}/pcie_gen/current_link_gen")
    f.pcie_gen_max_system = _int(node, where, f"{link}/pcie_gen/max_link_gen")
    f.pcie_gen_max_device = _int(node, where, f"{link}/pcie_gen/max_device_link_gen")
    f.pcie_width_current = parse_link_width(_t(node, f"{link}/link_widths/current_link_width"), where)
    f.pcie_width_max = parse_link_width(_t(node, f"{link}/link_widths/max_link_width"), where)
    f.pcie_replays = _int(node, where, "pci/replay_counter")
    f.performance_state = _t(node, "performance_state")
    f.utilization_pct = parse_quantity(_t(node, "utilization/gpu_util"), frozenset({"%"}), where)
    for group in ("clocks_event_reasons", "clocks_throttle_reasons"):
        section = node.find(group)
        if section is not None:
            for child in section:
                if _yes(clean_text(child.text)):
                    f.throttle_active.append(re.sub(r"^clocks_(event|throttle)_reason_", "", child.tag))
            break
    for group in ("gpu_power_readings", "power_readings"):
        if node.find(group) is None:
            continue
        f.power_limit_w = parse_quantity(_first(node, f"{group}/current_power_limit", f"{group}/enforced_power_limit",
                                                f"{group}/power_limit"), _WATTS, where)
        f.power_default_w = parse_quantity(_t(node, f"{group}/default_power_limit"), _WATTS, where)
        break
    f.fabric_state = _t(node, "fabric/state")
    f.fabric_status = _t(node, "fabric/status")
    return f


def parse_smi_document(text: str) -> SmiDocument:
    """`nvidia-smi -q -x` as health facts; a ParseError naming the field for anything unreadable."""
    doc = parse_xml_document(text)
    root = doc.root
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"nvidia-smi XML: root element is <{root.tag[:40]}>, not <nvidia_smi_log>")
    gpus = [_gpu(node, i) for i, node in enumerate(root.findall("gpu"))]
    return SmiDocument(driver_version=_t(root, "driver_version"), cuda_version=_t(root, "cuda_version"),
                       gpus=gpus, simulated=any(SIM_XML_MARKER in c for c in doc.comments))


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
