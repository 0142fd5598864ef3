"""Datasheet peaks of NVIDIA GPUs, and model detection from a name.

The figures and the name matching live in the GPU registry (`gpuws.core.gpus`); this module keeps
the benchmark side's API (`CATALOG`, `Datasheet`, `detect_model`, `datasheet_for`...).
"""

from __future__ import annotations

from gpuws.core.gpus.datasheets import DATASHEETS, PCIE_X16_GB_S, Datasheet
from gpuws.core.gpus.models import is_vgpu_name, variant_for_name

CATALOG: dict[str, Datasheet] = DATASHEETS

__all__ = ["CATALOG", "PCIE_X16_GB_S", "Datasheet", "datasheet_for", "detect_model", "is_vgpu_name"]


def detect_model(name: str) -> str | None:
    """The catalog model for an `nvidia-smi` GPU name, or None when it is not in the catalog.

    >>> detect_model("NVIDIA H100 80GB HBM3")
    'H100 SXM'
    """
    variant = variant_for_name(name)
    return variant.datasheet if variant else None


def datasheet_for(name: str) -> Datasheet | None:
    """The datasheet for an `nvidia-smi` GPU name, or None for an unknown model."""
    model = detect_model(name)
    return CATALOG.get(model) if model else None
