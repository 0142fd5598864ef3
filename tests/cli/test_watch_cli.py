"""`gpuws watch` end to end: a real sshd whose nvidia-smi replays a real capture, and the demo host."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.paths import known_hosts_path
from gpuws.core.profiles import ProfileStore
from tests.remote.telemetry_hosts import install_replay_nvidia_smi, start_sshd
from tests.support.sshd import SshdServer

REQUIRED = (
    "t", "gpu", "uuid", "util_gpu_pct", "util_mem_pct", "mem_used_mib", "mem_total_mib", "temp_c", "power_w",
    "power_limit_w", "sm_clock_mhz", "mem_clock_mhz", "pcie_rx_kib_s", "pcie_tx_kib_s", "throttle_reasons", "source",
)


@contextlib.contextmanager
def replay_host(tmp_path: Path) -> Iterator[SshdServer]:
    """A real sshd whose `nvidia-smi` replays the H100 capture (idle row, then load row) and whose
    python3 has no NVML, so watch falls back to nvidia-smi as it would on such a host."""
    bin_dir = tmp_path / "replay" / "bin"
    install_replay_nvidia_smi(bin_dir, "h100-80gb-hbm3__590.48.01.txt")
    server = SshdServer(tmp_path / "sshd", env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    start_sshd(server)
    ProfileStore().add(HostProfile(name="h100", host="127.0.0.1", port=server.port, user=server.user,
                                   auth=AuthMethod.KEY, key_path=str(server.client_key)))
    known_hosts_path().write_text(server.known_hosts_line())
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.sshd
def test_watch_json_reports_the_real_capture_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with replay_host(tmp_path):
        assert main(["watch", "h100", "--json", "--count", "2", "--interval", "0.2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    idle, load = (json.loads(line) for line in lines)
    for obj in (idle, load):
        assert set(REQUIRED) <= set(obj)
        assert datetime.fromisoformat(obj["t"].replace("Z", "+00:00")).year >= 2024
        assert obj["source"] == "nvidia-smi" and obj["simulated"] is False
        assert obj["gpu"] == 0 and obj["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
        assert obj["mem_total_mib"] == 81559 and obj["power_limit_w"] == 700.0 and obj["mem_clock_mhz"] == 2619
        assert obj["pcie_rx_kib_s"] is None and obj["pcie_tx_kib_s"] is None  # nvidia-smi cannot say
        assert obj["throttle_reasons"] == []
    assert (idle["util_gpu_pct"], idle["mem_used_mib"], idle["temp_c"], idle["power_w"]) == (0, 0, 41, 69.85)
    assert (idle["sm_clock_mhz"], idle["idle"]) == (345, True)
    assert (load["util_gpu_pct"], load["util_mem_pct"], load["mem_used_mib"]) == (100, 11, 19818)
    assert (load["temp_c"], load["power_w"], load["sm_clock_mhz"], load["idle"]) == (59, 631.95, 1980, False)


@pytest.mark.sshd
def test_watch_table_names_the_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with replay_host(tmp_path):
        assert main(["watch", "h100", "--count", "1", "--interval", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "source: nvidia-smi" in out and "SIMULATED" not in out
    assert "81559" in out and "(idle)" in out


@pytest.mark.sshd
def test_watch_nvml_only_fails_clearly_without_nvml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with replay_host(tmp_path):
        assert main(["watch", "h100", "--json", "--count", "1", "--source", "nvml"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuws: error: NVML unavailable on the host") and "Traceback" not in err


def test_watch_demo_host_uses_the_agent_and_is_labelled(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "demo", "--json", "--count", "1", "--interval", "0.1"]) == 0
    objs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(objs) >= 4 and {o["gpu"] for o in objs} >= {0, 1, 2, 3}
    assert all(o["simulated"] is True and o["source"] == "nvml" for o in objs)


def test_watch_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "demo", "--interval", "10"]) == 2
    assert "--interval" in capsys.readouterr().err
    assert main(["watch", "no-such-host", "--count", "1"]) == 2  # refused input: no such profile
    assert "no-such-host" in capsys.readouterr().err
