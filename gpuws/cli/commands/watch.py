"""`gpuws watch NAME`: live GPU telemetry of one host, as a refreshing table or JSON lines."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from gpuws.cli.connecting import EXIT_STATUS_HELP, add_accept_new, tty_prompts
from gpuws.cli.output import Subcommands, decimal_number, fail, print_json, sim_banner, whole_number
from gpuws.core.telemetry.sample import GpuSample, SampleBatch, iso8601

MIN_INTERVAL_S = 0.05  # 20 Hz
MAX_INTERVAL_S = 5.0  # 0.2 Hz
DEFAULT_RECONNECT_TIMEOUT_S = 300.0

_EPILOG = f"""JSON output: one object per sample per GPU (t is ISO 8601 UTC; a missing value is null).
When the stream is lost, watch reconnects with backoff and prints (with --json) one line
{{"event": "disconnected", "t": ISO, "reason": "..."}}, then {{"event": "reconnected", "t": ISO}} when
samples flow again; a sample object never has an "event" key. --count counts samples per GPU across
reconnects. Lost for longer than --reconnect-timeout: exit status 5.
{EXIT_STATUS_HELP}"""


def register(sub: Subcommands) -> None:
    """Register `gpuws watch`."""
    parser = sub.add_parser(
        "watch",
        help="live GPU telemetry of a host (NVML agent, or nvidia-smi as fallback)",
        description="Stream GPU telemetry from the host of profile NAME. NAME 'demo' without such a "
        "profile uses the built-in simulated GPU host.",
        epilog=_EPILOG,
    )
    parser.add_argument("name", metavar="NAME", help="host profile name")
    parser.add_argument("--interval", type=decimal_number, default=1.0, metavar="S",
                        help=f"seconds between samples ({MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g}, default 1)")
    parser.add_argument("--count", type=whole_number, default=None, metavar="N", help="stop after N samples per GPU")
    parser.add_argument("--json", action="store_true", help="print one JSON object per sample per GPU")
    parser.add_argument("--source", choices=("auto", "nvml", "nvidia-smi"), default="auto",
                        help="telemetry source (default auto: the NVML agent, else nvidia-smi)")
    parser.add_argument("--reconnect-timeout", type=decimal_number, default=DEFAULT_RECONNECT_TIMEOUT_S, metavar="S",
                        help="give up (exit status 5) when the stream stays lost this long (default 300)")
    add_accept_new(parser)
    parser.set_defaults(handler=run_watch)


def run_watch(args: argparse.Namespace) -> int:
    """`gpuws watch NAME`: stream the host's GPU telemetry, following reconnects, as a table or JSON lines."""
    if not MIN_INTERVAL_S <= args.interval <= MAX_INTERVAL_S:
        return fail(f"--interval must be between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} seconds", 2)
    if args.count is not None and args.count < 1:
        return fail("--count must be at least 1", 2)
    if not args.reconnect_timeout > 0:
        return fail("--reconnect-timeout must be positive", 2)
    asyncio.run(_watch(args, sys.stdout))  # errors go up to the exit-status table in gpuws.cli.main
    return 0


async def _watch(args: argparse.Namespace, out: TextIO) -> None:
    from functools import partial

    from gpuws.app.feeds import StreamBack, StreamLost, TelemetryStream, describe_source, follow_telemetry
    from gpuws.app.targets import open_target

    async with open_target(args.name, accept_new=args.accept_new, **tty_prompts()) as connection:
        hint = True if connection.profile.simulated else None
        refresh = out.isatty()
        per_gpu: dict[str, int] = {}
        streams: list[TelemetryStream] = []
        # The host's link (gpuws.app.hosts, as in the window) keeps the connection up; this loop
        # only restarts the stream, and gives up past --reconnect-timeout.
        events = follow_telemetry(connection, hz=1.0 / args.interval, prefer=args.source, simulated=hint,
                                  reconnect_timeout=args.reconnect_timeout, on_stream=streams.append,
                                  revive=False,
                                  # No store here, so no stored rows: watch never imports numpy.
                                  stream_factory=partial(TelemetryStream, stored_rows=False))
        try:
            async for event in events:
                if isinstance(event, StreamLost):
                    _note(args, out, {"event": "disconnected", "t": iso8601(event.t), "reason": event.reason},
                          f"stream lost: {event.reason}; reconnecting")
                    continue
                if isinstance(event, StreamBack):
                    _note(args, out, {"event": "reconnected", "t": iso8601(event.t)}, "reconnected")
                    continue
                batch = event
                if args.json:
                    for sample in batch.samples:
                        print_json(sample.to_dict())
                else:
                    title = f"{sim_banner(batch.simulated)}{args.name}  source: {describe_source(streams[-1])}"
                    out.write(("\x1b[H\x1b[J" if refresh else "") + format_batch(title, batch) + "\n")
                    out.flush()
                for sample in batch.samples:
                    per_gpu[sample.key] = per_gpu.get(sample.key, 0) + 1
                if args.count is not None and per_gpu and min(per_gpu.values()) >= args.count:
                    break
        finally:
            await events.aclose()


def _note(args: argparse.Namespace, out: TextIO, event: dict[str, str], text: str) -> None:
    """An event line: JSON with --json, else one line on stderr (the table stays on stdout)."""
    if args.json:
        print_json(event)
    else:
        print(f"gpuws: {text}", file=sys.stderr, flush=True)


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
