"""GPU models: product-name matching, PCI device ids, datasheet and MIG profile set, in one table.

Every part of gpuws that asks "which GPU is this?" goes through `variant_for_name` (or
`variant_for_pci_id`): the resize catalog, the inventory's MIG profile names, the benchmark
datasheets and the simulated host. PCI device ids are as `nvidia-smi -q` prints `pci_device_id`
(device id then vendor id 10DE), the form mig-parted's `device-filter` uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from gpuws.core.gpus.datasheets import DATASHEETS, Datasheet
from gpuws.core.gpus.profiles import AMPERE_ENGINES, HOPPER_ENGINES, MigProfileSpec, eight_slot_profiles


class MemorySource(StrEnum):
    """Where a model's MIG memory figures come from."""

    DRIVER = "driver"  # `mig -lgip` captures or NVIDIA's MIG user guide tables
    NOMINAL = "nominal"  # the size in the profile name; a host's own `-lgip` is preferred


@dataclass(frozen=True)
class MigGpu:
    """How one GPU model divides into MIG instances."""

    key: str  # "h100-80gb"
    display_name: str
    memory_gib: float  # the whole card, nominal
    profiles: tuple[MigProfileSpec, ...]
    sms_per_slice: int
    compute_slices: int = 7
    memory_slices: int = 8
    memory_source: MemorySource = MemorySource.DRIVER
    reference_price_per_hour: float = 0.0  # illustrative, for hosts without a price (the demo)


@dataclass(frozen=True)
class GpuVariant:
    """One product as the driver names it, with what the registry knows about it."""

    name: str  # "H100 SXM"
    pattern: str  # regex over the upper-cased, space-normalised driver product name
    pci_device_ids: tuple[str, ...] = ()  # "233010DE"
    datasheet: str | None = None  # key into DATASHEETS
    mig: str | None = None  # key into MIG_GPUS


_H100_SMS = (16, 26, 32, 60, 64, 132)
_A100_SMS = (14, 14, 28, 42, 56, 98)


def _nominal_mib(*gbs: int) -> tuple[int, int, int, int, int, int]:
    values = tuple(gb * 1024 for gb in gbs)
    assert len(values) == 6
    return values  # type: ignore[return-value]


MIG_GPUS: dict[str, MigGpu] = {
    g.key: g
    for g in (
        # MIG user guide, A100-SXM4-40GB `-lgip`: 4.75 / 9.62 / 9.62 / 19.50 / 19.50 / 39.25 GiB.
        MigGpu("a100-40gb", "A100 40GB", 40, eight_slot_profiles(
            ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
            (4864, 9856, 9856, 19968, 19968, 40192), _A100_SMS, AMPERE_ENGINES), 14,
            reference_price_per_hour=1.50),
        # MIG user guide, A100-SXM4-80GB: 9.50 / 19.50 / 19.50 / 39.25 / 39.25 / 79.25 GiB.
        MigGpu("a100-80gb", "A100 80GB", 80, eight_slot_profiles(
            ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            (9728, 19968, 19968, 40192, 40192, 81152), _A100_SMS, AMPERE_ENGINES), 14,
            reference_price_per_hour=2.00),
        # Real `-lgip` on an H100 NVL (fixtures/mig/h100-nvl-lgip-lgipp-cgi.txt).
        MigGpu("h100-nvl", "H100 NVL 94GB", 94, eight_slot_profiles(
            ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
            (11008, 22144, 22144, 47488, 47488, 95360), _H100_SMS, HOPPER_ENGINES), 16,
            reference_price_per_hour=3.50),
        # Real `-lgip` on an H100 SXM5 80GB (fixtures/mig/h100-sxm5-lgip.txt).
        MigGpu("h100-80gb", "H100 80GB", 80, eight_slot_profiles(
            ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            (9984, 20096, 20096, 40448, 40448, 81152), _H100_SMS, HOPPER_ENGINES), 16,
            reference_price_per_hour=3.00),
        # No capture: nominal sizes (the profile names), SMs/engines as the H100.
        MigGpu("h200-141gb", "H200 141GB", 141, eight_slot_profiles(
            ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
            _nominal_mib(18, 35, 35, 71, 71, 141), _H100_SMS, HOPPER_ENGINES), 16,
            memory_source=MemorySource.NOMINAL, reference_price_per_hour=4.00),
        # No capture: nominal sizes; SM and engine counts unpublished here.
        MigGpu("b200", "B200 180GB", 180, eight_slot_profiles(
            ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
            _nominal_mib(23, 45, 45, 90, 90, 180), None, None), 18,
            memory_source=MemorySource.NOMINAL, reference_price_per_hour=6.00),
        # A30: 4 compute and 4 memory slices (1g.6gb, 2g.12gb, 4g.24gb). Its profile table is not
        # in the resize catalog (which plans over 7 compute / 8 memory slices); the inventory uses
        # the slicing to name MIG devices.
        MigGpu("a30-24gb", "A30 24GB", 24, (), 14, compute_slices=4, memory_slices=4,
               memory_source=MemorySource.NOMINAL),
    )
}

# Most specific first: the first pattern that matches a product name decides the variant.
VARIANTS: tuple[GpuVariant, ...] = (
    GpuVariant("B200", r"\bB200\b", ("290110DE",), "B200", "b200"),
    GpuVariant("H200 NVL", r"\bH200\b.*\bNVL\b", ("233B10DE",), "H200 NVL", "h200-141gb"),
    GpuVariant("H200", r"\bH200\b", ("233510DE",), "H200", "h200-141gb"),
    GpuVariant("H100 NVL", r"\bH100\b.*\bNVL\b", ("232110DE",), "H100 NVL", "h100-nvl"),
    GpuVariant("H800 NVL", r"\bH800\b.*\bNVL\b", ("233A10DE",), None, "h100-nvl"),
    GpuVariant("H100 PCIe", r"\bH100\b.*\bPCIE\b", ("233110DE",), "H100 PCIe", "h100-80gb"),
    GpuVariant("H100 SXM", r"\bH100\b.*(SXM|HBM3)", ("233010DE",), "H100 SXM", "h100-80gb"),
    GpuVariant("H100 80GB", r"\bH100\b.*80\s*GB", (), None, "h100-80gb"),
    GpuVariant("H800", r"\bH800\b", ("232210DE", "232410DE"), None, "h100-80gb"),
    GpuVariant("A100 80GB SXM", r"\bA100\b.*SXM.*80\s*GB", ("20B210DE",), "A100 80GB SXM", "a100-80gb"),
    GpuVariant("A100 40GB SXM", r"\bA100\b.*SXM", ("20B010DE",), "A100 40GB SXM", "a100-40gb"),
    GpuVariant("A100 80GB PCIe", r"\bA100\b.*80\s*GB", ("20B510DE",), "A100 80GB PCIe", "a100-80gb"),
    GpuVariant("A100 40GB PCIe", r"\bA100\b.*PCIE", ("20B110DE", "20F110DE"), "A100 40GB PCIe", "a100-40gb"),
    GpuVariant("A100 40GB", r"\bA100\b.*40\s*GB", (), None, "a100-40gb"),
    GpuVariant("A800 80GB", r"\bA800\b.*80\s*GB", ("20F310DE", "20F510DE"), None, "a100-80gb"),
    GpuVariant("A800 40GB", r"\bA800\b", ("20F610DE",), None, "a100-40gb"),
    GpuVariant("A30", r"\bA30\b", ("20B710DE",), None, "a30-24gb"),
    GpuVariant("L40S", r"\bL40S\b", ("26B910DE",), "L40S"),
    GpuVariant("L4", r"\bL4\b", ("27B810DE",), "L4"),
    GpuVariant("A10G", r"\bA10G\b", ("223710DE",), "A10G"),
    GpuVariant("A10", r"\bA10\b", ("223610DE",), "A10"),
    GpuVariant("T4", r"\bT4\b", ("1EB810DE",), "T4"),
    GpuVariant("V100 SXM2", r"\bV100\b.*SXM", (), "V100 SXM2"),
    GpuVariant("V100 PCIe", r"\bV100\b.*PCIE", (), "V100 PCIe"),
    GpuVariant("RTX 4090", r"\bRTX\s*4090\b", ("268410DE",), "RTX 4090"),
    GpuVariant("RTX 6000 Ada", r"\bRTX\s*6000\s+ADA\b", ("26B110DE",), "RTX 6000 Ada"),
)
_COMPILED = tuple((re.compile(v.pattern), v) for v in VARIANTS)

# vGPU guest profiles are named like "GRID A100-4C" or "NVIDIA A100-20C": a time slice of a card,
# never matched to a full card's datasheet or MIG table.
_VGPU_RE = re.compile(r"\bGRID\b|-\d+[ABCQ]\b", re.IGNORECASE)


def is_vgpu_name(name: str) -> bool:
    """True for a vGPU guest device name (a slice of a card)."""
    return bool(_VGPU_RE.search(name))


def variant_for_name(product_name: str) -> GpuVariant | None:
    """The registry entry for a driver product name ("NVIDIA H100 80GB HBM3"), or None."""
    if is_vgpu_name(product_name):
        return None
    text = " ".join(product_name.upper().replace("_", " ").replace("-", " ").split())
    for pattern, variant in _COMPILED:
        if pattern.search(text):
            return variant
    return None


def normalise_pci_id(text: str) -> str:
    """"0x233010DE" / "233010de" -> "233010DE" (mig-parted and nvidia-smi write both)."""
    return text.strip().upper().removeprefix("0X")


def variant_for_pci_id(pci_device_id: str) -> GpuVariant | None:
    """The registry entry for a PCI device id such as "0x233010DE", or None."""
    wanted = normalise_pci_id(pci_device_id)
    return next((v for v in VARIANTS if wanted in v.pci_device_ids), None)


def mig_gpu_for_name(product_name: str) -> MigGpu | None:
    """The MIG slicing of the GPU named `product_name`, or None for a non-MIG or unknown GPU."""
    variant = variant_for_name(product_name)
    return MIG_GPUS[variant.mig] if variant and variant.mig else None


def datasheet_for_variant(variant: GpuVariant | None) -> Datasheet | None:
    """The datasheet of a variant, if the registry has one."""
    return DATASHEETS.get(variant.datasheet) if variant and variant.datasheet else None
