"""`gpuws bench NAME [--quick|--full|--check] [--allow-busy] [--json]`: the GPU sanity benchmark, scored
against datasheets; `--check` is the two-minute "did I get what I paid for?" with a provider report."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from gpuws.app.bench import keep_run
from gpuws.cli.connecting import EXIT_TIMEOUT, ExitStatus, tty_prompts
from gpuws.cli.expect import add_expect_flags, expected_from
from gpuws.cli.output import Subcommands, decimal_number, fail, print_json, sim_banner
from gpuws.core.bench.check import check_markdown, check_report, check_screen
from gpuws.core.bench.report import build_report, text_table, to_json, to_markdown
from gpuws.core.bench.results import BenchRun, ResultStore, compare
from gpuws.core.bench.verdicts import Verdict

EXIT_FAIL = ExitStatus.CHECK_FAILED  # the one table's verdict statuses (gpuws.cli.connecting)
EXIT_INCONCLUSIVE = ExitStatus.INCONCLUSIVE
EXIT_WARN = ExitStatus.CHECK_WARN

_EPILOG = """exit status: 0 pass (only a pass), 13 warn (below expectations: a power-capped or slow card;
--allow-warn makes it 0), 11 a check failed, 12 inconclusive (something could not run, e.g. no CUDA
toolchain or a CPU-only host), 1 other error, 3 authentication failed, 4 unknown or changed host
key, 5 host unreachable, 7 timed out.
Runs are kept per host under the data directory (bench/NAME/) and compared with earlier runs."""


def register(sub: Subcommands) -> None:
    """Register `gpuws bench`."""
    parser = sub.add_parser(
        "bench",
        help="run the GPU sanity benchmark on a host and score it against the datasheet",
        description="Send the benchmark runner to the host of profile NAME, run it in a temporary "
        "directory (removed afterwards), and show each figure against the card's datasheet. "
        "NAME 'demo' without such a profile uses the built-in simulated GPU host.",
        epilog=_EPILOG,
    )
    parser.add_argument("name", metavar="NAME", help="host profile name")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="short run, under a minute on a modern GPU (default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="longer repeats and stress, under five minutes")
    mode.add_argument("--check", dest="mode", action="store_const", const="check",
                      help='"did I get what I paid for?": the health check (gpuws health), then a quick run '
                           "(under 2 minutes together) with a one-screen verdict per GPU and a report (Markdown "
                           "and JSON) to send to the provider")
    parser.add_argument("--allow-busy", action="store_true",
                        help="also measure GPUs other processes are using (their throughput is then inconclusive)")
    parser.add_argument("--allow-warn", action="store_true",
                        help="exit 0 on a warn verdict too (default: 13, so that a script never reads a slow "
                             "card as a pass)")
    parser.add_argument("--report-dir", type=Path, default=None, metavar="DIR",
                        help="where --check writes its report (default: the host's history folder)")
    parser.add_argument("--json", action="store_true", help="print the scored report as one JSON object")
    parser.add_argument("--accept-new", action="store_true",
                        help="trust the host key if this host has none recorded yet (never a changed key)")
    parser.add_argument("--timeout", type=decimal_number, default=None, metavar="S",
                        help="overall time limit in seconds (default 90 quick, 330 full, 85 check)")
    add_expect_flags(parser)
    parser.add_argument("--export-json", type=Path, default=None, metavar="PATH", help="also write the report here")
    parser.add_argument("--export-md", type=Path, default=None, metavar="PATH",
                        help="also write the report (with the comparison) as Markdown")
    parser.add_argument("--no-save", action="store_true", help="do not keep this run in the host's history")
    parser.set_defaults(handler=run_bench, mode="quick")


def exit_status(verdict: str, *, allow_warn: bool = False) -> ExitStatus:
    """A run's exit status from its overall verdict: 0 only for a pass (a warn too with
    `allow_warn`), 13 warn, 11 fail, 12 anything else (inconclusive is never a pass)."""
    if verdict == Verdict.PASS:
        return ExitStatus.OK
    if verdict == Verdict.WARN:
        return ExitStatus.OK if allow_warn else EXIT_WARN
    return EXIT_FAIL if verdict == Verdict.FAIL else EXIT_INCONCLUSIVE


class _Progress:
    """Human progress lines as runner events arrive."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.simulated = False

    def __call__(self, event: dict[str, Any]) -> None:
        if not self.enabled:
            return
        kind = event.get("type")
        if event.get("simulated"):
            self.simulated = True
        banner = sim_banner(self.simulated)
        if kind == "progress":
            print(f"{banner}[{event.get('step')}/{event.get('total')}] {event.get('message')}", flush=True)
        elif kind == "log" and event.get("level") in ("warning", "error"):
            print(f"{banner}  {event.get('level')}: {event.get('message')}", flush=True)
        elif kind == "result" and event.get("value") is not None and not str(event.get("check")).startswith("env."):
            where = "" if event.get("gpu") is None else f" gpu{event['gpu']}"
            print(f"{banner}  {event.get('check')}{where}: {event['value']} {event.get('unit') or ''}", flush=True)


def run_bench(args: argparse.Namespace) -> int:
    """`gpuws bench NAME`: run the benchmark suite on a host, show each check and save the run."""

    if args.timeout is not None and args.timeout <= 0:
        return fail("--timeout must be positive", 2)
    progress = _Progress(enabled=not args.json)
    store = ResultStore()
    run, started = asyncio.run(_bench(args, progress, store))

    report = build_report(run)
    if args.mode == "check":
        return _finish_check(args, run, report, store, started)
    earlier = [r for r in store.history(run.host) if not r.interrupted]
    others = {f"earlier {r.started_at}": r for r in earlier[-3:]}
    others.update({f"host {h}": r for h, r in store.latest_per_host(run).items()})
    comparison = compare(run, others)
    kept = keep_run(run, store, save=not args.no_save, replaces=started)
    if kept.save_error is not None:
        raise kept.save_error  # to the one exit-status table in cli/main.py
    saved = kept.saved_path
    try:
        if args.export_json:
            args.export_json.write_text(to_json(report) + "\n", encoding="utf-8")
        if args.export_md:
            args.export_md.write_text(to_markdown(report, comparison), encoding="utf-8")
    except OSError as exc:
        return fail(f"cannot write the export: {exc.strerror or exc}")

    if args.json:
        print_json(report)
    else:
        print()
        print(text_table(report))
        changed = [c for c in comparison if c.change is not None and abs(c.change) >= 0.1]
        for c in changed:
            gpu = "" if c.gpu is None else f" gpu{c.gpu}"
            print(f"  {c.check}{gpu}: {c.change:+.0%} against earlier runs / other hosts (median {c.baseline:,.1f})")
        if saved is not None:
            print(f"saved: {saved}")
    if report["timed_out"] and not report["checks"]:
        return EXIT_TIMEOUT
    return exit_status(report["verdict"], allow_warn=args.allow_warn)


async def _bench(args: argparse.Namespace, progress: _Progress, store: ResultStore) -> tuple[BenchRun, Path | None]:
    """The finished run, and the interrupted record written before it started (to replace)."""
    from gpuws.app.bench import record_start
    from gpuws.app.targets import open_host

    async with open_host(args.name, accept_new=args.accept_new, probe=False, **tty_prompts()) as (workspace, record):
        progress.simulated = bool(record.profile.simulated)
        # Kept as "interrupted" should gpuws be killed before the run is saved.
        started = None if args.no_save else await asyncio.to_thread(record_start, store, args.name, args.mode)
        if progress.enabled:
            print(f"{sim_banner(progress.simulated)}running the {args.mode} benchmark on {args.name} ...", flush=True)
        run = await workspace.bench(record.profile.name, args.mode, expected=expected_from(args),
                                    on_event=progress, timeout=args.timeout,
                                    extra_args=("--allow-busy",) if args.allow_busy else ())
        return run, started


def _finish_check(args: argparse.Namespace, run: BenchRun, report: dict[str, Any], store: ResultStore,
                  started: Path | None) -> int:
    """Save the run, write the provider report (Markdown and JSON) and print the one-screen verdict."""
    kept = keep_run(run, store, save=not args.no_save, report_dir=args.report_dir, replaces=started)
    if kept.save_error is not None:
        raise kept.save_error  # to the one exit-status table in cli/main.py
    full = check_report(run, report)
    try:
        if kept.report_error is not None:
            raise kept.report_error
        assert kept.report_paths is not None
        md_path, json_path = kept.report_paths
        if args.export_json:
            args.export_json.write_text(to_json(full) + "\n", encoding="utf-8")
        if args.export_md:
            args.export_md.write_text(check_markdown(full), encoding="utf-8")
    except OSError as exc:
        return fail(f"cannot write the report: {exc.strerror or exc}")
    if args.json:
        print_json({**full, "report_files": {"markdown": str(md_path), "json": str(json_path)}})
    else:
        print()
        print(check_screen(full))
        print(f"report: {md_path} (and {json_path.name}) - send it to your provider")
    if report["timed_out"] and not report["checks"]:
        return EXIT_TIMEOUT
    return exit_status(report["verdict"], allow_warn=args.allow_warn)
