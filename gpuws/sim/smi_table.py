"""The default `nvidia-smi` table of the simulated host (590-series layout, 91 columns wide)."""

from __future__ import annotations

from gpuws.sim.dynamics import sample
from gpuws.sim.mig import mig_devices
from gpuws.sim.smi_fields import ctime_like
from gpuws.sim.state import GpuState, SimState

_RULE = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
_WIDE = "+" + "-" * 89 + "+"


def _cells(a: str, b: str, c: str) -> str:
    return f"|{a:<41}|{b:>24}|{c:>22}|"


def render_table(state: SimState, gpus: list[GpuState], now: float) -> list[str]:
    header = f" NVIDIA-SMI {state.driver_version:<23}Driver Version: {state.driver_version:<15}"
    header += f"CUDA Version: {state.cuda_version:<9}"
    lines = [
        ctime_like(now) + "       ",
        _WIDE,
        f"|{header:<89}|",
        _RULE,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    processes = []
    for gpu in gpus:
        model = gpu.model
        s = sample(gpu, now)
        vgpu = model.virtualization_mode == "VGPU"
        name = model.name if len(model.name) <= 28 else model.name[:25] + "..."
        ecc = "0" if model.ecc else "N/A"
        if gpu.mig_current:
            ecc = "On"
        power = "N/A" if vgpu else f"{s.power_w:.0f}W / {model.power_limit_w:4.0f}W"
        util = "N/A" if s.util_gpu_pct is None else f"{s.util_gpu_pct}%"
        mig_mode = "N/A" if not model.mig_capable else ("Enabled" if gpu.mig_current else "Disabled")
        fan = f"{int(30 + 50 * s.load)}%" if model.has_fan else "N/A"
        lines.append(_cells(f"{gpu.index:>4}  {name:<31}On  ", f"{gpu.pci_bus_id} Off ", f"{ecc} "))
        lines.append(_cells(
            f" {fan:<4}{s.temp_c:>4}C    {s.pstate:<3}{power:>24} ",
            f"{s.mem_used_mib:>5}MiB / {s.mem_total_mib:>6}MiB ",
            f"{util:>8}      Default ",
        ))
        lines.append(_cells("", "", f"{mig_mode} "))
        lines.append(_RULE)
        processes += [(gpu, p) for p in s.processes]
    if any(g.mig_current and mig_devices(g) for g in gpus):
        lines += ["", _WIDE, f"|{' MIG devices:':<89}|"]
        lines.append("+------------------+----------------------------------+-----------+-----------------------+")
        lines.append("| GPU  GI  CI  MIG |                     Memory-Usage |        Vol|        Shared         |")
        lines.append("|      ID  ID  Dev |                       BAR1-Usage | SM     Unc| CE ENC  DEC  OFA  JPG |")
        lines.append("|                  |                                  |        ECC|                       |")
        lines.append("|==================+==================================+===========+=======================|")
        for gpu in gpus:
            if not gpu.mig_current:
                continue
            for index, (gi, ci) in enumerate(mig_devices(gpu)):
                prof = gpu.model.mig_profile(gi.profile_id)
                assert prof is not None
                used = sum(x.used_mib for x in gpu.processes if x.gpu_instance_id == gi.gi_id)
                mem = f"{used}MiB / {prof.memory_mib:>5}MiB"
                lines.append(
                    f"|{gpu.index:>3}{gi.gi_id:>5}{ci.ci_id:>4}{index:>4}  |{mem:>30}    |"
                    f"{prof.sm_count:>3}      0 |{prof.copy_engines:>3}{prof.encoders:>4}{prof.decoders:>5}"
                    f"{prof.ofa:>5}{prof.jpeg:>5} |"
                )
                lines.append(f"|                  |{'0MiB / 32767MiB':>31}   |           |                       |")
                lines.append("+------------------+----------------------------------+-----------+-----------------------+")
    lines += [
        "",
        _WIDE,
        f"|{' Processes:':<89}|",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|" + "=" * 89 + "|",
    ]
    if not processes:
        lines.append(f"|{'  No running processes found':<89}|")
    for gpu, p in processes:
        gi_text = "N/A" if p.gpu_instance_id is None else str(p.gpu_instance_id)
        ci_text = "N/A" if p.compute_instance_id is None else str(p.compute_instance_id)
        lines.append(
            f"|{gpu.index:>5}{gi_text:>5}{ci_text:>5}{p.pid:>17}      C   {p.name[:34]:<34}{p.used_mib:>10}MiB |"
        )
    lines.append(_WIDE)
    return lines
