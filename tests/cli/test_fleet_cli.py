"""`gpuws fleet ...` and `gpuws demo-fleet` end to end: real Prometheus, real sshd, real keyring."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpuws.cli.main import main
from gpuws.core.fleet.profiles import SECRET_SERVICE, FleetStore
from gpuws.core.profiles import ProfileStore
from tests.remote.helpers import key_profile, trust
from tests.support.prometheus import start_prometheus
from tests.support.sshd import SshdServer, free_port

REPO = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_remove(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "fleet", "add", "lab", "--prometheus", "http://prom.internal:9090/",
                         "--selector", 'cluster="a"', "--json")
    assert code == 0, err
    assert json.loads(out) == {"name": "lab", "prometheus": "http://prom.internal:9090", "via": None,
                               "selector": 'cluster="a"', "auth": "none", "user": None,
                               "price_per_gpu_hour": None, "ca_file": None, "client_cert": None,
                               "client_key": None, "tenant": None, "insecure": False}
    code, out, _ = run(capsys, "fleet", "list")
    assert code == 0 and 'lab  http://prom.internal:9090 {cluster="a"}' in out
    code, _, err = run(capsys, "fleet", "add", "LAB", "--prometheus", "http://x:9090")
    assert code == 2 and "already exists" in err
    code, out, _ = run(capsys, "fleet", "remove", "lab", "--json")
    assert code == 0 and json.loads(out) == {"name": "lab", "removed": True}
    code, out, _ = run(capsys, "fleet", "list", "--json")
    assert json.loads(out) == []


@pytest.mark.parametrize(("argv", "needle"), [
    (["--prometheus", "prom:9090"], "http://"),
    (["--prometheus", "http://a:b@prom:9090"], "no user or password in the URL"),
    (["--prometheus", "http://p:9090", "--selector", "cluster=a"], "selector"),
    (["--prometheus", "http://p:9090", "--via", "nosuchhost"], "no host profile named 'nosuchhost'"),
    (["--prometheus", "http://p:9090", "--user", "me"], "--password-stdin"),
])
def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    code, _out, err = run(capsys, "fleet", "add", "x", *argv)
    assert code == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not FleetStore().path.exists()


def test_unknown_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "fleet", "snapshot", "nope", "--json")
    assert code == 2 and "no fleet named 'nope'" in err


def test_unreachable_prometheus_exits_5(capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "fleet", "add", "gone", "--prometheus", f"http://127.0.0.1:{free_port()}")
    code, out, err = run(capsys, "fleet", "snapshot", "gone", "--json")
    assert code == 5 and out == "" and err.startswith("gpuws: error: gone: cannot reach Prometheus")


@pytest.mark.slow
def test_snapshot_and_watch_json(capsys: pytest.CaptureFixture[str], sim_prometheus: Any) -> None:
    server, fleet = sim_prometheus
    run(capsys, "fleet", "add", "lab", "--prometheus", server.url)
    code, out, err = run(capsys, "fleet", "snapshot", "lab", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["fleet"] == "lab" and len(doc["gpus"]) == 20
    first = doc["gpus"][0]
    for name in ("host", "gpu", "uuid", "model", "util_gpu_pct", "mem_used_mib", "mem_total_mib", "temp_c",
                 "power_w", "sm_clock_mhz", "throttle_reasons", "source"):
        assert name in first
    assert {g["host"] for g in doc["gpus"]} == {h.hostname for h in fleet.hosts}
    code, out, err = run(capsys, "fleet", "watch", "lab", "--json", "--interval", "1", "--count", "2")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 40 and all(line["fleet"] == "lab" and line["source"] == "prometheus" for line in lines)
    code, out, _ = run(capsys, "fleet", "snapshot", "lab")
    assert code == 0 and out.startswith("[SIMULATED] fleet lab") and "16 GPUs (4 MIG instances) on 4 hosts" in out
    # Most urgent first: the near-OOM GPU heads the table.
    assert out.splitlines()[2].endswith("OOM risk")


@pytest.mark.slow
@pytest.mark.sshd
def test_via_reaches_prometheus_through_an_ssh_tunnel(capsys: pytest.CaptureFixture[str], sim_prometheus: Any,
                                                      sshd: SshdServer, isolated_home: Path) -> None:
    server, _ = sim_prometheus
    trust(sshd, isolated_home)
    ProfileStore().add(key_profile(sshd, "bastion"))
    # "localhost" as the cluster-internal name: only the SSH host resolves and reaches it.
    inside = server.url.replace("127.0.0.1", "localhost")
    code, _, err = run(capsys, "fleet", "add", "far", "--prometheus", inside, "--via", "bastion")
    assert code == 0, err
    code, out, err = run(capsys, "fleet", "snapshot", "far", "--json")
    assert code == 0, err
    assert len(json.loads(out)["gpus"]) == 20


@pytest.mark.keyring
def test_credentials_go_to_the_keyring_only(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    import io

    import keyring

    secret = f"tok-{os.getpid()}-{time.time_ns()}"
    name = f"kr{os.getpid()}"
    monkeypatch.setattr(sys, "stdin", io.StringIO(secret + "\n"))
    try:
        code, out, err = run(capsys, "fleet", "add", name, "--prometheus", "http://p:9090", "--token-stdin", "--json")
        assert code == 0, err
        assert keyring.get_password(SECRET_SERVICE, f"{name}:token") == secret
        assert secret not in out + err and secret not in FleetStore().path.read_text()
        assert json.loads(out)["auth"] == "bearer"
        code, _, err = run(capsys, "fleet", "remove", name)
        assert code == 0, err
        assert keyring.get_password(SECRET_SERVICE, f"{name}:token") is None
    finally:
        with contextlib.suppress(keyring.errors.KeyringError):
            keyring.delete_password(SECRET_SERVICE, f"{name}:token")


@pytest.mark.slow
def test_demo_fleet_prints_its_targets_and_prometheus_scrapes_them(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "gpuws", "demo-fleet", "--hosts", "8", "--gpus-per-host", "8"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    prom = None
    try:
        assert proc.stdout is not None
        line = json.loads(proc.stdout.readline())
        assert line["simulated"] is True and len(line["targets"]) == 8
        prom = start_prometheus(tmp_path / "prom", line["targets"])
        prom.wait_scraped(targets=8, series_min=64)
        data: Any = prom.get("/api/v1/query?query=count(DCGM_FI_DEV_GPU_TEMP%7Bsimulated=%22true%22%7D)")
        assert data["data"]["result"][0]["value"][1] == "64"
    finally:
        if prom is not None:
            prom.stop()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)  # also closes the pipes
        assert proc.returncode == 0, err


def test_demo_fleet_refuses_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "demo-fleet", "--hosts", "0")
    assert code == 2 and "--hosts" in err
    for bad in ("gpu-gone:0/1", "gpu-lost:5/0", "gpu-lost:0/9", "gpu-lost"):
        code, _, err = run(capsys, "demo-fleet", "--hosts", "2", "--gpus-per-host", "2", "--fault", bad)
        assert code == 2 and "gpu-lost, xid-app" in err and err.count("\n") == 1


@pytest.mark.parametrize(("argv", "needle"), [
    (["--prometheus", "http://p:9090", "--ca-file", "/ca.pem"], "need an https:// URL"),
    (["--prometheus", "https://p:9090", "--client-cert", "/c.pem"], "needs its key"),
    (["--prometheus", "https://p:9090", "--insecure", "--ca-file", "/ca.pem"], "does not go with --ca-file"),
    (["--prometheus", "https://p:9090", "--tenant", "a b"], "tenant ID"),
])
def test_bad_connection_options_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str],
                                             needle: str) -> None:
    code, _out, err = run(capsys, "fleet", "add", "x", *argv)
    assert code == 2 and needle in err and err.count("\n") == 1
    assert not FleetStore().path.exists()


def test_connection_options_are_kept_and_listed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "fleet", "add", "mimir", "--prometheus", "https://mimir.example/prometheus",
                         "--tenant", "team-a", "--ca-file", "ca.pem", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["tenant"] == "team-a" and doc["ca_file"] == str(Path("ca.pem").resolve()) and doc["insecure"] is False
    assert FleetStore().get("mimir").tenant == "team-a"
    code, out, _ = run(capsys, "fleet", "list")
    assert "tenant team-a" in out and "INSECURE" not in out


def test_a_hand_edited_fleets_file_keeps_every_fleet_listed(capsys: pytest.CaptureFixture[str]) -> None:
    # #27: the fleets file gets the same treatment as profiles.toml (never moved aside for one record).
    path = FleetStore().path
    path.parent.mkdir(parents=True, exist_ok=True)
    text = ('schema_version = 1\n[[fleets]]\nname = "ok"\nprometheus = "http://p:9090"\nselecter = "x"\n'
            '[[fleets]]\nname = "bad"\nprometheus = "http://p:9090"\nauth = "kerberos"\n')
    path.write_text(text)
    code, out, err = run(capsys, "fleet", "list", "--json")
    assert code == 0
    listed = {f["name"]: f["error"] for f in json.loads(out)}
    assert listed["ok"] is None and (listed["bad"]["line"], listed["bad"]["key"]) == (9, "auth")
    assert f"{path}:5: selecter:" in err and "did you mean 'selector'" in err
    assert path.read_text() == text
    code, out, err = run(capsys, "fleet", "repair", "--json")
    assert code == 0 and json.loads(out)["kept"] == ["ok"]
