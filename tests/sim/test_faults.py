"""Benchmark faults of the simulated host: what its nvidia-smi shows, and how they are given."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.sim.faults import FAULTS_ENV, FaultKind, FaultSpecError, SimFault, faults_from_env, parse_faults
from gpuws.sim.server import DemoHost
from tests.sim.conftest import SmiRunner


def test_slow_link_trains_the_link_at_x4(smi: SmiRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    query = ["--query-gpu=index,pcie.link.width.current,pcie.link.width.max", "--format=csv,noheader,nounits"]
    _, before, _ = smi(*query)
    assert before.splitlines()[1].replace(" ", "") == "1,16,16"
    monkeypatch.setenv(FAULTS_ENV, "slow-link:1")
    _, after, _ = smi(*query)
    assert after.splitlines()[1].replace(" ", "") == "1,4,16"
    assert after.splitlines()[0].replace(" ", "") == "0,16,16"


def test_busy_shows_another_process_at_high_utilisation(smi: SmiRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUWS_SIM_JOBS_PAUSED", "1")  # as while the benchmark runs: the demo jobs stand aside
    monkeypatch.setenv(FAULTS_ENV, "busy:2")
    _, apps, _ = smi("--query-compute-apps=pid,process_name", "--format=csv,noheader")
    assert [line for line in apps.splitlines() if line.strip()] == [line for line in apps.splitlines()
                                                                    if "someone_elses_job" in line]
    _, util, _ = smi("--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits")
    by_gpu = dict(line.replace(" ", "").split(",") for line in util.splitlines())
    assert int(by_gpu["2"]) >= 90 and int(by_gpu["0"]) == 0


def test_the_demo_host_passes_its_faults_to_its_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = DemoHost(state_dir=tmp_path, faults=parse_faults(["bench-nan:0", "throttle:1,busy:1"]))
    assert host._env()[FAULTS_ENV] == "bench-nan:0,throttle:1,busy:1"
    monkeypatch.setenv(FAULTS_ENV, "copy-corrupt:3")
    assert DemoHost(state_dir=tmp_path)._env()[FAULTS_ENV] == "copy-corrupt:3"  # the in-process demo
    assert faults_from_env({FAULTS_ENV: "slow-link:0"}) == [SimFault(FaultKind.SLOW_LINK, 0)]


@pytest.mark.parametrize("spec", ["melt:0", "busy", "busy:x", "busy:-1"])
def test_bad_fault_is_refused(spec: str) -> None:
    with pytest.raises(FaultSpecError):
        parse_faults([spec])


def test_demo_host_refuses_a_bad_fault_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo-host", "--fault", "busy:0", "--fault", "overheat:1"]) == 2
    err = capsys.readouterr().err
    assert "unknown kind 'overheat'" in err and len(err.strip().splitlines()) == 1
