"""`gpuws health NAME [--json] [--expect-*] [--cuda X.Y] [--dcgm]`: passive health checks of a
host in seconds (no load): ECC, retired pages, remapped rows, recovery action, XIDs since boot,
NVLink, fabric manager, PCIe, power cap, persistence, throttling, expectations and driver."""

from __future__ import annotations

import argparse
import asyncio

from gpuws.cli.connecting import ExitStatus, tty_prompts
from gpuws.cli.expect import add_expect_flags, expected_from
from gpuws.cli.output import Subcommands, decimal_number, print_json, sim_banner
from gpuws.core.health import HealthVerdict, HostHealth, provider_report

_EPILOG = """exit status: 0 healthy, 11 degraded or unhealthy (--allow-warn does not change that:
health has no warn verdict, a power cap is degraded), 12 inconclusive (e.g. the kernel log cannot
be read), 1 other error, 3 authentication failed, 4 unknown or changed host key, 5 host
unreachable, 7 timed out."""


def register(sub: Subcommands) -> None:
    """Register `gpuws health`."""
    parser = sub.add_parser(
        "health",
        help="passive health check of a host's GPUs in seconds (ECC, XIDs, remapped rows, links, power cap)",
        description="Read the health of every GPU of the host of profile NAME without loading it, and give "
        "a verdict per GPU and per host: healthy, degraded, unhealthy or inconclusive. "
        "NAME 'demo' without such a profile uses the built-in simulated GPU host.",
        epilog=_EPILOG,
    )
    parser.add_argument("name", metavar="NAME", help="host profile name")
    parser.add_argument("--json", action="store_true", help="print the verdicts and findings as one JSON object")
    parser.add_argument("--report", action="store_true", help="print the plain-text report for the provider")
    parser.add_argument("--cuda", default=None, metavar="X.Y",
                        help="check the driver runs this CUDA version (NVIDIA's minimum-driver table)")
    parser.add_argument("--dcgm", action="store_true",
                        help="also run `dcgmi diag -r 1 -j` where DCGM is installed (its absence is said)")
    parser.add_argument("--allow-warn", action="store_true",
                        help="taken as `gpuws bench` takes it, so a script can pass both the same flags; health has "
                             "no warn verdict (degraded and unhealthy stay 11)")
    parser.add_argument("--accept-new", action="store_true",
                        help="trust the host key if this host has none recorded yet (never a changed key)")
    parser.add_argument("--timeout", type=decimal_number, default=None, metavar="S",
                        help="seconds allowed on the host (default 10, 120 with --dcgm)")
    add_expect_flags(parser)
    parser.set_defaults(handler=run_health)


def exit_status(verdict: HealthVerdict) -> int:
    """0 healthy, 11 degraded or unhealthy, 12 inconclusive. Health has no warn verdict (13 is the
    benchmark's): a degraded card, a provider's power cap included, is a failed check here."""
    if verdict in (HealthVerdict.DEGRADED, HealthVerdict.UNHEALTHY):
        return int(ExitStatus.CHECK_FAILED)
    if verdict is HealthVerdict.INCONCLUSIVE:
        return int(ExitStatus.INCONCLUSIVE)
    return 0


def run_health(args: argparse.Namespace) -> int:
    """Run the checks and print them."""
    from gpuws.cli.output import fail

    if args.timeout is not None and args.timeout <= 0:
        return fail("--timeout must be positive", 2)
    health = asyncio.run(_health(args))
    if args.json:
        print_json({**health.to_json(), "report": provider_report(health)})
    elif args.report:
        print(provider_report(health))
    else:
        print(format_health(health))
    return exit_status(health.verdict)


async def _health(args: argparse.Namespace) -> HostHealth:
    from gpuws.app.health import check_health
    from gpuws.app.targets import open_target

    async with open_target(args.name, accept_new=args.accept_new, **tty_prompts()) as connection:
        return await check_health(connection.runner, args.name, expected=expected_from(args), cuda=args.cuda,
                                  dcgm=args.dcgm, timeout=args.timeout)


def format_health(health: HostHealth) -> str:
    """The human screen: the verdict per GPU and every finding that is not plainly healthy."""
    banner = sim_banner(health.simulated)
    out = [f"{banner}{health.host} ({health.hostname or '?'}), driver {health.driver_version or '-'}: "
           f"{health.verdict.value.upper()}"]
    for f in health.findings:
        if f.verdict is not HealthVerdict.HEALTHY:
            out.append(f"  {f.check}: {f.verdict.value} - {f.detail}")
    for g in health.gpus:
        out.append(f"GPU {g.index} {g.name or '?'} ({g.uuid or '-'}): {g.verdict.value.upper()}")
        for f in g.findings:
            if f.verdict is not HealthVerdict.HEALTHY:
                out.append(f"  {f.check}: {f.verdict.value} - {f.detail}")
    return "\n".join(out)
