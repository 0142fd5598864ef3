"""GPU benchmark scoring: datasheet catalog, verdicts, results history and reports.

The on-host runner (the package `gpuws/agent/bench/`) measures; this package judges and keeps.
"""

from gpuws.core.bench.datasheets import CATALOG, Datasheet, datasheet_for, detect_model
from gpuws.core.bench.report import build_report, text_table, to_json, to_markdown
from gpuws.core.bench.results import BenchRun, ComparisonRow, ResultStore, compare
from gpuws.core.bench.verdicts import Outcome, Verdict, overall, score_run

__all__ = [
    "CATALOG",
    "BenchRun",
    "ComparisonRow",
    "Datasheet",
    "Outcome",
    "ResultStore",
    "Verdict",
    "build_report",
    "compare",
    "datasheet_for",
    "detect_model",
    "overall",
    "score_run",
    "text_table",
    "to_json",
    "to_markdown",
]
