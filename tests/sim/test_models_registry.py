"""The simulated GPUs report the GPU registry's facts (issue 23: one registry of GPU facts)."""

from __future__ import annotations

from gpuws.core.gpus.datasheets import DATASHEETS
from gpuws.core.gpus.models import MIG_GPUS, variant_for_name
from gpuws.sim.models import GPU_MODELS


def test_the_simulated_h100_slices_as_the_registry_says() -> None:
    h100 = GPU_MODELS["h100"]
    profile = h100.mig_profile("3g.40gb")
    assert profile is not None and profile.memory_mib == 40448  # the registry's `-lgip` figure
    assert h100.mig_profiles == MIG_GPUS["h100-80gb"].profiles


def test_every_simulated_product_reads_its_facts_from_the_registry() -> None:
    for model in GPU_MODELS.values():
        variant = variant_for_name(model.name)
        if model.virtualization_mode == "VGPU":
            assert variant is None  # a vGPU guest is not a product of the registry
            continue
        assert variant is not None and variant.datasheet is not None, model.name
        sheet = DATASHEETS[variant.datasheet]
        assert model.pci_device_id == variant.pci_device_ids[0]
        assert (model.pcie_gen_max, model.pcie_width_max, model.ecc) == (sheet.pcie_gen, sheet.pcie_width, sheet.ecc)
        assert model.mig_profiles == (MIG_GPUS[variant.mig].profiles if variant.mig else ())
