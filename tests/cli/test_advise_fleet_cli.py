"""`gpuws advise FLEET`: right-size advice from what a real Prometheus holds of simulated dcgm-exporters.

The `sim_prometheus` fleet (tests/conftest.py) is static: sim-gpu-node-000 GPU 3 (H100) and
sim-gpu-node-002 GPU 3 (L40S) are idle, sim-gpu-node-001 GPU 3 (A100) runs at 99 % and is
thermally throttled, GPU 0 of sim-gpu-node-000 is in MIG mode with two 3g.40gb instances, one
busy (engine activity 0.91) and one idle. A host profile for sim-gpu-node-000 prices its GPUs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuws.cli.main import main
from gpuws.core.models import HostProfile
from gpuws.core.profiles import ProfileStore

pytestmark = pytest.mark.slow
SHARED_KEYS = {"gpu", "current", "advice", "target", "price_delta_per_hour", "confidence", "reasons"}
FLEET_KEYS = SHARED_KEYS | {"host", "uuid", "model", "profile"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def wait_for_samples(server: Any, samples: int) -> None:
    server.wait_samples('Hostname="sim-gpu-node-000",gpu="3"', samples)


def test_advise_fleet_json(capsys: pytest.CaptureFixture[str], sim_prometheus: Any) -> None:
    server, fleet = sim_prometheus
    wait_for_samples(server, 20)
    ProfileStore().add(HostProfile(name="node0", host="sim-gpu-node-000", price_per_hour=12.0))  # 3.00/GPU
    assert run(capsys, "fleet", "add", "lab", "--prometheus", server.url)[0] == 0
    code, out, err = run(capsys, "advise", "lab", "--min-data", "10", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"host", "window_s", "gpus"} and doc["host"] == "lab" and doc["window_s"] == 86400
    by = {(g["host"], g["gpu"]): g for g in doc["gpus"]}
    assert len(by) == len(doc["gpus"]) == 16  # physical GPUs: MIG instances are inside theirs
    for gpu in doc["gpus"]:
        assert set(gpu) == FLEET_KEYS and gpu["reasons"] and gpu["confidence"] == "low"  # seconds of data

    idle = by[("sim-gpu-node-000", 3)]
    assert idle["uuid"] == fleet.hosts[0].gpus[3].uuid and idle["model"] == "NVIDIA H100 80GB HBM3"
    assert (idle["advice"], idle["target"], idle["current"]) == ("stop", None, "full")
    assert (idle["profile"], idle["price_delta_per_hour"]) == ("node0", -3.0)
    assert idle["reasons"][0].startswith("idle 100 % of")

    saturated = by[("sim-gpu-node-001", 3)]  # the full card is already the largest layout
    assert (saturated["advice"], saturated["target"], saturated["profile"]) == ("keep", None, None)
    assert saturated["price_delta_per_hour"] is None  # no host profile and no fleet price: no money
    assert saturated["reasons"][0].endswith("(sustained >= 80 %)")
    assert any(r.startswith("throttled 100 % of the busy time") for r in saturated["reasons"])

    unpriced_idle = by[("sim-gpu-node-002", 3)]  # an L40S, not MIG-capable, nobody prices it
    assert (unpriced_idle["advice"], unpriced_idle["price_delta_per_hour"]) == ("stop", None)

    # MIG: engine activity 91 % on one 3g.40gb, 0 % on the other: one 3g.40gb does the work.
    mig = by[("sim-gpu-node-000", 0)]
    assert (mig["current"], mig["advice"], mig["target"]) == ("2x3g.40gb", "smaller", "3g.40gb")
    assert mig["price_delta_per_hour"] == pytest.approx(-3.0 * 3 / 7, abs=1e-3)
    assert any("GI 1 3g.40gb engine activity p50 91 %" in r for r in mig["reasons"])


def test_advise_fleet_text_and_refused_observe(capsys: pytest.CaptureFixture[str], sim_prometheus: Any) -> None:
    server, _ = sim_prometheus
    wait_for_samples(server, 12)
    assert run(capsys, "fleet", "add", "lab", "--prometheus", server.url, "--price-per-gpu-hour", "2")[0] == 0
    code, _, err = run(capsys, "advise", "lab", "--observe", "60", "--json")
    assert code == 2 and "is a fleet" in err and "--window" in err and err.count("\n") == 1
    code, out, err = run(capsys, "advise", "lab", "--window", "1h", "--min-data", "10")
    assert code == 0, err
    assert out.startswith("[SIMULATED") and "fleet lab  advice over 3600 s" in out
    # The fleet's price per GPU-hour prices GPUs no host profile matches: the idle L40S's stop saves it.
    assert "sim-gpu-node-002  GPU 3: stop it (idle) (-$2.00/h, -$1,460.00/month)" in out


def test_fleet_refusals_and_an_unreachable_prometheus(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.sshd import free_port

    assert run(capsys, "fleet", "add", "gone", "--prometheus", f"http://127.0.0.1:{free_port()}")[0] == 0
    code, _, err = run(capsys, "advise", "gone", "--interval", "1")
    assert code == 2 and "--interval" in err and "is a fleet" in err
    code, _, err = run(capsys, "advise", "gone", "--window", "31d")
    assert code == 2 and "at most 30 days" in err
    code, out, err = run(capsys, "advise", "gone", "--json")
    assert code == 5 and out == "" and "cannot reach Prometheus" in err
    # A host profile of the same name is the host: --observe is taken (and the host is unreachable).
    ProfileStore().add(HostProfile(name="gone", host="127.0.0.1", port=free_port(), user="nobody"))
    code, _, err = run(capsys, "advise", "gone", "--observe", "1", "--json")
    assert code == 5 and "is a fleet" not in err
