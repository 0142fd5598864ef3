"""`gpuws advise NAME`: right-size advice per GPU (keep, smaller, larger, stop) with the money.

A CLI process holds no telemetry history, so for a host it first watches the host for `--observe`
seconds (the same telemetry stream as `gpuws watch`) and advises on that window. For a fleet
(NAME a fleet profile) the history is in its Prometheus: the advice reads the last `--window`
of it (`gpuws.app.advice.advise_fleet`, the fleet view's source too). Advice needs at least
`--min-data` seconds of samples (default: 30 for a host observed now, 600 for history: a fleet);
with less a GPU gets "not enough data yet (N s of M s)".
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from gpuws.cli.connecting import tty_prompts
from gpuws.cli.output import Subcommands, decimal_number, fail, print_json, sim_banner
from gpuws.core.advice import (
    DEFAULT_MIN_DATA_S,
    HISTORY_MIN_DATA_S,
    AdvicePolicy,
    GpuAdvice,
    parse_duration,
)
from gpuws.core.errors import ValidationError
from gpuws.core.telemetry.sample import GpuSample
from gpuws.core.terminal import printable

if TYPE_CHECKING:
    from gpuws.app.advice import FleetAdviceReport
    from gpuws.core.fleet.profiles import FleetProfile

DEFAULT_OBSERVE_S = 120.0
MAX_OBSERVE_S = 24 * 3600.0
_STREAM_GRACE_S = 60.0  # the stream's own start (agent upload, clock skew) on top of --observe

_EPILOG = """JSON: {"host": NAME, "window_s": N, "gpus": [{"gpu": I, "current": LAYOUT, "advice":
"keep"|"smaller"|"larger"|"stop"|"not enough data", "target": LAYOUT_OR_NULL, "price_delta_per_hour":
X_OR_NULL, "confidence": "low"|"medium"|"high", "reasons": [...]}]}

Fleets (NAME a fleet profile, when no host profile has that name): advice from what the fleet's
Prometheus holds over --window (default 24h, downsampled by Prometheus), one entry per physical GPU,
which also names its node and card: "host" (dcgm-exporter's Hostname), "uuid", "model", and "profile"
(the host profile it matched by GPU UUID or host name, else null). "gpu" is the index on that node.
"current" is "full", or the MIG layout its instances' GPU_I_PROFILE labels spell ("2x3g.40gb"); a MIG
GPU's utilisation is its instances' engine activity (DCGM_FI_PROF_GR_ENGINE_ACTIVE) weighted by their
compute slices. Prices: the matched host profile's, else the fleet's --price-per-gpu-hour as the
full-card price, else none ("price_delta_per_hour": null). --observe and --interval are for hosts
only: given for a fleet they are refused (exit 2), since its history is already in Prometheus.

exit status: 0 ok, 1 other error, 2 bad arguments, 3 authentication failed, 4 unknown or changed
host key, 5 host unreachable or the stream dropped, 6 no NVIDIA driver, 7 timed out"""


def register(sub: Subcommands) -> None:
    """Register `gpuws advise`."""
    parser = sub.add_parser(
        "advise",
        help="right-size advice per GPU from measured use: keep, smaller, larger or stop, with the price change",
        description="Watch the host of profile NAME for --observe seconds, then advise per GPU. NAME 'demo' "
        "without such a profile uses the built-in simulated GPU host. NAME may also be a fleet profile "
        "(`gpuws fleet add`): then the advice comes from the last --window its Prometheus holds.",
        epilog=_EPILOG,
    )
    parser.add_argument("name", metavar="NAME", help="host profile name, or fleet profile name")
    parser.add_argument("--window", default="24h", metavar="DURATION",
                        help="how far back to look, e.g. 90s, 15m, 24h (default 24h; for a host at most what was "
                        "observed, for a fleet at most 30 days of its Prometheus)")
    parser.add_argument("--observe", type=decimal_number, default=None, metavar="SECONDS",
                        help=f"watch the host this long first (default {DEFAULT_OBSERVE_S:g}; hosts only)")
    parser.add_argument("--min-data", type=decimal_number, default=None, metavar="SECONDS",
                        help=f"least span of samples for advice; less is 'not enough data' "
                        f"(default {DEFAULT_MIN_DATA_S:g} for a host observed now, {HISTORY_MIN_DATA_S:g} "
                        "for a fleet's history)")
    parser.add_argument("--interval", type=decimal_number, default=None, metavar="S",
                        help="seconds between samples while observing (0.1-5, default 1; hosts only)")
    parser.add_argument("--json", action="store_true", help="print the advice as one JSON document")
    parser.add_argument("--accept-new", action="store_true",
                        help="trust the host key if this host (or a fleet's --via host) has none recorded yet "
                        "(never a changed key)")
    parser.set_defaults(handler=run_advise)


def run_advise(args: argparse.Namespace) -> int:
    """`gpuws advise NAME`: watch a host (or a fleet's Prometheus window) and print right-size advice per GPU."""
    fleet = _fleet_named(args.name)
    try:
        window_s = parse_duration(args.window)
        if fleet is not None:
            given = [flag for flag, value in (("--observe", args.observe), ("--interval", args.interval))
                     if value is not None]
            if given:
                raise ValidationError(given[0], f"{args.name!r} is a fleet: its history is in Prometheus, "
                                      "nothing to observe; use --window")
        else:
            args.observe = DEFAULT_OBSERVE_S if args.observe is None else args.observe
            args.interval = 1.0 if args.interval is None else args.interval
            if not (math.isfinite(args.observe) and 0 < args.observe <= MAX_OBSERVE_S):
                raise ValidationError("--observe", f"must be more than 0 and at most {MAX_OBSERVE_S:g} seconds")
            if not 0.1 <= args.interval <= 5.0:
                raise ValidationError("--interval", "must be between 0.1 and 5 seconds")
        default_min = HISTORY_MIN_DATA_S if fleet is not None else DEFAULT_MIN_DATA_S
        policy = AdvicePolicy(min_data_s=default_min if args.min_data is None else args.min_data)
    except ValidationError as exc:
        return fail(str(exc), 2)
    if fleet is not None:
        return _run_fleet(args, fleet, window_s, policy)
    doc, advices, simulated = asyncio.run(_advise(args, window_s, policy))
    if args.json:
        print_json(doc)
    else:
        print(format_advice(f"{sim_banner(simulated)}{args.name}", doc["window_s"], advices))
    return 0


def _fleet_named(name: str) -> FleetProfile | None:
    """The fleet profile NAME when no host profile (nor the demo) takes that name first."""
    from gpuws.core.fleet.profiles import FleetNotFound, FleetStore
    from gpuws.core.profiles import ProfileStore

    if name == "demo" or any(p.name == name for p in ProfileStore().load()):
        return None
    try:
        return FleetStore().get(name)
    except FleetNotFound:
        return None


def _run_fleet(args: argparse.Namespace, fleet: FleetProfile, window_s: float, policy: AdvicePolicy) -> int:
    from gpuws.core.fleet.model import MAX_WINDOW_S

    if window_s > MAX_WINDOW_S:
        return fail(f"--window: at most {MAX_WINDOW_S / 86400:g} days for a fleet", 2)
    report = asyncio.run(_advise_fleet(args, fleet, window_s, policy))
    if args.json:
        print_json(report.to_dict())
        return 0
    lines = [f"{sim_banner(report.simulated)}fleet {fleet.name}  advice over {window_s:g} s"]
    for entry in report.gpus:
        a = entry.advice
        where = printable(entry.host) + (f" (profile {entry.profile})" if entry.profile else "")
        lines.append(f"{where}  {printable(a.headline())}  [confidence {a.confidence.value}; "
                     f"now {printable(a.current)}]")
        lines.extend(f"    - {printable(reason)}" for reason in a.reasons)
    print("\n".join(lines))
    return 0


async def _advise_fleet(args: argparse.Namespace, fleet: FleetProfile, window_s: float,
                        policy: AdvicePolicy) -> FleetAdviceReport:
    from gpuws.app.advice import advise_fleet
    from gpuws.app.fleet import open_fleet

    async with open_fleet(fleet, accept_new=args.accept_new) as source:
        return await advise_fleet(source, window_s=window_s, policy=policy)


async def _advise(
    args: argparse.Namespace, window_s: float, policy: AdvicePolicy
) -> tuple[dict[str, Any], list[GpuAdvice], bool]:
    from gpuws.app.hostio import TelemetryStream
    from gpuws.app.resize import read_gpus
    from gpuws.app.targets import open_target
    from gpuws.core.advice import advise_host, host_report, series_from_samples

    async with open_target(args.name, accept_new=args.accept_new, **tty_prompts()) as connection:
        profile = connection.profile
        states = await read_gpus(connection.runner)
        if not args.json:
            print(f"{sim_banner(profile.simulated)}observing {args.name} for {args.observe:g} s...",
                  file=sys.stderr, flush=True)
        samples: dict[int, list[GpuSample]] = defaultdict(list)
        hint = True if profile.simulated else None
        stream = TelemetryStream(connection.runner, hz=1.0 / args.interval, simulated=hint)
        started = time.time()
        try:
            async with asyncio.timeout(args.observe + _STREAM_GRACE_S), stream:
                async for batch in stream:
                    for sample in batch.samples:
                        if sample.mig is None:  # per GPU; MIG devices are inside their GPU's figures
                            samples[sample.gpu].append(sample)
                    if time.time() - started >= args.observe:
                        break
        except TimeoutError:
            pass  # a stream slower to start than the grace: advise on what came (maybe not enough)
    # The window is what was asked for; a stream that started late shows as a short, low-confidence span.
    used_s = min(window_s, args.observe, time.time() - started)
    cutoff = time.time() - used_s
    series = {gpu: series_from_samples([s for s in rows if s.t >= cutoff]) for gpu, rows in samples.items()}
    advices = advise_host(states, profile, series, policy)
    return host_report(args.name, used_s, advices), advices, profile.simulated


def format_advice(title: str, window_s: float, advices: list[GpuAdvice]) -> str:
    """The human-readable advice: a headline per GPU, then its reasons."""
    lines = [f"{title}  advice over {window_s:g} s"]
    for a in advices:
        lines.append(f"{a.headline()}  [confidence {a.confidence.value}; now {a.current}]")
        lines.extend(f"    - {reason}" for reason in a.reasons)
    return "\n".join(lines)

