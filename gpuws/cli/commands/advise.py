"""`gpuws advise NAME`: right-size advice per GPU (keep, smaller, larger, stop) with the money.

A CLI process holds no telemetry history, so it first watches the host for `--observe` seconds
(the same telemetry stream as `gpuws watch`) and advises on that window. Advice needs at least
`--min-data` seconds of samples (default 30); with less a GPU gets "not enough data".
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from collections import defaultdict
from typing import Any

from gpuws.cli.output import fail, print_json, sim_banner
from gpuws.core.advice import DEFAULT_MIN_DATA_S, AdvicePolicy, GpuAdvice, parse_duration
from gpuws.core.errors import ValidationError
from gpuws.core.telemetry.sample import GpuSample

DEFAULT_OBSERVE_S = 120.0
MAX_OBSERVE_S = 24 * 3600.0
_STREAM_GRACE_S = 60.0  # the stream's own start (agent upload, clock skew) on top of --observe

_EPILOG = """JSON: {"host": NAME, "window_s": N, "gpus": [{"gpu": I, "current": LAYOUT, "advice":
"keep"|"smaller"|"larger"|"stop"|"not enough data", "target": LAYOUT_OR_NULL, "price_delta_per_hour":
X_OR_NULL, "confidence": "low"|"medium"|"high", "reasons": [...]}]}
exit status: 0 ok, 1 other error, 2 bad arguments, 3 authentication failed, 4 unknown or changed
host key, 5 host unreachable or the stream dropped, 6 no NVIDIA driver, 7 timed out"""


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Register `gpuws advise`."""
    parser = sub.add_parser(
        "advise",
        help="right-size advice per GPU from measured use: keep, smaller, larger or stop, with the price change",
        description="Watch the host of profile NAME for --observe seconds, then advise per GPU. NAME 'demo' "
        "without such a profile uses the built-in simulated GPU host.",
        epilog=_EPILOG,
    )
    parser.add_argument("name", metavar="NAME", help="host profile name")
    parser.add_argument("--window", default="24h", metavar="DURATION",
                        help="how far back to look, e.g. 90s, 15m, 24h (default 24h; at most what was observed)")
    parser.add_argument("--observe", type=float, default=DEFAULT_OBSERVE_S, metavar="SECONDS",
                        help=f"watch the host this long first (default {DEFAULT_OBSERVE_S:g})")
    parser.add_argument("--min-data", type=float, default=DEFAULT_MIN_DATA_S, metavar="SECONDS",
                        help=f"least span of samples for advice; less is 'not enough data' "
                        f"(default {DEFAULT_MIN_DATA_S:g})")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                        help="seconds between samples while observing (0.1-5, default 1)")
    parser.add_argument("--json", action="store_true", help="print the advice as one JSON document")
    parser.add_argument("--accept-new", action="store_true",
                        help="trust the host key if this host has none recorded yet (never a changed key)")
    parser.set_defaults(handler=run_advise)


def run_advise(args: argparse.Namespace) -> int:
    try:
        window_s = parse_duration(args.window)
        if not (math.isfinite(args.observe) and 0 < args.observe <= MAX_OBSERVE_S):
            raise ValidationError("--observe", f"must be more than 0 and at most {MAX_OBSERVE_S:g} seconds")
        if not 0.1 <= args.interval <= 5.0:
            raise ValidationError("--interval", "must be between 0.1 and 5 seconds")
        policy = AdvicePolicy(min_data_s=args.min_data)
    except ValidationError as exc:
        return fail(str(exc), 2)
    doc, advices, simulated = asyncio.run(_advise(args, window_s, policy))
    if args.json:
        print_json(doc)
    else:
        print(format_advice(f"{sim_banner(simulated)}{args.name}", doc["window_s"], advices))
    return 0


async def _advise(
    args: argparse.Namespace, window_s: float, policy: AdvicePolicy
) -> tuple[dict[str, Any], list[GpuAdvice], bool]:
    from gpuws.app.targets import open_target
    from gpuws.core.advice import advise_host, host_report, series_from_samples
    from gpuws.remote.resize import MigResizer
    from gpuws.remote.telemetry import TelemetryStream

    async with open_target(args.name, accept_new=args.accept_new) as connection:
        profile = connection.profile
        states = await MigResizer(connection.runner).read_gpus()
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

