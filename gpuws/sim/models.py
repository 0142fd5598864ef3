"""The GPU models the simulated host can have, with the specs their real counterparts report.

Figures the driver reports come from real `nvidia-smi` output (see tests/fixtures/real and its
README); what the GPU registry (`gpuws.core.gpus`) knows about a product (its PCI device id, MIG
profiles, PCIe link and ECC from the datasheet) is read from there by product name, never copied.
A `--gpus` spec such as "h100,a100,l40s,vgpu" or "2xh100" picks them; "l4" is a whole NVIDIA L4 and
"l4/8", "l4/4", "l4/2" the vGPU fractions of one that an AWS G6f guest sees.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuws.core.errors import RefusedInput
from gpuws.core.gpus.datasheets import DATASHEETS
from gpuws.core.gpus.models import MIG_GPUS, variant_for_name
from gpuws.core.gpus.profiles import MigProfileSpec

DEFAULT_GPU_SPEC = "h100,a100,l40s,vgpu"
DRIVER_VERSION = "590.48.01"
CUDA_VERSION = "13.1"
MAX_SIM_GPUS = 16


class SimSpecError(RefusedInput):
    """A `--gpus` spec names an unknown model or is malformed."""


# The simulator's MIG profiles are the registry's (`core/gpus`): the same rows `mig -lgip` prints.
MigProfile = MigProfileSpec


@dataclass(frozen=True)
class GpuModel:
    """Static facts about one GPU model, as its driver reports them."""

    key: str  # the name used in `--gpus` specs
    name: str  # product_name
    brand: str
    architecture: str
    memory_total_mib: int
    memory_reserved_mib: int
    bar1_total_mib: int
    power_limit_w: float
    power_min_w: float
    power_idle_w: float
    max_sm_clock_mhz: int
    max_mem_clock_mhz: int
    idle_sm_clock_mhz: int
    idle_mem_clock_mhz: int
    max_video_clock_mhz: int
    pcie_gen_idle: int  # data-center cards keep the link up; desktop-class ones drop to Gen1
    compute_cap: str
    pci_sub_system_id: str
    vbios_version: str
    idle_temp_c: float
    full_load_temp_c: float
    slowdown_temp_c: int
    shutdown_temp_c: int
    max_operating_temp_c: int
    idle_pstate: str
    has_fan: bool = False  # passively cooled data-center cards report fan speed N/A
    ecc: bool = True
    mig_profiles: tuple[MigProfile, ...] = ()
    pci_device_id: str = ""  # as `nvidia-smi -q` prints it, without 0x
    pcie_gen_max: int = 0
    pcie_width_max: int = 16
    virtualization_mode: str = "None"
    vgpu_profile: str | None = None  # product name of a vGPU guest device, e.g. "GRID A100-10C"
    # What a licensed vGPU guest's `nvidia-smi -q` names as its licensed product: C-series
    # (compute) profiles are Virtual Compute Server, Q-series RTX Virtual Workstation.
    vgpu_license: str = "NVIDIA Virtual Compute Server"

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    def mig_profile(self, key: str | int) -> MigProfile | None:
        """A MIG profile by id (19), name ("1g.10gb") or displayed name ("MIG 1g.10gb")."""
        for profile in self.mig_profiles:
            if str(key).strip() in (str(profile.profile_id), profile.name, f"MIG {profile.name}"):
                return profile
        return None


def _registered(model: GpuModel) -> GpuModel:
    """`model` with what the registry knows about its product (by the name the driver reports):
    PCI device id, PCIe link and ECC from the datasheet, MIG profiles."""
    variant = variant_for_name(model.name)
    if variant is None or variant.datasheet is None:
        raise ValueError(f"the GPU registry has no datasheet for {model.name!r}")  # a programming error
    sheet = DATASHEETS[variant.datasheet]
    return dataclasses.replace(
        model, pci_device_id=variant.pci_device_ids[0], pcie_gen_max=sheet.pcie_gen, pcie_width_max=sheet.pcie_width,
        ecc=sheet.ecc, mig_profiles=MIG_GPUS[variant.mig].profiles if variant.mig else ())


GPU_MODELS: dict[str, GpuModel] = {
    "h100": _registered(GpuModel(
        key="h100", name="NVIDIA H100 80GB HBM3", brand="NVIDIA", architecture="Hopper",
        memory_total_mib=81559, memory_reserved_mib=479, bar1_total_mib=131072,
        power_limit_w=700.0, power_min_w=200.0, power_idle_w=69.0,
        max_sm_clock_mhz=1980, max_mem_clock_mhz=2619, idle_sm_clock_mhz=345, idle_mem_clock_mhz=2619,
        max_video_clock_mhz=1545, pcie_gen_idle=5,
        compute_cap="9.0", pci_sub_system_id="16C110DE",
        vbios_version="96.00.A5.00.01", idle_temp_c=38.0, full_load_temp_c=68.0,
        slowdown_temp_c=87, shutdown_temp_c=92, max_operating_temp_c=85, idle_pstate="P0",
    )),
    "a100": _registered(GpuModel(
        key="a100", name="NVIDIA A100-SXM4-80GB", brand="NVIDIA", architecture="Ampere",
        memory_total_mib=81920, memory_reserved_mib=575, bar1_total_mib=131072,
        power_limit_w=400.0, power_min_w=100.0, power_idle_w=62.0,
        max_sm_clock_mhz=1410, max_mem_clock_mhz=1593, idle_sm_clock_mhz=210, idle_mem_clock_mhz=1593,
        max_video_clock_mhz=1290, pcie_gen_idle=4,
        compute_cap="8.0", pci_sub_system_id="147F10DE",
        vbios_version="92.00.36.00.02", idle_temp_c=30.0, full_load_temp_c=66.0,
        slowdown_temp_c=89, shutdown_temp_c=92, max_operating_temp_c=85, idle_pstate="P0",
    )),
    "l40s": _registered(GpuModel(
        key="l40s", name="NVIDIA L40S", brand="NVIDIA", architecture="Ada Lovelace",
        memory_total_mib=46068, memory_reserved_mib=583, bar1_total_mib=65536,
        power_limit_w=350.0, power_min_w=100.0, power_idle_w=34.0,
        max_sm_clock_mhz=2520, max_mem_clock_mhz=9001, idle_sm_clock_mhz=210, idle_mem_clock_mhz=405,
        max_video_clock_mhz=1965, pcie_gen_idle=1,
        compute_cap="8.9", pci_sub_system_id="185110DE",
        vbios_version="95.02.66.00.02", idle_temp_c=32.0, full_load_temp_c=86.0,
        slowdown_temp_c=88, shutdown_temp_c=93, max_operating_temp_c=87, idle_pstate="P8",
    )),
    "vgpu": GpuModel(
        # A vGPU guest: the VM sees a slice of an A100 40GB as its own device.
        key="vgpu", name="GRID A100-10C", brand="NVIDIA Virtual Compute Server", architecture="Ampere",
        memory_total_mib=10240, memory_reserved_mib=0, bar1_total_mib=256,
        power_limit_w=250.0, power_min_w=250.0, power_idle_w=0.0,
        max_sm_clock_mhz=1410, max_mem_clock_mhz=1215, idle_sm_clock_mhz=1410, idle_mem_clock_mhz=1215,
        max_video_clock_mhz=1290, pcie_gen_max=4, pcie_width_max=16, pcie_gen_idle=4,
        compute_cap="8.0", pci_device_id="20F110DE", pci_sub_system_id="14F210DE",
        vbios_version="00.00.00.00.00", idle_temp_c=30.0, full_load_temp_c=60.0,
        slowdown_temp_c=89, shutdown_temp_c=92, max_operating_temp_c=85, idle_pstate="P0",
        virtualization_mode="VGPU", vgpu_profile="GRID A100-10C",
    ),
    # A whole NVIDIA L4 as AWS G6 gives it (passthrough): the figures of the real capture in
    # tests/fixtures/real/nvidia-smi-captures/l4__550.90.07__table-and-a.txt (23034 MiB, 556 MiB
    # reserved, BAR1 32768 MiB, 72 W limit, 40 W minimum, 16 W and 33 C idle in P8, clocks 2040/6251
    # max, 210/405 idle, video 1770, PCIe at Gen1 when idle, sub-system 16CA, VBIOS 95.04.29.00.06).
    # Not in that capture (550 prints thermal limits relative to the current temperature): the
    # absolute slowdown/shutdown/operating limits and the full-load temperature, set to the
    # same-generation L40S's so the simulation has thresholds; the simulation never claims them.
    "l4": _registered(GpuModel(
        key="l4", name="NVIDIA L4", brand="NVIDIA", architecture="Ada Lovelace",
        memory_total_mib=23034, memory_reserved_mib=556, bar1_total_mib=32768,
        power_limit_w=72.0, power_min_w=40.0, power_idle_w=16.0,
        max_sm_clock_mhz=2040, max_mem_clock_mhz=6251, idle_sm_clock_mhz=210, idle_mem_clock_mhz=405,
        max_video_clock_mhz=1770, pcie_gen_idle=1,
        compute_cap="8.9", pci_sub_system_id="16CA10DE",
        vbios_version="95.04.29.00.06", idle_temp_c=33.0, full_load_temp_c=75.0,
        slowdown_temp_c=88, shutdown_temp_c=93, max_operating_temp_c=87, idle_pstate="P8",
    )),
}


def _l4_fraction(share: int, profile: str, framebuffer_mib: int, sub_system: str) -> GpuModel:
    """An AWS G6f guest's view of 1/`share` of an L4: an NVIDIA vGPU (Q-series profile, the
    product name its driver reports, e.g. "NVIDIA L4-3Q") with the profile's framebuffer, seen
    on the L4's PCI device id with the profile's sub-system id. Sources: core/resize/instance_types
    (profiles and framebuffers: Karpenter's DRA table and an L4-12Q guest's 12288 MiB) and an
    EKS AMI note listing the g6f sub-systems 1733/1735/1737 (g6f.large, 2xlarge, 4xlarge)."""
    whole = GPU_MODELS["l4"]
    return dataclasses.replace(
        whole, key=f"l4/{share}", name=profile, brand="NVIDIA RTX Virtual Workstation",
        memory_total_mib=framebuffer_mib, memory_reserved_mib=0, bar1_total_mib=256,
        pci_sub_system_id=sub_system, vbios_version="00.00.00.00.00",
        # A vGPU guest sees its clocks at their maximum and no power readings (as the A100 guest).
        idle_sm_clock_mhz=whole.max_sm_clock_mhz, idle_mem_clock_mhz=whole.max_mem_clock_mhz,
        idle_pstate="P0", pcie_gen_idle=whole.pcie_gen_max, mig_profiles=(),
        virtualization_mode="VGPU", vgpu_profile=profile, vgpu_license="NVIDIA RTX Virtual Workstation",
    )


GPU_MODELS.update({
    "l4/8": _l4_fraction(8, "NVIDIA L4-3Q", 3072, "173310DE"),
    "l4/4": _l4_fraction(4, "NVIDIA L4-6Q", 6144, "173510DE"),
    "l4/2": _l4_fraction(2, "NVIDIA L4-12Q", 12288, "173710DE"),
})


def parse_gpu_spec(spec: str) -> list[GpuModel]:
    """Models for a spec such as "h100,a100,l40s,vgpu" or "2xh100,l40s" (order kept)."""
    models: list[GpuModel] = []
    for raw in spec.split(","):
        item = raw.strip().lower()
        if not item:
            raise SimSpecError(f"--gpus: empty entry in {spec!r}")
        count = 1
        if "x" in item and item.split("x", 1)[0].isdigit():
            count_text, item = item.split("x", 1)
            count = int(count_text)
        model = GPU_MODELS.get(item)
        if model is None:
            known = ", ".join(GPU_MODELS)
            raise SimSpecError(f"--gpus: unknown GPU model {item[:40]!r} (known: {known})")
        if count < 1:
            raise SimSpecError(f"--gpus: count must be at least 1 in {raw.strip()[:40]!r}")
        models.extend([model] * count)
    if len(models) > MAX_SIM_GPUS:
        raise SimSpecError(f"--gpus: at most {MAX_SIM_GPUS} GPUs, got {len(models)}")
    return models
