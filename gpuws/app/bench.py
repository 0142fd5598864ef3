"""The benchmark service both front ends call: run on a host, then keep the run. Qt-free.

`run_benchmark` sends the runner (the package `gpuws/agent/bench/`, as one zip) over the host's connection and
gathers its events (`gpuws.remote.bench`); for a provider check (`mode="check"`) the passive health
check (`gpuws.app.health`) runs first and its findings join the run as "health.*" results;
`keep_run` puts the finished run in the host's history
and, for a provider check, writes the report to send to the provider. `gpuws bench` and the
Benchmarks tab both go through here, so a run is saved and reported the same way from either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuws.app.health import check_health
from gpuws.core.bench.check import write_check_report
from gpuws.core.bench.results import BenchRun, ResultStore, now_iso
from gpuws.core.errors import GpuwsError
from gpuws.core.health.collect import health_results
from gpuws.core.runner import CommandRunner, CommandTimeout
from gpuws.remote.bench import BenchError, EventCallback
from gpuws.remote.bench import run_benchmark as run_runner

__all__ = ["BenchError", "KeptRun", "keep_run", "record_start", "run_benchmark"]

INTERRUPTED = "interrupted: gpuws ended before the run finished; what it measured is lost"


def record_start(store: ResultStore, host: str, mode: str) -> Path | None:
    """Put a run marked interrupted in `host`'s history before it starts, so a run that gpuws never
    finishes (killed, the machine went down) still shows in the history; `keep_run(...,
    replaces=path)` swaps it for the finished run. None when it could not be written (the run
    goes on; saving the finished run reports the problem). Blocking (disk)."""
    placeholder = BenchRun(host=host, mode=mode, started_at=now_iso(), interrupted=True, error=INTERRUPTED)
    try:
        return store.save(placeholder)
    except (GpuwsError, OSError):
        return None


async def run_benchmark(runner: CommandRunner, mode: str = "quick", *, host: str = "host",
                        expected: Mapping[str, Any] | None = None, on_event: EventCallback | None = None,
                        timeout: float | None = None, extra_args: tuple[str, ...] = (),
                        python: str = "python3") -> BenchRun:
    """Run the benchmark on the host behind `runner` (see `gpuws.remote.bench.run_benchmark`); for
    `mode="check"` the health check first, its findings kept as "health.*" results."""
    first: list[dict[str, Any]] = []
    if mode == "check":
        try:
            health = await check_health(runner, host, expected=dict(expected) if expected else None)
            first = health_results(health)
        except (GpuwsError, CommandTimeout) as exc:  # never lose the benchmark to the health step
            first = [{"type": "result", "check": "health.run", "gpu": None, "value": None, "status": "inconclusive",
                      "reason": f"the health check could not run: {exc or 'timed out'}", "harness": "gpu"}]
        for event in first:
            if on_event is not None:
                on_event(event)
    run = await run_runner(runner, mode, host=host, expected=expected, on_event=on_event, timeout=timeout,
                           extra_args=extra_args, python=python)
    run.results[0:0] = first
    return run


@dataclass
class KeptRun:
    """What `keep_run` did: where the run and its check report went, and what failed.

    Failures are kept, not raised, so a run that took minutes is never lost to a report that
    could not be written; each front end says them its own way.
    """

    run: BenchRun
    saved_path: Path | None = None
    report_paths: tuple[Path, Path] | None = None  # (Markdown, JSON) of a check
    save_error: GpuwsError | OSError | None = None  # a host name unfit for a folder, a full disk
    report_error: OSError | None = None


def keep_run(run: BenchRun, store: ResultStore, *, save: bool = True, report_dir: Path | None = None,
             replaces: Path | None = None) -> KeptRun:
    """Save `run` in its host's history (unless `save` is False); for a check (`run.mode ==
    "check"`) write the provider report in `report_dir`, else next to the saved run, else in the
    current directory. No report when saving was asked for and failed. `replaces`: the record
    `record_start` wrote, removed once the run is saved. Blocking (disk)."""
    kept = KeptRun(run)
    if save:
        try:
            kept.saved_path = store.save(run)
        except (GpuwsError, OSError) as exc:
            kept.save_error = exc
            return kept
        if replaces is not None and replaces != kept.saved_path:
            replaces.unlink(missing_ok=True)
    if run.mode == "check":
        folder = report_dir or (kept.saved_path.parent if kept.saved_path is not None else Path.cwd())
        try:
            kept.report_paths = write_check_report(run, folder)
        except OSError as exc:
            kept.report_error = exc
    return kept
