"""Results history per host, comparisons that never mix simulated and real, and the exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuws.core import paths
from gpuws.core.bench.report import build_report, text_table, to_json, to_markdown
from gpuws.core.bench.results import BenchRun, ResultsError, ResultStore, compare, load_run
from gpuws.core.errors import ValidationError

H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "mig_mode": "Disabled", "driver_version": "550.54.15"}


def make_run(host: str, bf16: float, started: str, *, simulated: bool = False, harness: str = "gpu") -> BenchRun:
    results: list[dict[str, Any]] = [
        {"type": "result", "check": "gemm_bf16", "gpu": 0, "value": bf16, "unit": "TFLOP/s", "status": "ok",
         "harness": harness, "simulated": simulated,
         "details": {"answers": {"checked": 16384, "wrong": 0, "nonfinite": 0, "tolerance": 0.01}}},
        {"type": "result", "check": "stress", "gpu": 0, "value": 0, "unit": "mismatches", "status": "ok",
         "harness": harness, "simulated": simulated, "details": {"iterations": 10}},
    ]
    summary = {"type": "summary", "gpus": [H100], "backend": "simulated" if simulated else "torch-cuda",
               "harness": "simulated" if simulated else harness, "simulated": simulated,
               "driver_version": "550.54.15", "cuda_driver_version": "12.4"}
    return BenchRun(host=host, mode="quick", started_at=started, results=results, summary=summary)


def test_store_keeps_history_per_host_under_the_data_dir() -> None:
    store = ResultStore()
    assert store.root == paths.data_dir() / "bench"
    first = store.save(make_run("gpu1", 800.0, "2025-01-01T10:00:00.000000Z"))
    store.save(make_run("gpu1", 700.0, "2025-01-02T10:00:00.000000Z"))
    sim = store.save(make_run("demo", 790.0, "2025-01-02T11:00:00.000000Z", simulated=True))
    assert first.parent == store.root / "gpu1" and first.suffix == ".json"
    assert sim.name.endswith("-simulated.json")
    assert json.loads(sim.read_text())["simulated"] is True
    assert store.hosts() == ["demo", "gpu1"]
    history = store.history("gpu1")
    assert [r.results[0]["value"] for r in history] == [800.0, 700.0]
    assert load_run(first).verdict().value == "pass"
    assert not list(store.root.rglob(".tmp-*")), "atomic writes leave no temp file"


def test_comparison_never_mixes_simulated_and_real_runs() -> None:
    store = ResultStore()
    store.save(make_run("gpu2", 900.0, "2025-01-01T10:00:00.000000Z"))
    store.save(make_run("demo", 100.0, "2025-01-01T10:00:00.000000Z", simulated=True))
    run = make_run("gpu1", 720.0, "2025-01-03T10:00:00.000000Z")
    others = store.latest_per_host(run)
    assert list(others) == ["gpu2"]
    rows = {(r.check, r.gpu): r for r in compare(run, {f"host {h}": r for h, r in others.items()})}
    bf16 = rows[("gemm_bf16", 0)]
    assert bf16.baseline == 900.0 and bf16.change == pytest.approx(-0.2)
    # Passing a simulated run in anyway: it is left out.
    sim = make_run("demo", 100.0, "2025-01-01T10:00:00.000000Z", simulated=True)
    assert all(not r.others for r in compare(run, {"sim": sim}))


@pytest.mark.parametrize("host", ["../etc", "a/b", "", ".", "x" * 65, "a b", "-"])
def test_hostile_host_names_cannot_escape_the_store(host: str) -> None:
    store = ResultStore()
    if host == "-":  # a plain dash is a valid file name inside the store
        store.save(make_run(host, 1.0, "2025-01-01T00:00:00Z"))
        return
    with pytest.raises(ValidationError) as err:
        store.save(make_run(host, 1.0, "2025-01-01T00:00:00Z"))
    assert err.value.field == "host"


def test_unreadable_results_are_reported_or_skipped(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "bench")
    good = store.save(make_run("gpu1", 800.0, "2025-01-01T10:00:00Z"))
    (good.parent / "broken.json").write_text("{not json")
    (good.parent / "list.json").write_text("[1, 2]")
    assert len(store.history("gpu1")) == 1
    with pytest.raises(ResultsError):
        load_run(good.parent / "broken.json")
    with pytest.raises(ResultsError):
        BenchRun.from_dict({"host": "x"})


def test_report_json_markdown_and_table_carry_the_labels() -> None:
    sim = make_run("demo", 790.0, "2025-01-01T10:00:00Z", simulated=True)
    report = build_report(sim)
    assert report["simulated"] is True and "SIMULATED" in report["label"]
    check = next(c for c in report["checks"] if c["check"] == "gemm_bf16")
    assert {"measured", "datasheet", "ratio", "verdict", "unit"} <= set(check)
    assert check["datasheet"] == 989.5 and check["verdict"] == "pass"
    assert report["summary"]["verdict"] == report["verdict"] == "pass"
    assert report["gpus"][0]["name"] == H100["name"] and report["gpus"][0]["driver_version"] == "550.54.15"
    assert json.loads(to_json(report))["verdict"] == "pass"
    md = to_markdown(report)
    assert "> **SIMULATED" in md and "| gemm_bf16 gpu0 | 790 | 990 | 80% | TFLOP/s | pass |" in md
    table = text_table(report)
    assert table.splitlines()[0].startswith("[SIMULATED") and "verdict: PASS" in table

    cpu = make_run("box", 0.05, "2025-01-01T10:00:00Z", harness="cpu")
    cpu_report = build_report(cpu)
    assert cpu_report["verdict"] == "inconclusive"
    assert cpu_report["label"] == "CPU harness check \u2014 not a GPU measurement"
    assert all(c["datasheet"] is None for c in cpu_report["checks"])


def test_an_interrupted_run_is_inconclusive() -> None:
    run = make_run("gpu1", 800.0, "2025-01-01T10:00:00Z")
    run.cancelled = True
    assert run.verdict().value == "inconclusive"
    assert build_report(run)["cancelled"] is True
