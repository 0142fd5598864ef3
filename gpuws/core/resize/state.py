"""What one GPU's MIG state is right now, as read from the host."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuws.core.resize.catalog import GpuModel, model_for_gpu_name
from gpuws.core.resize.layout import FULL_LAYOUT, Layout, make_layout
from gpuws.core.resize.mig_parse import ComputeInstance, GpuInstance


@dataclass(frozen=True)
class GpuMigState:
    """One GPU: its name, MIG mode (current and pending) and its GPU/compute instances."""

    index: int
    name: str
    uuid: str | None
    mig_current: str | None  # "Enabled" / "Disabled"; None when the GPU is not MIG-capable
    mig_pending: str | None
    gpu_instances: tuple[GpuInstance, ...] = ()
    compute_instances: tuple[ComputeInstance, ...] = ()
    mig_device_names: tuple[str, ...] = field(default=())  # from `nvidia-smi -L`, e.g. "1g.10gb"
    # (profile ID, GiB) as this host's own `nvidia-smi mig -lgip` reports them; they replace the
    # catalog's figures (which are nominal for some models).
    host_profile_memory: tuple[tuple[int, float], ...] = field(default=())

    @property
    def model(self) -> GpuModel | None:
        model = model_for_gpu_name(self.name)
        if model is None or not self.host_profile_memory:
            return model
        return model.with_host_memory(dict(self.host_profile_memory))

    @property
    def mig_capable(self) -> bool:
        return self.mig_current in ("Enabled", "Disabled") and self.model is not None

    @property
    def mig_enabled(self) -> bool:
        return self.mig_current == "Enabled"

    @property
    def mode_pending(self) -> bool:
        """True when a MIG mode change waits for a GPU reset."""
        return self.mig_pending is not None and self.mig_pending != self.mig_current

    @property
    def layout(self) -> Layout:
        if not self.mig_enabled:
            return FULL_LAYOUT
        return make_layout(self.model, True, [gi.profile for gi in self.gpu_instances])

    @property
    def complete(self) -> bool:
        """Every GPU instance has a compute instance (else it is not usable by CUDA)."""
        with_ci = {ci.gpu_instance_id for ci in self.compute_instances}
        return all(gi.instance_id in with_ci for gi in self.gpu_instances)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "mig_mode": self.mig_current,
            "mig_mode_pending": self.mig_pending,
            **self.layout.to_dict(),
            "gpu_instances": [
                {"id": gi.instance_id, "profile": gi.profile, "placement": f"{gi.placement_start}:{gi.placement_size}"}
                for gi in self.gpu_instances
            ],
            "compute_instances": len(self.compute_instances),
        }
