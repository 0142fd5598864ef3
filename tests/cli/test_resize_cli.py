"""`gpuws slices` and `gpuws resize` against a real sshd with the simulated nvidia-smi."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.paths import known_hosts_path
from gpuws.core.profiles import ProfileStore
from gpuws.core.resize.audit import AuditLog
from gpuws.sim.state import SimStateStore
from tests.support.sshd import SshdServer

pytestmark = [pytest.mark.sshd, pytest.mark.slow]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_slices_and_resize_commands(
    sshd: SshdServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store = SimStateStore(Path(sshd.env["GPUWS_SIM_STATE"]))
    with store.update() as state:
        for gpu in state.gpus:
            gpu.set_load(0.0)
    known_hosts_path().write_text(sshd.known_hosts_line())
    ProfileStore().add(HostProfile(name="gpu1", host="127.0.0.1", port=sshd.port, user=sshd.user,
                                   auth=AuthMethod.KEY, key_path=str(sshd.client_key), price_per_hour=8.0))

    code, out, _ = _run(capsys, "slices", "gpu1", "--json")
    assert code == 0
    gpus = json.loads(out)["gpus"]
    h100 = gpus[0]
    assert h100["current"] == "full" and h100["price_source"] == "profile"
    targets = {row["target"]: row for row in h100["targets"]}
    assert targets["full"]["price_per_hour"] == 2.0 and targets["full"]["current"]
    assert targets["3g.40gb"]["compute_share"] == pytest.approx(3 / 7, abs=1e-4)
    assert targets["3g.40gb"]["memory_gib"] == 39.5 and targets["7x1g.10gb"]["price_per_hour"] == 2.0
    assert gpus[2]["targets"][0]["note"] == "not MIG-capable: the whole card only"
    assert [row["target"] for row in gpus[3]["targets"]] == ["1/8", "1/4", "1/2", "full"]  # the vGPU guest

    code, out, _ = _run(capsys, "resize", "gpu1", "3g.40gb", "--dry-run", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["outcome"] == "dry run: nothing changed"
    assert doc["price_per_hour"] == {"before": 2.0, "after": pytest.approx(0.8571, abs=1e-4), "source": "profile"}
    assert doc["plan"]["steps"][0]["command"] == "nvidia-smi -i 0 -mig 1"

    code, _, err = _run(capsys, "resize", "gpu1", "3g.40gb")  # stdin is not a terminal here
    assert code == 2 and "pass --yes" in err

    code, _, err = _run(capsys, "resize", "gpu1", "3x3g.40gb", "--yes")
    assert code == 2 and "at most 2 3g.40gb" in err

    assert not AuditLog().read()  # nothing ran yet
    code, out, err = _run(capsys, "resize", "gpu1", "3g.40gb", "--yes", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert code == 0 and doc["outcome"] == "target verified" and doc["after"] == "3g.40gb"
    assert doc["before"] == "full" and doc["price_per_hour"]["after"] == pytest.approx(0.8571, abs=1e-4)

    # The saved profile follows: the slice is recorded and the host price drops by the difference.
    saved = ProfileStore().get("gpu1")
    assert saved.slice_profile == "gpu0=3g.40gb" and saved.price_per_hour == pytest.approx(8.0 - 2.0 + 0.8571, abs=1e-3)

    code, out, _ = _run(capsys, "resize", "gpu1", "full", "--yes")
    assert code == 0 and "outcome: target verified; GPU 0 is now full" in out
    saved = ProfileStore().get("gpu1")
    assert saved.slice_profile == "gpu0=full" and saved.price_per_hour == pytest.approx(8.0, abs=1e-3)
    assert [r.phase for r in AuditLog().read("gpu1")] == ["started", "finished", "started", "finished"]
    records = [r for r in AuditLog().read("gpu1") if r.phase == "finished"]
    assert [(r.before, r.after, r.outcome) for r in records] == [
        ("full", "3g.40gb", "target verified"), ("3g.40gb", "full", "target verified")]
    assert records[0].plan and records[0].plan[0]["argv"] == ["nvidia-smi", "-i", "0", "-mig", "1"]
