"""A scored benchmark run as a report: the `gpuws bench --json` object, Markdown, and a text table."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from gpuws.core.bench.datasheets import detect_model
from gpuws.core.bench.results import BenchRun, ComparisonRow
from gpuws.core.bench.verdicts import CPU_LABEL, Outcome, Verdict, overall
from gpuws.core.simulation import SIM_LABEL


def run_label(run: BenchRun) -> str | None:
    """The label a run must carry wherever it is shown: SIMULATED, the CPU harness note, or None."""
    if run.simulated:
        return f"{SIM_LABEL}: figures from the simulated GPU host, not a measurement"
    if run.harness == "cpu":
        return CPU_LABEL
    return None


def build_report(run: BenchRun) -> dict[str, Any]:
    """The report object (what `gpuws bench NAME --json` prints and what is exported as JSON)."""
    outcomes = run.outcomes()
    verdict = overall(outcomes)
    s = run.summary
    gpus = [
        {
            "index": g.get("index"),
            "name": g.get("name"),
            "model": detect_model(str(g.get("name") or "")),
            "uuid": g.get("uuid"),
            "driver_version": g.get("driver_version"),
            "cuda_version": s.get("cuda_driver_version"),
            "mig_mode": g.get("mig_mode"),
            "memory_total_mib": g.get("memory_total_mib"),
        }
        for g in s.get("gpus") or []
        if isinstance(g, dict)
    ]
    return {
        "host": run.host,
        "started_at": run.started_at,
        "mode": run.mode,
        "simulated": run.simulated,
        "harness": run.harness,
        "label": run_label(run),
        "backend": s.get("backend"),
        "gpus": gpus,
        "driver_version": s.get("driver_version"),
        "cuda_driver_version": s.get("cuda_driver_version"),
        "cuda_runtime_version": s.get("cuda_runtime_version"),
        "duration_s": s.get("duration_s"),
        "cancelled": run.cancelled,
        "timed_out": run.timed_out or bool(s.get("timed_out")),
        "error": run.error or s.get("error"),
        "checks": [o.to_dict() for o in outcomes],
        "verdict": verdict.value,
        "summary": {"verdict": verdict.value, "counts": _counts(outcomes)},
    }


def _counts(outcomes: list[Outcome]) -> dict[str, int]:
    counts = Counter(o.verdict.value for o in outcomes)
    return {v.value: counts.get(v.value, 0) for v in Verdict}


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, default=str)


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e6:
            return f"{int(value):,}"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}" if abs(value) >= 1 else f"{value:.3g}"
    return str(value)


def _what(row: dict[str, Any]) -> str:
    device = "cpu" if row.get("harness") == "cpu" else "gpu"
    where = "" if row.get("gpu") is None else f" {device}{row['gpu']}"
    if row.get("peer") is not None:
        where += f"->gpu{row['peer']}"
    harness = " [cpu]" if row.get("harness") == "cpu" else ""
    return f"{row['check']}{where}{harness}"


def text_table(report: dict[str, Any]) -> str:
    """Measured vs datasheet with verdicts, for a terminal."""
    header = ("check", "measured", "datasheet", "ratio", "unit", "verdict", "note")
    rows = [header]
    for c in report["checks"]:
        ratio = "-" if c.get("ratio") is None else f"{c['ratio']:.0%}"
        rows.append((_what(c), _fmt(c.get("measured")), _fmt(c.get("datasheet")), ratio,
                     c.get("unit") or "", c["verdict"].upper(), c.get("reason") or ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
             for r in rows]
    head = []
    if report.get("label"):
        head.append(f"[{report['label']}]")
    names = ", ".join(f"{g['index']}: {g['name']}" for g in report["gpus"]) or "no GPU"
    head.append(f"{report['host']}: {names}; driver {report.get('driver_version') or '-'}, "
                f"CUDA {report.get('cuda_driver_version') or '-'}; backend {report.get('backend') or '-'}")
    counts = ", ".join(f"{n} {k}" for k, n in report["summary"]["counts"].items() if n)
    tail = f"verdict: {report['verdict'].upper()} ({counts})"
    return "\n".join([*head, *lines, tail])


def to_markdown(report: dict[str, Any], comparison: list[ComparisonRow] | None = None) -> str:
    """The report (and an optional comparison with earlier runs / other hosts) as Markdown."""
    out = [f"# gpuws benchmark: {report['host']}", ""]
    if report.get("label"):
        out += [f"> **{report['label']}**", ""]
    out += [
        f"- started: {report['started_at']} ({report['mode']})",
        f"- verdict: **{report['verdict'].upper()}**",
        f"- backend: {report.get('backend') or '-'}; driver {report.get('driver_version') or '-'}; "
        f"CUDA driver {report.get('cuda_driver_version') or '-'}, runtime {report.get('cuda_runtime_version') or '-'}",
    ]
    for g in report["gpus"]:
        out.append(f"- GPU {g['index']}: {g['name']} (catalog model: {g.get('model') or 'unknown'})")
    out += ["", "| check | measured | datasheet | ratio | unit | verdict | note |", "|---|---|---|---|---|---|---|"]
    for c in report["checks"]:
        ratio = "-" if c.get("ratio") is None else f"{c['ratio']:.0%}"
        note = str(c.get("reason") or "").replace("|", "\\|")
        out.append(f"| {_what(c)} | {_fmt(c.get('measured'))} | {_fmt(c.get('datasheet'))} | {ratio} | "
                   f"{c.get('unit') or ''} | {c['verdict']} | {note} |")
    if comparison:
        out += ["", "## Compared with other runs", "", "| check | this run | baseline (median) | change | others |",
                "|---|---|---|---|---|"]
        for row in comparison:
            change = "-" if row.change is None else f"{row.change:+.1%}"
            others = ", ".join(f"{k}: {_fmt(v)}" for k, v in row.others.items()) or "-"
            gpu = "" if row.gpu is None else f" gpu{row.gpu}"
            out.append(f"| {row.check}{gpu} | {_fmt(row.measured)} | {_fmt(row.baseline)} | {change} | {others} |")
    return "\n".join(out) + "\n"
