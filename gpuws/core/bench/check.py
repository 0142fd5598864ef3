"""`gpuws bench NAME --check`: "did I get what I paid for?" as one screen per GPU and a report.

Built from a scored run (see `report.build_report`): per GPU the model and memory as sold (the
expected profile, else the datasheet model) against what the host reports, link and clocks,
sustained GEMM and memory bandwidth against the datasheet, correctness and throttling, and the
GPU's own verdict. The report keeps every raw figure, the driver, the host identity and the
timestamps, so that it can be sent to the provider as it is.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuws.core.bench.report import build_report, to_json
from gpuws.core.bench.results import BenchRun
from gpuws.core.bench.verdicts import GEMM_CHECKS, Outcome, Verdict, overall

_RANK = {"fail": 0, "inconclusive": 1, "warn": 2, "pass": 3, "skipped": 4}


def _pick(checks: list[dict[str, Any]], gpu: int, name: str) -> dict[str, Any] | None:
    return next((c for c in checks if c["check"] == name and c.get("gpu") == gpu), None)


def _facts(run: BenchRun, gpu: int, name: str) -> dict[str, Any]:
    found = next((r for r in run.results if r.get("check") == name and r.get("gpu") == gpu), None)
    facts = (found or {}).get("facts")
    return facts if isinstance(facts, dict) else {}


def _best_gemm(checks: list[dict[str, Any]], gpu: int) -> dict[str, Any] | None:
    """The GEMM format that says most: the highest datasheet figure that was scored."""
    scored = [c for c in checks if c["check"] in GEMM_CHECKS and c.get("gpu") == gpu and c["verdict"] != "skipped"]
    with_sheet = [c for c in scored if c.get("datasheet")]
    return max(with_sheet, key=lambda c: c["datasheet"]) if with_sheet else (scored[0] if scored else None)


def _line(c: dict[str, Any] | None) -> dict[str, Any] | None:
    if c is None:
        return None
    d = c.get("details") or {}
    return {"check": c["check"], "verdict": c["verdict"], "measured": c.get("measured"),
            "sustained_p10": d.get("sustained_p10"), "peak": d.get("peak"),
            "datasheet": c.get("datasheet"), "ratio": c.get("ratio"), "unit": c.get("unit"), "reason": c.get("reason")}


def check_report(run: BenchRun, report: dict[str, Any]) -> dict[str, Any]:
    """The `--check` report: the full scored report plus a verdict block per GPU."""
    checks: list[dict[str, Any]] = report["checks"]
    expected = run.expected or {}
    gpus = []
    for g in report["gpus"]:
        index = g.get("index")
        if not isinstance(index, int):
            continue
        mine = [c for c in checks if c.get("gpu") == index]
        verdict = overall(Outcome(c["check"], index, Verdict(c["verdict"])) for c in mine)
        pcie = _facts(run, index, "env.pcie")
        stress = _pick(checks, index, "stress")
        telemetry = ((stress or {}).get("details") or {}).get("telemetry") or {}
        throttles = [c for c in mine if c["check"] in ("env.throttle_idle", "stress", *GEMM_CHECKS)
                     and c["verdict"] in ("warn", "fail") and "throttl" in str(c.get("reason") or "")]
        gpus.append({
            "index": index,
            "verdict": verdict.value,
            "sold": {"model": expected.get("model") or g.get("model"), "gpu_count": expected.get("gpu_count")},
            "found": {"name": g.get("name"), "model": g.get("model"), "memory_total_mib": g.get("memory_total_mib"),
                      "uuid": g.get("uuid"), "mig_mode": g.get("mig_mode")},
            "link": {"gen_current": pcie.get("gen_current"), "gen_max": pcie.get("gen_max"),
                     "width_current": pcie.get("width_current"), "width_max": pcie.get("width_max"),
                     "verdict": (_pick(checks, index, "env.pcie") or {}).get("verdict")},
            "clocks_under_load_mhz": {"min": telemetry.get("sm_clock_min_mhz"),
                                      "max": telemetry.get("sm_clock_max_mhz")},
            "gemm": _line(_best_gemm(checks, index)),
            "memory": _line(_pick(checks, index, "mem_copy")),
            "correctness": _line(stress),
            "throttling": [str(c.get("reason")) for c in throttles],
            "problems": [f"{c['check']}: {c.get('reason')}" for c in sorted(mine, key=lambda c: _RANK[c["verdict"]])
                         if c["verdict"] in ("fail", "inconclusive", "warn")],
        })
    summary = run.summary
    return {
        **report,
        "kind": "gpuws-check",
        "host_identity": {"profile": run.host, "hostname": summary.get("hostname"),
                          "gpu_uuids": [g.get("uuid") for g in report["gpus"]],
                          "driver_version": report.get("driver_version"),
                          "cuda_driver_version": report.get("cuda_driver_version")},
        "timestamps": {"started_at": run.started_at, "runner_started_unix": summary.get("started_at_unix"),
                       "runner_finished_unix": summary.get("finished_at_unix"),
                       "report_written_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
        "per_gpu": gpus,
        "raw_results": run.results,
    }


def _fig(line: dict[str, Any] | None) -> str:
    if not line or line.get("measured") is None:
        return f"- ({line['reason']})" if line else "-"
    sustained = line.get("sustained_p10")
    shown = sustained if sustained is not None else line["measured"]
    text = f"{shown:,.0f} {line.get('unit') or ''}".strip()
    if line.get("datasheet"):
        text += f" sustained of {line['datasheet']:,.0f} ({(line.get('ratio') or 0):.0%})"
    if line.get("peak") is not None:
        text += f", peak {line['peak']:,.0f}"
    return f"{text} [{line['verdict'].upper()}]"


def check_screen(full: dict[str, Any]) -> str:
    """The one-screen verdict: a few lines per GPU."""
    out = []
    if full.get("label"):
        out.append(f"[{full['label']}]")
    ident = full["host_identity"]
    out.append(f"{full['host']} ({ident.get('hostname') or '?'}), driver {ident.get('driver_version') or '-'}: "
               f"{full['verdict'].upper()}")
    for g in full["per_gpu"]:
        found, sold, link = g["found"], g["sold"], g["link"]
        mem = found.get("memory_total_mib")
        size = f" ({mem / 1024:,.0f} GiB)" if mem else ""
        out.append(f"GPU {g['index']}: {g['verdict'].upper()}  sold {sold.get('model') or '?'}, found "
                   f"{found.get('name')}{size}")
        clocks = g["clocks_under_load_mhz"]
        out.append(f"  link Gen{link.get('gen_current') or '?'} x{link.get('width_current') or '?'} "
                   f"(max Gen{link.get('gen_max') or '?'} x{link.get('width_max') or '?'}); clocks under load "
                   f"{clocks.get('min') or '?'}-{clocks.get('max') or '?'} MHz")
        out.append(f"  GEMM {(g['gemm'] or {}).get('check', '-')[5:]}: {_fig(g['gemm'])}")
        out.append(f"  memory: {_fig(g['memory'])}")
        corr = g["correctness"]
        out.append(f"  correctness: {corr['verdict'].upper()} - {corr.get('reason')}" if corr else "  correctness: -")
        if g["throttling"]:
            out.append(f"  throttling: {g['throttling'][0]}")
        for problem in g["problems"][:2]:
            out.append(f"  ! {problem}")
    return "\n".join(out)


def check_markdown(full: dict[str, Any]) -> str:
    """The provider report as Markdown: the verdict per GPU, then every check with raw numbers."""
    ident, stamps = full["host_identity"], full["timestamps"]
    out = [f"# GPU check: {full['host']}", ""]
    if full.get("label"):
        out += [f"> **{full['label']}**", ""]
    out += [f"- verdict: **{full['verdict'].upper()}**",
            f"- host: {ident.get('hostname') or '-'} (profile {full['host']})",
            f"- GPU UUIDs: {', '.join(str(u) for u in ident.get('gpu_uuids') or []) or '-'}",
            f"- driver {ident.get('driver_version') or '-'}, CUDA {ident.get('cuda_driver_version') or '-'}; "
            f"backend {full.get('backend') or '-'}",
            f"- started {stamps['started_at']}; report written {stamps['report_written_at']}", "",
            "## Per GPU", "", "```", check_screen(full), "```", "",
            "## Every check", "", "| check | gpu | measured | sustained (p10) | peak | datasheet | verdict | note |",
            "|---|---|---|---|---|---|---|---|"]
    for c in full["checks"]:
        d = c.get("details") or {}
        note = str(c.get("reason") or "").replace("|", "\\|")
        out.append(f"| {c['check']} | {'' if c.get('gpu') is None else c['gpu']} | {c.get('measured') or '-'} | "
                   f"{d.get('sustained_p10', '-')} | {d.get('peak', '-')} | {c.get('datasheet') or '-'} | "
                   f"{c['verdict']} | {note} |")
    out += ["", "The raw runner output is in the JSON report beside this file (`raw_results`)."]
    return "\n".join(out) + "\n"


def write_check_report(run: BenchRun, folder: Path) -> tuple[Path, Path]:
    """Write the provider report of `run` as `check-<time>.md` and `.json` in `folder`; OSError
    when it cannot be written."""
    full = check_report(run, build_report(run))
    stamp = run.started_at.replace(":", "").replace("-", "").replace(".", "")
    folder.mkdir(parents=True, exist_ok=True)
    md_path, json_path = folder / f"check-{stamp}.md", folder / f"check-{stamp}.json"
    md_path.write_text(check_markdown(full), encoding="utf-8")
    json_path.write_text(to_json(full) + "\n", encoding="utf-8")
    return md_path, json_path
