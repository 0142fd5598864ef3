"""What the simulated host's health faults change, in one place (`gpuws.sim.faults` names them).

`nvidia-smi -q -x` / `--query-gpu` (smi_xml, smi_fields), `nvidia-smi nvlink -e` / `-s` and the
kernel log (`journalctl -k` / `dmesg` wrappers of the demo server) read these. Every text follows
a real capture (tests/fixtures/real: nvlink/, kernel-log/, nvidia-smi-captures/).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from gpuws.sim.faults import (
    CAPPED_POWER_SHARE,
    SLOW_LINK_WIDTH,
    FaultKind,
    FaultSpecError,
    SimFault,
    active_faults,
    has_fault,
)
from gpuws.sim.models import GpuModel
from gpuws.sim.state import GpuState, SimState, SimStateStore

# NVLink links of the simulated SXM cards (H100 SXM: 18 NVLink4 links; A100 SXM4: 12 NVLink3),
# and which sit on an NVSwitch fabric (HGX H100 8-GPU boards do; the fabric manager registers them).
NVLINK_LINKS = {"h100": 18, "a100": 12}
NVLINK_LINK_GB_S = {"h100": 26.562, "a100": 25.0}
NVSWITCH_MODELS = frozenset({"h100"})


def _has(kind: FaultKind, gpu: GpuState) -> bool:
    return has_fault(active_faults(), kind, gpu.index)


def pcie_gen_max_system(gpu: GpuState) -> int:
    """The generation card and slot allow together: the card's own (the slot keeps up)."""
    return gpu.model.pcie_gen_max


def pcie_gen_current(gpu: GpuState, sampled: int) -> int:
    """The trained generation: under `pcie-capped` one below what card and slot allow, under load
    too (a link that trained down, which `gpuws health` calls degraded, unlike a slower slot)."""
    if _has(FaultKind.PCIE_CAPPED, gpu):
        return min(sampled, gpu.model.pcie_gen_max - 1)
    return min(sampled, pcie_gen_max_system(gpu))


def pcie_width_current(gpu: GpuState) -> int:
    """The trained PCIe width: x4 under the benchmark's `slow-link` fault."""
    if _has(FaultKind.SLOW_LINK, gpu):
        return min(SLOW_LINK_WIDTH, gpu.model.pcie_width_max)
    return gpu.model.pcie_width_max


def power_limit_w(gpu: GpuState) -> float:
    """The enforced power limit: 300 of 700 W under `power-capped`."""
    share = CAPPED_POWER_SHARE if _has(FaultKind.POWER_CAPPED, gpu) else 1.0
    return round(gpu.model.power_limit_w * share, 2)


def recovery_action(gpu: GpuState) -> str:
    """`gpu_recovery_action`: Reset under `reset-required`."""
    return "Reset" if _has(FaultKind.RESET_REQUIRED, gpu) else "None"


def remap_pending(gpu: GpuState) -> bool:
    """`remapped_row_pending`: Yes under `remap-pending`."""
    return _has(FaultKind.REMAP_PENDING, gpu)


def fabric(gpu: GpuState) -> tuple[str, str]:
    """(state, status) of the GPU's fabric registration; N/A off an NVSwitch system. Under
    `fabric-down` the fabric manager is not running: registration stays In Progress."""
    if gpu.model_key not in NVSWITCH_MODELS:
        return "N/A", "N/A"
    if _has(FaultKind.FABRIC_DOWN, gpu):
        return "In Progress", "N/A"
    return "Completed", "Success"


def nvlink_text(state: SimState, gpus: Sequence[GpuState], errors: bool) -> list[str]:
    """`nvidia-smi nvlink -e` (errors) or `-s` (status) as the driver prints them."""
    out = []
    for gpu in gpus:
        links = NVLINK_LINKS.get(gpu.model_key, 0)
        # SXM boards link like to like: a card without a peer of its model has no NVLink to show,
        # except the one playing `nvlink-errors` (its links are the fault).
        peers = [g for g in state.gpus if g.model_key == gpu.model_key and g.index != gpu.index]
        if not links or not (peers or _has(FaultKind.NVLINK_ERRORS, gpu)):
            continue
        out.append(f"GPU {gpu.index}: {gpu.model.name} (UUID: {gpu.uuid})")
        bad = _has(FaultKind.NVLINK_ERRORS, gpu)
        for link in range(links):
            if errors:
                hit = bad and link == 3
                out += [f"\t Link {link}: Replay Errors: {1203 if hit else 0}",
                        f"\t Link {link}: Recovery Errors: {7 if hit else 0}",
                        f"\t Link {link}: CRC Errors: {4821 if hit else 0}"]
            else:
                # Links stay up with the fabric manager down: the fault NVLink status never shows.
                out.append(f"\t Link {link}: {NVLINK_LINK_GB_S[gpu.model_key]:.3f} GB/s")
    return out


# Real lines: kernel-log/journal-xid-79__nvsentinel.txt and dmesg-xid-13-109__gpud.txt.
_XID_TEXT = {
    FaultKind.XID_79: "79, GPU has fallen off the bus.",
    FaultKind.XID_13: "13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): "
                      "Illegal Instruction Parameter",
}


def kernel_log(state: SimState, dmesg: bool) -> list[str]:
    """The simulated kernel log since boot: the driver's start, then an `NVRM: Xid` line per XID fault."""
    boot = state.created
    lines = [(0.81, "Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103) (simulated gpuws host)"),
             (4.12, f"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  {state.driver_version}  Release Build"),
             (4.87, "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms"),
             (5.31, "nvidia-uvm: Loaded the UVM driver, major device number 510.")]
    for fault in active_faults():
        text = _XID_TEXT.get(fault.kind)
        if text is None:
            continue
        gpu = next((g for g in state.gpus if g.index == fault.gpu), None)
        if gpu is None:
            continue
        domain, bus, dev = gpu.pci_bus_id.split(":")
        lines.append((3600.0 + fault.gpu, f"NVRM: Xid (PCI:{domain[-4:]}:{bus.lower()}:{dev.split('.')[0]}): {text}"))
    if dmesg:
        return [f"[{t:12.6f}] {msg}" for t, msg in lines]
    stamp = time.strftime("%b %d %H:%M:%S", time.localtime(boot))
    return [f"{stamp} {state.hostname} kernel: {msg}" for _, msg in lines]


def _is_vgpu(model: GpuModel) -> bool:
    return model.virtualization_mode == "VGPU"


def fault_refusal(fault: SimFault, models: Sequence[GpuModel]) -> str | None:
    """Why the simulated host cannot play `fault` on its GPU (None when it can): a fault is
    either played where asked or refused, never silently ignored."""
    if fault.kind in (FaultKind.NO_VNC, FaultKind.SOFTWARE_GL):
        return None  # host-wide: any GPU index names the host
    if not 0 <= fault.gpu < len(models):
        return f"the demo host has no GPU {fault.gpu} (its GPUs are 0-{len(models) - 1})"
    model = models[fault.gpu]
    card = f"GPU {fault.gpu} ({model.name})"
    vgpu = _is_vgpu(model)
    if fault.kind in (FaultKind.PCIE_CAPPED, FaultKind.SLOW_LINK) and vgpu:
        return f"{card} is a vGPU guest: its PCIe link is the host's, and the guest cannot have it capped"
    if fault.kind is FaultKind.PCIE_CAPPED and model.pcie_gen_max < 2:
        return f"{card} has no lower PCIe generation to train at"
    if fault.kind is FaultKind.POWER_CAPPED and vgpu:
        return f"{card} is a vGPU guest: it reports no power limit (N/A), so none can be capped"
    if fault.kind is FaultKind.REMAP_PENDING and not model.mig_capable:
        return f"{card} reports no remapped rows on the simulated host"
    if fault.kind is FaultKind.FABRIC_DOWN and model.key not in NVSWITCH_MODELS:
        return f"{card} is not on an NVSwitch fabric (only {', '.join(sorted(NVSWITCH_MODELS))} GPUs are)"
    if fault.kind is FaultKind.NVLINK_ERRORS and not NVLINK_LINKS.get(model.key):
        return f"{card} has no NVLink"
    return None


def check_faults(faults: Sequence[SimFault], models: Sequence[GpuModel]) -> None:
    """Refuse (`FaultSpecError`, exit 2) every fault the host cannot play on the GPU it names."""
    for fault in faults:
        why = fault_refusal(fault, models)
        if why is not None:
            raise FaultSpecError(f"fault {fault}: {why}")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m gpuws.sim.health journalctl|dmesg ARGS`: the simulated kernel log."""
    args = list(sys.argv[1:] if argv is None else argv)
    tool = args[0] if args else "dmesg"
    state = SimStateStore.from_env().load()
    print("\n".join(kernel_log(state, dmesg=tool == "dmesg")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
