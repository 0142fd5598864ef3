"""Every `--fault KIND:GPU` of the demo host is played on that GPU or refused with exit 2 and the
reason (issue 32: `pcie-capped:3` on the demo's vGPU changed nothing and the host read healthy)."""

from __future__ import annotations

import json

import pytest

from gpuws.cli.main import main
from gpuws.sim.faults import FaultKind, FaultSpecError, SimFault, parse_faults
from gpuws.sim.health import check_faults, fault_refusal
from gpuws.sim.models import DEFAULT_GPU_SPEC, parse_gpu_spec

DEMO = parse_gpu_spec(DEFAULT_GPU_SPEC)  # h100, a100, l40s, vgpu

REFUSED = [
    ("pcie-capped:3", "vGPU guest"),
    ("slow-link:3", "vGPU guest"),
    ("power-capped:3", "no power limit"),
    ("fabric-down:1", "not on an NVSwitch fabric"),
    ("nvlink-errors:2", "has no NVLink"),
    ("remap-pending:2", "no remapped rows"),
    ("busy:9", "has no GPU 9"),
]


@pytest.mark.parametrize(("spec", "why"), REFUSED)
def test_health_refuses_a_fault_the_demo_cannot_play(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch, spec: str, why: str) -> None:
    monkeypatch.setenv("GPUWS_SIM_FAULTS", spec)
    assert main(["health", "demo", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"fault {spec}" in captured.err and why in captured.err


def test_demo_host_refuses_before_it_serves(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo-host", "--fault", "busy:0", "--fault", "pcie-capped:3"]) == 2
    err = capsys.readouterr().err
    assert "pcie-capped:3" in err and "vGPU guest" in err and len(err.strip().splitlines()) == 1


def test_every_kind_on_every_demo_gpu_is_played_or_refused_with_a_reason() -> None:
    for kind in FaultKind:
        for gpu in range(len(DEMO)):
            fault = SimFault(kind, gpu)
            why = fault_refusal(fault, DEMO)
            if why is None:
                check_faults([fault], DEMO)  # played: nothing raised
            else:
                with pytest.raises(FaultSpecError, match=str(fault)):
                    check_faults([fault], DEMO)
                assert len(why) > 10


def test_host_wide_faults_take_any_gpu_index() -> None:
    check_faults(parse_faults(["no-vnc:0", "software-gl:7"]), DEMO)


def test_pcie_capped_now_applies_and_reads_degraded(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUWS_SIM_FAULTS", "pcie-capped:1")
    assert main(["health", "demo", "--json"]) == 11
    report = json.loads(capsys.readouterr().out)
    (pcie,) = [f for f in report["gpus"][1]["findings"] if f["check"] == "pcie"]
    assert pcie["verdict"] == "degraded" and "running at Gen3 where card and platform allow Gen4" in pcie["detail"]
