"""A host's benchmark history as the tab needs it, and comparisons built from it (Qt-free).

Loading reads files, so it runs off the GUI thread (`AsyncBridge.run_blocking`); comparing is
pure and cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuws.core.bench.results import BenchRun, ComparisonRow, ResultStore, comparable, compare
from gpuws.core.errors import GpuwsError

EARLIER_RUNS = 3  # earlier runs of the same host a run is compared with


@dataclass
class HostHistory:
    """Runs of one host (oldest first) and every other host's runs."""

    host: str
    runs: list[BenchRun] = field(default_factory=list)
    other_hosts: dict[str, list[BenchRun]] = field(default_factory=dict)

    @property
    def latest(self) -> BenchRun | None:
        return self.runs[-1] if self.runs else None

    def with_run(self, run: BenchRun) -> HostHistory:
        """This history with `run` (of this host) added in time order."""
        runs = sorted([*self.runs, run], key=lambda r: r.started_at)
        return HostHistory(self.host, runs, self.other_hosts)


def load_history(store: ResultStore, host: str) -> HostHistory:
    """Everything the store keeps for `host` and the other hosts. Blocking: not on the GUI thread.

    A host name the store cannot use (see `validate_host_key`) simply has no history.
    """
    try:
        runs = store.history(host)
    except GpuwsError:
        runs = []
    others: dict[str, list[BenchRun]] = {}
    for other in store.hosts():
        if other != host:
            others[other] = store.history(other)
    return HostHistory(host, runs, others)


def short_time(started_at: str) -> str:
    """'2024-05-01T12:03:04.123Z' -> '2024-05-01 12:03' (UTC, as stored)."""
    return started_at[:16].replace("T", " ")


def comparison_baselines(run: BenchRun, history: HostHistory) -> dict[str, BenchRun]:
    """What `run` is compared with: up to three earlier comparable runs of its host, and each
    other host's newest comparable run. Labels name them ("earlier 2024-05-01 12:03", "host b")."""
    earlier = [r for r in history.runs if r.started_at < run.started_at and comparable(r, run)]
    baselines = {f"earlier {short_time(r.started_at)}": r for r in earlier[-EARLIER_RUNS:]}
    for host, runs in sorted(history.other_hosts.items()):
        matching = [r for r in runs if comparable(r, run)]
        if matching:
            baselines[f"host {host}"] = matching[-1]
    return baselines


def comparison_for(run: BenchRun, history: HostHistory) -> list[ComparisonRow]:
    """`run`'s figures next to its baselines (see `comparison_baselines`)."""
    return compare(run, comparison_baselines(run, history))
