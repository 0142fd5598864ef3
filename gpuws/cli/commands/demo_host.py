"""`gpuws demo-host`: run the simulated GPU host (an SSH server on 127.0.0.1, or another address
in 127.0.0.0/8 with `--bind`) until stopped."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuws.cli.output import Subcommands, fail


def register(sub: Subcommands) -> None:
    """Register `gpuws demo-host`."""
    parser = sub.add_parser(
        "demo-host",
        help="run the SIMULATED GPU host (SSH on 127.0.0.1) and print how to connect as one JSON line",
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: pick a free one)")
    parser.add_argument("--bind", default="127.0.0.1", metavar="ADDR",
                        help="listen on this address in 127.0.0.0/8 (default 127.0.0.1); anything else "
                             "is refused (exit 2): the simulated host is for this machine only")
    parser.add_argument(
        "--gpus", default=None, metavar="SPEC",
        help='simulated GPUs, e.g. "h100,a100,l40s,vgpu" (the default) or "2xh100"; "l4" is a whole '
             'NVIDIA L4, "l4/8", "l4/4", "l4/2" the vGPU fractions an AWS G6f guest sees. On a '
             "--state-dir used before: other GPUs than it had replace them (default: keep them)",
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

    from gpuws.sim.server import serve_forever

    if not 0 <= args.port <= 65535:
        return fail("--port: must be between 0 and 65535", 2)
    from gpuws.sim.faults import parse_faults
    from gpuws.sim.models import parse_gpu_spec
    from gpuws.sim.server import loopback_bind

    # BindRefused and SimSpecError are RefusedInput: exit 2 through the error table, before
    # anything listens.
    bind = loopback_bind(args.bind)
    if args.gpus is not None:
        parse_gpu_spec(args.gpus)
    try:
        faults = parse_faults(args.fault) if args.fault else None
        return asyncio.run(serve_forever(args.gpus, args.port, args.state_dir, faults, bind))
    except OSError as exc:
        return fail(f"cannot start the demo host: {exc.strerror or exc}")
