"""`gpuws probe` as a user runs it: a subprocess against a real sshd, with a saved profile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.profiles import ProfileStore
from tests.support.real_fixtures import REAL_FIXTURES
from tests.support.sshd import SshdServer, free_port

pytestmark = [pytest.mark.sshd]

REPO = Path(__file__).resolve().parents[2]
XML = REAL_FIXTURES / "nvidia-smi-xml" / "dual_2070-v13.xml"


@pytest.fixture
def gpu_host(tmp_path: Path) -> SshdServer:
    assert XML.is_file(), f"fixture missing: {XML}"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f'#!/bin/sh\nexec cat "{XML}"\n')
    (bin_dir / "nvidia-smi").chmod(0o755)
    server = SshdServer(tmp_path / "sshd", env={"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"})
    server.start()
    yield server  # type: ignore[misc]
    server.stop()


def save_profile(server: SshdServer, name: str = "rig", **changes: object) -> None:
    fields: dict[str, object] = {"name": name, "host": "127.0.0.1", "port": server.port, "user": server.user,
                                 "auth": AuthMethod.KEY, "key_path": str(server.client_key)}
    fields.update(changes)
    ProfileStore().add(HostProfile(**fields))  # type: ignore[arg-type]


def gpuws(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "gpuws", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=60, cwd=REPO)


def test_probe_json_after_accepting_the_new_key(gpu_host: SshdServer, isolated_home: Path) -> None:
    save_profile(gpu_host)
    refused = gpuws("probe", "rig", "--json", home=isolated_home)
    assert refused.returncode == 4 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "SHA256:" in refused.stderr and "--accept-new" in refused.stderr

    done = gpuws("probe", "rig", "--accept-new", "--json", home=isolated_home)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["host"]["driver_found"] is True and data["simulated"] is False
    assert [g["name"] for g in data["gpus"]] == ["NVIDIA GeForce RTX 2070"] * 2
    for field in ("index", "name", "uuid", "pci_bus_id", "memory_total_mib", "driver_version", "cuda_version",
                  "mig_mode", "virtualization_mode", "pcie_gen_current", "pcie_gen_max", "pcie_width_current",
                  "pcie_width_max", "power_limit_w", "ecc_mode"):
        assert field in data["gpus"][0], field
    assert data["gpus"][1]["memory_total_mib"] == 8192

    table = gpuws("probe", "rig", home=isolated_home)  # key recorded: no flag needed now
    assert table.returncode == 0, table.stderr
    assert "NVIDIA GeForce RTX 2070" in table.stdout and "8192 MiB" in table.stdout
    assert "SIMULATED" not in table.stdout


def test_probe_failures_are_one_line_with_distinct_codes(gpu_host: SshdServer, isolated_home: Path,
                                                        tmp_path: Path) -> None:
    other_key = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True)
    save_profile(gpu_host, name="badkey", key_path=str(other_key))
    save_profile(gpu_host, name="down", port=free_port())
    (isolated_home / ".ssh" / "known_hosts").write_text(gpu_host.known_hosts_line())
    cases = {"badkey": (3, "authentication failed"), "down": (5, "cannot reach"), "nosuch": (2, "nosuch")}
    for name, (code, text) in cases.items():
        result = gpuws("probe", name, home=isolated_home)
        assert result.returncode == code, (name, result.stderr)
        assert text in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr

    gpu_host.restart(new_host_key=True)
    save_profile(gpu_host, name="changed")
    changed = gpuws("probe", "changed", "--accept-new", home=isolated_home)
    assert changed.returncode == 4 and "HOST KEY CHANGED" in changed.stderr
    assert f"{isolated_home / '.ssh' / 'known_hosts'}:1" in changed.stderr


def test_probe_demo_without_a_profile_uses_the_simulated_host(isolated_home: Path) -> None:
    result = gpuws("probe", "demo", "--json", home=isolated_home)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["simulated"] is True and data["host"]["simulated"] is True
    assert any("H100" in gpu["name"] for gpu in data["gpus"])
    table = gpuws("probe", "demo", home=isolated_home)
    assert table.stdout.startswith("[SIMULATED GPU HOST] demo")
    assert not (isolated_home / ".ssh" / "known_hosts").exists()  # the demo key is trusted in memory only
