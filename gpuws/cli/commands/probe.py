"""`gpuws probe NAME [--accept-new] [--json]`: connect to a host and print its GPU inventory."""

from __future__ import annotations

import argparse
import asyncio

from gpuws.cli.connecting import EXIT_STATUS_HELP, tty_prompts
from gpuws.cli.output import Subcommands, decimal_number, print_json, sim_banner
from gpuws.core.inventory import GpuInfo, Inventory
from gpuws.core.terminal import printable

_EPILOG = EXIT_STATUS_HELP


def register(sub: Subcommands) -> None:
    """Register `gpuws probe`."""
    parser = sub.add_parser(
        "probe",
        help="show a host's GPUs and facts (nvidia-smi -q -x over SSH)",
        description="Connect to the host of profile NAME and print its GPU inventory. "
        "NAME 'demo' without such a profile uses the built-in simulated GPU host.",
        epilog=_EPILOG,
    )
    parser.add_argument("name", metavar="NAME", help="host profile name")
    parser.add_argument("--accept-new", action="store_true",
                        help="trust the host key if this host has none recorded yet (never a changed key)")
    parser.add_argument("--json", action="store_true", help="print the inventory as JSON")
    parser.add_argument("--timeout", type=decimal_number, default=60.0, metavar="S",
                        help="seconds allowed for the probe command on the host (default 60)")
    parser.set_defaults(handler=run_probe)


def run_probe(args: argparse.Namespace) -> int:
    """`gpuws probe NAME`: connect, read the host's GPUs and driver, print them."""
    inventory = asyncio.run(_probe(args.name, args.accept_new, args.timeout))
    from gpuws.core.resize.journal import ResizeJournal, interrupted_resize_json

    interrupted = ResizeJournal().interrupted(args.name)  # a resize of this host that did not finish
    if args.json:
        print_json({**inventory.to_dict(), "interrupted_resize": interrupted_resize_json(interrupted)})
    else:
        print(format_inventory(args.name, inventory))
        if interrupted is not None:
            print(f"warning: {interrupted.summary()}; run `gpuws resize {args.name} --recover`")
    return 0


async def _probe(name: str, accept_new: bool, timeout: float) -> Inventory:
    from gpuws.app.hostio import probe
    from gpuws.app.targets import open_target

    async with open_target(name, accept_new=accept_new, **tty_prompts()) as connection:
        return await probe(connection.runner, timeout=timeout, require_driver=True, host_label=name)


def _value(value: object, unit: str = "") -> str:
    """A value from the host, made printable: one line, no control/bidi/zero-width characters."""
    if value is None:
        return "-"
    if isinstance(value, float):
        value = f"{value:g}"
    return f"{printable(value)}{unit}"


def _pcie(gpu: GpuInfo) -> str:
    text = f"gen{_value(gpu.pcie_gen_current)}/{_value(gpu.pcie_gen_max)} " \
           f"x{_value(gpu.pcie_width_current)}/{_value(gpu.pcie_width_max)}"
    return text + (" DEGRADED" if gpu.pcie_degraded else "")


def format_inventory(name: str, inventory: Inventory) -> str:
    """The human-readable probe result: a host line, a tools line and a GPU table."""
    host = inventory.host
    ram = f"{host.ram_mib / 1024:.0f} GiB RAM" if host.ram_mib is not None else "RAM unknown"
    lines = [
        f"{sim_banner(inventory.simulated)}{printable(name)} ({_value(host.hostname)}): {_value(host.os)}, "
        f"kernel {_value(host.kernel)}, {_value(host.cpu_count)} CPUs, {ram}",
        "tools: " + "  ".join(
            f"{label} {'yes' if present else 'no'}" for label, present in (
                ("python3", host.has_python3), ("nvidia-ml-py", host.has_nvml), ("torch", host.has_torch),
                ("cupy", host.has_cupy), ("nvcc", host.has_nvcc))),
    ]
    lines += [f"warning: {printable(w)}" for w in inventory.warnings]
    if not inventory.gpus:
        lines.append("no GPUs reported")
        return "\n".join(lines)
    header = ("IDX", "NAME", "MEMORY", "DRIVER", "CUDA", "MIG", "VIRT", "PCIE", "POWER", "ECC")
    rows = [header]
    for gpu in inventory.gpus:
        virt = gpu.vgpu_profile if gpu.is_vgpu_slice and gpu.vgpu_profile else gpu.virtualization_mode
        rows.append((str(gpu.index), _value(gpu.name), _value(gpu.memory_total_mib, " MiB"), _value(gpu.driver_version),
                     _value(gpu.cuda_version), _value(gpu.mig_mode), _value(virt), _pcie(gpu),
                     _value(gpu.power_limit_w, " W"), _value(gpu.ecc_mode)))
        for mig in gpu.mig_devices:
            rows.append(("", f"  MIG {mig.index}: {_value(mig.profile)}", _value(mig.memory_total_mib, " MiB"),
                         "", "", "", "", "", "", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
              for row in rows]
    return "\n".join(lines)
