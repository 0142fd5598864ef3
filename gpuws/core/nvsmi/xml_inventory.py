"""`nvidia-smi -q -x` -> list[GpuInfo], across driver generations (DTD v10 to v13 and none).

Tag names moved between drivers (`power_readings` -> `gpu_power_readings`, `power_limit` ->
`current_power_limit`, a bare `virtualization_mode` -> `gpu_virtualization_mode/...`), so each
field is looked up under every name it has had. Values the driver does not report are None.
"""

from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import TypeVar

from gpuws.core.errors import ParseError
from gpuws.core.inventory import GpuInfo, MigDevice
from gpuws.core.nvsmi._values import clean_text, parse_int_quantity, parse_link_width, parse_quantity
from gpuws.core.nvsmi._xmldoc import parse_xml_document
from gpuws.core.nvsmi.mig_profiles import derive_mig_profile
from gpuws.core.nvsmi.readings import BadReading, GoneGpu, bad_readings, gone_gpus
from gpuws.core.simulation import SIM_XML_MARKER

ROOT_TAG = "nvidia_smi_log"
# Driver 615 writes kmd_version / cuda_umd_version beside driver_version / cuda_version, with a
# comment that the old names "will be removed in CUDA 14.0": read either.
DRIVER_VERSION_PATHS = ("driver_version", "kmd_version")
CUDA_VERSION_PATHS = ("cuda_version", "cuda_umd_version")
log = logging.getLogger(__name__)

_NO_UNIT: frozenset[str] = frozenset()
_MIB = frozenset({"MiB"})
_MHZ = frozenset({"MHz"})
_WATTS = frozenset({"W"})

# Most specific first: the enforced limit is what the card actually runs at.
_POWER_LIMIT_PATHS = (
    "gpu_power_readings/enforced_power_limit",
    "gpu_power_readings/current_power_limit",
    "gpu_power_readings/power_limit",
    "power_readings/enforced_power_limit",
    "power_readings/current_power_limit",
    "power_readings/power_limit",
)

# A vGPU guest sees its slice's profile as the product name: "GRID P4-1Q", "NVIDIA A100-4C",
# MIG-backed "GRID A100-1-5C". Physical cards end in a memory size ("A100-SXM4-80GB") instead.
_VGPU_PRODUCT = re.compile(r"^(?:GRID|NVIDIA)\s+\S+?-(?:\d+-)?\d+[ABCQ]$")
_VGPU_GUEST_MODE = "VGPU"


def is_simulated_xml(text: str) -> bool:
    """True iff the document carries the simulated host's marker comment.

    A comment is the one thing a real driver never writes, so a real host is never labelled
    simulated. Malformed XML is a ParseError.
    """
    document = parse_xml_document(text)
    return any(SIM_XML_MARKER in comment for comment in document.comments)


def impossible_readings(text: str) -> list[BadReading]:
    """The readings of the document no working GPU gives (gpuws.core.nvsmi.readings)."""
    return bad_readings(parse_xml_document(text).root)


def unanswered_gpus(text: str) -> list[GoneGpu]:
    """The GPUs of the document nvidia-smi answers with "GPU is lost" or "GPU requires reset"."""
    return gone_gpus(parse_xml_document(text).root)


def parse_nvidia_smi_xml(text: str) -> list[GpuInfo]:
    """Parse `nvidia-smi -q -x` output into one GpuInfo per `<gpu>`, in file order.

    `index` is the position in the file, which is nvidia-smi's own enumeration (what `-i N`
    takes); `minor_number` is the /dev/nvidiaN number and may differ. Raises ParseError.
    """
    root = parse_xml_document(text).root
    if root.tag != ROOT_TAG:
        raise ParseError(f"nvidia-smi XML: expected <{ROOT_TAG}> at the top, found <{clean_text(root.tag)}>")
    driver_version = _text(root, *DRIVER_VERSION_PATHS)
    cuda_version = _text(root, *CUDA_VERSION_PATHS)
    elements = root.findall("gpu")
    if not elements and _text(root, "attached_gpus") != "0":
        # A host without GPUs says <attached_gpus>0</attached_gpus>; a document that met no <gpu>
        # and does not say so (cut short, nested out of place, not nvidia-smi's) is not an empty host.
        raise ParseError("nvidia-smi XML: no <gpu> element, and <attached_gpus> does not say 0")
    return [
        _parse_gpu(element, position, driver_version, cuda_version)
        for position, element in enumerate(elements)
    ]


def _text(element: ET.Element, *paths: str) -> str | None:
    """The cleaned text of the first of `paths` that exists under `element` and has a value."""
    for path in paths:
        found = element.find(path)
        if found is not None:
            value = clean_text(found.text)
            if value is not None:
                return value
    return None


def _first_path(element: ET.Element, *paths: str) -> tuple[str, str | None]:
    """(path, raw text) of the first of `paths` present with a value; for number parsing."""
    for path in paths:
        found = element.find(path)
        if found is not None and clean_text(found.text) is not None:
            return path, found.text
    return paths[0], None


def _number(element: ET.Element, where: str, units: frozenset[str], *paths: str) -> float | None:
    path, raw = _first_path(element, *paths)
    return _unknown_if_bad(lambda: parse_quantity(raw, units, f"{where} {path}"))


def _integer(element: ET.Element, where: str, units: frozenset[str], *paths: str) -> int | None:
    path, raw = _first_path(element, *paths)
    return _unknown_if_bad(lambda: parse_int_quantity(raw, units, f"{where} {path}"))


_N = TypeVar("_N", int, float)


def _unknown_if_bad(parse: Callable[[], _N | None]) -> _N | None:
    """One odd field (`-16x`, `12 furlongs`, a negative size) is unknown; the rest of the
    inventory is kept. None of the quantities in an inventory can be negative."""
    try:
        value = parse()
    except ParseError as exc:
        log.info("inventory field left unknown: %s", exc)
        return None
    if value is not None and value < 0:
        log.info("inventory field left unknown: negative value %s", value)
        return None
    return value


def _parse_gpu(gpu: ET.Element, position: int, driver_version: str | None, cuda_version: str | None) -> GpuInfo:
    where = f"nvidia-smi XML gpu {position}:"
    name = _text(gpu, "product_name")
    if name is None:
        raise ParseError(f"{where} no product_name; this does not look like nvidia-smi -q -x output")
    memory_total = _integer(gpu, where, _MIB, "fb_memory_usage/total")
    virtualization_mode = _text(gpu, "gpu_virtualization_mode/virtualization_mode", "virtualization_mode")
    is_vgpu_slice = virtualization_mode == _VGPU_GUEST_MODE or bool(_VGPU_PRODUCT.match(name))
    link = "pci/pci_gpu_link_info"
    return GpuInfo(
        index=position,
        name=name,
        uuid=_text(gpu, "uuid"),
        pci_bus_id=_text(gpu, "pci/pci_bus_id") or clean_text(gpu.get("id")),
        memory_total_mib=memory_total,
        driver_version=driver_version,
        cuda_version=cuda_version,
        compute_capability=_text(gpu, "compute_cap", "cuda_compute_capability"),
        mig_mode=_text(gpu, "mig_mode/current_mig"),
        mig_mode_pending=_text(gpu, "mig_mode/pending_mig"),
        mig_devices=_parse_mig_devices(gpu, where, name, memory_total),
        virtualization_mode=virtualization_mode,
        vgpu_profile=name if is_vgpu_slice else None,
        is_vgpu_slice=is_vgpu_slice,
        pcie_gen_current=_integer(gpu, where, _NO_UNIT, f"{link}/pcie_gen/current_link_gen"),
        pcie_gen_max=_integer(gpu, where, _NO_UNIT, f"{link}/pcie_gen/max_link_gen"),
        pcie_width_current=_link_width(gpu, where, f"{link}/link_widths/current_link_width"),
        pcie_width_max=_link_width(gpu, where, f"{link}/link_widths/max_link_width"),
        power_limit_w=_number(gpu, where, _WATTS, *_POWER_LIMIT_PATHS),
        max_sm_clock_mhz=_integer(gpu, where, _MHZ, "max_clocks/sm_clock", "max_clocks/graphics_clock"),
        max_mem_clock_mhz=_integer(gpu, where, _MHZ, "max_clocks/mem_clock"),
        ecc_mode=_text(gpu, "ecc_mode/current_ecc"),
        persistence_mode=_text(gpu, "persistence_mode"),
        product_brand=_text(gpu, "product_brand"),
        serial=_text(gpu, "serial"),
    )


def _link_width(gpu: ET.Element, where: str, path: str) -> int | None:
    return _unknown_if_bad(lambda: parse_link_width(_first_path(gpu, path)[1], f"{where} {path}"))


def _parse_mig_devices(
    gpu: ET.Element, where: str, product_name: str, parent_memory_mib: int | None
) -> list[MigDevice]:
    devices = []
    for position, element in enumerate(gpu.findall("mig_devices/mig_device")):
        here = f"{where} mig_device {position}"
        index = _integer(element, here, _NO_UNIT, "index")
        sm_count = _integer(element, here, _NO_UNIT, "device_attributes/shared/multiprocessor_count")
        # Drivers from ~R550 call it "shared" FB memory in -q; accept both tag spellings.
        memory = _integer(element, here, _MIB, "fb_memory_usage/total", "shared_fb_memory_usage/total")
        ofa_count = _integer(element, here, _NO_UNIT, "device_attributes/shared/ofa_count")
        devices.append(
            MigDevice(
                index=position if index is None else index,
                gpu_instance_id=_integer(element, here, _NO_UNIT, "gpu_instance_id"),
                compute_instance_id=_integer(element, here, _NO_UNIT, "compute_instance_id"),
                profile=derive_mig_profile(product_name, parent_memory_mib, sm_count, memory, ofa_count),
                memory_total_mib=memory,
                sm_count=sm_count,
                uuid=_text(element, "uuid"),
            )
        )
    return devices
