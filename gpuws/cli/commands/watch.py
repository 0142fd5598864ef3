"""`gpuws watch NAME`: live GPU telemetry of one host, as a refreshing table or JSON lines."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, TextIO

from gpuws.cli.connecting import EXIT_ERROR, EXIT_NO_DRIVER, exit_code_for
from gpuws.cli.output import fail, print_json, sim_banner
from gpuws.core.errors import GpuwsError
from gpuws.core.telemetry.sample import GpuSample, SampleBatch, iso8601

MIN_INTERVAL_S = 0.05  # 20 Hz
MAX_INTERVAL_S = 5.0  # 0.2 Hz

_EPILOG = """JSON output: one object per sample per GPU (t is ISO 8601 UTC; a missing value is null).
exit status: 0 ok, 1 other error, 3 authentication failed, 4 unknown or changed host key,
5 host unreachable or the stream dropped, 6 no NVIDIA driver on the host"""


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Register `gpuws watch`."""
    parser = sub.add_parser(
        "watch",
        help="live GPU telemetry of a host (NVML agent, or nvidia-smi as fallback)",
        description="Stream GPU telemetry from the host of profile NAME. NAME 'demo' without such a "
        "profile uses the built-in simulated GPU host.",
        epilog=_EPILOG,
    )
    parser.add_argument("name", metavar="NAME", help="host profile name")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                        help=f"seconds between samples ({MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g}, default 1)")
    parser.add_argument("--count", type=int, default=None, metavar="N", help="stop after N samples per GPU")
    parser.add_argument("--json", action="store_true", help="print one JSON object per sample per GPU")
    parser.add_argument("--source", choices=("auto", "nvml", "nvidia-smi"), default="auto",
                        help="telemetry source (default auto: the NVML agent, else nvidia-smi)")
    parser.add_argument("--accept-new", action="store_true",
                        help="trust the host key if this host has none recorded yet (never a changed key)")
    parser.set_defaults(handler=run_watch)


def run_watch(args: argparse.Namespace) -> int:
    if not MIN_INTERVAL_S <= args.interval <= MAX_INTERVAL_S:
        return fail(f"--interval must be between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} seconds", 2)
    if args.count is not None and args.count < 1:
        return fail("--count must be at least 1", 2)
    try:
        asyncio.run(_watch(args, sys.stdout))
    except GpuwsError as exc:
        code = exit_code_for(exc)
        if code == EXIT_ERROR and "no NVIDIA driver" in str(exc):  # the stream's own wording of it
            code = EXIT_NO_DRIVER
        return fail(str(exc), code)
    return 0


async def _watch(args: argparse.Namespace, out: TextIO) -> None:
    from gpuws.remote.targets import open_target
    from gpuws.remote.telemetry import TelemetryStream, describe_source

    async with open_target(args.name, accept_new=args.accept_new) as connection:
        hint = True if connection.profile.simulated else None
        stream = TelemetryStream(connection.runner, hz=1.0 / args.interval, prefer=args.source, simulated=hint)
        refresh = out.isatty()
        seen = 0
        async with stream:
            async for batch in stream:
                if args.json:
                    for sample in batch.samples:
                        print_json(sample.to_dict())
                else:
                    title = f"{sim_banner(batch.simulated)}{args.name}  source: {describe_source(stream)}"
                    out.write(("\x1b[H\x1b[J" if refresh else "") + format_batch(title, batch) + "\n")
                    out.flush()
                seen += 1
                if args.count is not None and seen >= args.count:
                    break


def _v(value: float | int | None, fmt: str = "{:.0f}", unit: str = "") -> str:
    return "-" if value is None else fmt.format(value) + unit


def format_batch(title: str, batch: SampleBatch) -> str:
    """A compact table of one batch: a line per GPU (and MIG device)."""
    header = ("GPU", "UTIL", "MEM", "MEMORY MiB", "TEMP", "POWER W", "SM MHz", "MEM MHz", "PCIe RX/TX KiB/s",
              "REASONS")
    rows = [header]
    for s in batch.samples:
        rows.append((
            s.key,
            _v(s.util_gpu_pct, unit="%"),
            _v(s.util_mem_pct, unit="%"),
            f"{_v(s.mem_used_mib)}/{_v(s.mem_total_mib)}",
            _v(s.temp_c, unit="C"),
            f"{_v(s.power_w)}/{_v(s.power_limit_w)}",
            _v(s.sm_clock_mhz),
            _v(s.mem_clock_mhz),
            f"{_v(s.pcie_rx_kib_s)}/{_v(s.pcie_tx_kib_s)}",
            _reasons(s),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"{title}  {iso8601(batch.t)}"]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def _reasons(s: GpuSample) -> str:
    if s.throttle_reasons is None:
        return "-"
    names = list(s.throttle_reasons)
    if s.idle:
        names.append("(idle)")
    return ",".join(names) if names else "none"
