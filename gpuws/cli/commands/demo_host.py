"""`gpuws demo-host`: run the simulated GPU host (an SSH server on 127.0.0.1) until stopped."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuws.cli.output import Subcommands, fail, whole_number


def register(sub: Subcommands) -> None:
    """Register `gpuws demo-host`."""
    parser = sub.add_parser(
        "demo-host",
        help="run the SIMULATED GPU host (SSH on 127.0.0.1) and print how to connect as one JSON line",
    )
    parser.add_argument("--port", type=whole_number, default=0, help="TCP port (default: pick a free one)")
    parser.add_argument(
        "--gpus", default=None, metavar="SPEC",
        help='simulated GPUs, e.g. "h100,a100,l40s,vgpu" (the default) or "2xh100"',
    )
    parser.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                        help="where the simulated host keeps its state (default: a new temp dir)")
    parser.add_argument("--fault", action="append", default=[], metavar="KIND:GPU",
                        help="a fault the host plays, repeatable: bench-nan, copy-corrupt, busy, "
                             "throttle, slow-link, gemm-wrong, cuda-invisible (benchmark) or xid-79, xid-13, "
                             "remap-pending, reset-required, fabric-down, nvlink-errors, pcie-capped, "
                             "power-capped (health) on GPU index GPU (e.g. --fault bench-nan:0); no-vnc or "
                             "software-gl for the whole host (any GPU index, e.g. --fault no-vnc:0)")
    parser.set_defaults(handler=run_demo_host)


def run_demo_host(args: argparse.Namespace) -> int:
    """`gpuws demo-host`: serve the simulated GPU host on loopback until interrupted."""
    import asyncio

    from gpuws.sim.models import DEFAULT_GPU_SPEC
    from gpuws.sim.server import serve_forever

    if not 0 <= args.port <= 65535:
        return fail("--port: must be between 0 and 65535", 2)
    from gpuws.sim.faults import parse_faults

    try:
        faults = parse_faults(args.fault) if args.fault else None
        return asyncio.run(serve_forever(args.gpus or DEFAULT_GPU_SPEC, args.port, args.state_dir, faults))
    except OSError as exc:
        return fail(f"cannot start the demo host: {exc.strerror or exc}")
