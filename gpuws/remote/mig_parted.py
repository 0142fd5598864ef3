"""Reading a host's GPUs for NVIDIA mig-parted configs (PCI device ids, current layouts).

Applying a config is the application layer's (`gpuws.app.resize.apply_mig_config`): each GPU goes
through the same plan -> preflight -> apply -> verify -> rollback and after-verify step as
`gpuws resize`.
"""

from __future__ import annotations

from gpuws.core.nvsmi.query_csv import parse_query_csv
from gpuws.core.resize.migparted import HostGpu
from gpuws.remote.resize import MigResizer, StepFailed

_ID_FIELDS = ("index", "pci.device_id")


async def read_host_gpus(resizer: MigResizer) -> list[HostGpu]:
    """Every GPU with its PCI device id (what `device-filter` matches) and current layout."""
    states = await resizer.read_gpus()
    result = await resizer.runner.run(
        ["nvidia-smi", f"--query-gpu={','.join(_ID_FIELDS)}", "--format=csv,noheader"], timeout=resizer.read_timeout
    )
    if not result.ok:
        raise StepFailed("nvidia-smi --query-gpu=pci.device_id failed")
    ids = {row["index"]: row["pci.device_id"] for row in parse_query_csv(result.stdout, _ID_FIELDS)}
    return [
        HostGpu(s.index, s.name, ids.get(str(s.index)), s.model if s.mig_capable else None, s.layout,
                settled=s.complete and not s.mode_pending)
        for s in states
    ]
