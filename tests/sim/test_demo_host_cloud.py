"""The demo host as a cloud guest (issue 31): `--bind` in 127.0.0.0/8 only, and `--gpus` l4 (a whole
NVIDIA L4, as the real capture shows it) and l4/8, l4/4, l4/2 (the vGPU fractions an AWS G6f guest
sees), read through the same probe and telemetry as a real host, matching the catalog's types."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gpuws.app.demo import key_from_known_hosts_line
from gpuws.cli.main import main
from gpuws.core.inventory import Inventory
from gpuws.core.resize.instance_types import instance_type, matches_gpu
from gpuws.remote.connection import HostConnection
from gpuws.remote.probe import probe
from gpuws.remote.ssh_runner import SshRunner
from gpuws.remote.telemetry import TelemetryStream
from gpuws.sim.server import BindRefused, DemoHost, DemoHostInfo, demo_profile

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "nvidia-smi-captures"
CAPTURE = CAPTURES / "l4__550.90.07__table-and-a.txt"


async def _probe_and_sample(info: DemoHostInfo) -> tuple[Inventory, float | None, str]:
    conn = HostConnection(demo_profile(info), password=info.password,
                          known_host_key=key_from_known_hosts_line(info.known_hosts_line))
    async with conn:
        runner = SshRunner(conn)
        inventory = await probe(runner)
        table = (await runner.run(["nvidia-smi"], timeout=30)).stdout
        async with TelemetryStream(runner, hz=5.0) as stream:
            async for batch in stream:
                return inventory, batch.samples[0].mem_total_mib, table
    raise AssertionError("no telemetry batch")


def _run(gpus: str | None, state: Path, bind: str = "127.0.0.1") -> tuple[Inventory, float | None, str, DemoHostInfo]:
    async def scenario() -> tuple[Inventory, float | None, str, DemoHostInfo]:
        host = DemoHost(gpus=gpus, state_dir=state, bind=bind)
        info = await host.start()
        try:
            return (*await _probe_and_sample(info), info)
        finally:
            await host.stop()

    return asyncio.run(scenario())


@pytest.mark.parametrize("address", ["10.0.0.7", "0.0.0.0", "::1", "192.168.1.1", "localhost", "127.0.0.300"])
def test_bind_outside_127_8_is_refused_with_exit_2(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo-host", "--bind", address]) == 2
    err = capsys.readouterr().err
    assert "--bind" in err and "127.0.0.0/8" in err
    with pytest.raises(BindRefused):
        DemoHost(bind=address)


@pytest.mark.parametrize(("spec", "itype", "profile", "mib"), [
    ("l4/8", "g6f.large", "NVIDIA L4-3Q", 3072),
    ("l4/4", "g6f.2xlarge", "NVIDIA L4-6Q", 6144),
    ("l4/2", "g6f.4xlarge", "NVIDIA L4-12Q", 12288),
])
def test_a_g6f_guest_on_another_loopback_address_probes_as_its_type(
        tmp_path: Path, spec: str, itype: str, profile: str, mib: int) -> None:
    inventory, telemetry_total, table, info = _run(spec, tmp_path / "demo", bind="127.0.0.7")
    assert info.host == "127.0.0.7" and info.known_hosts_line.startswith("[127.0.0.7]:")
    (gpu,) = inventory.gpus
    assert gpu.name == profile and gpu.vgpu_profile == profile and gpu.is_vgpu_slice
    assert gpu.virtualization_mode == "VGPU" and gpu.memory_total_mib == mib
    assert telemetry_total == mib  # the agent's NVML reads the same slice
    assert f"{profile}  " in table and f"/  {mib:>5}MiB" in table
    found = instance_type("aws", itype)
    assert found is not None and matches_gpu(found, mib, gpu.vgpu_profile) is None
    whole = instance_type("aws", "g6.xlarge")
    assert whole is not None and matches_gpu(whole, mib, gpu.vgpu_profile) is not None


def test_a_whole_l4_shows_what_the_real_capture_shows(tmp_path: Path) -> None:
    inventory, telemetry_total, table, _info = _run("l4", tmp_path / "demo")
    (gpu,) = inventory.gpus
    capture = CAPTURE.read_text()
    assert gpu.name == "NVIDIA L4" and not gpu.is_vgpu_slice and gpu.vgpu_profile is None
    assert gpu.memory_total_mib == 23034 == telemetry_total and "/  23034MiB" in capture
    # The name cell of the table is laid out as the real driver lays it out.
    assert "|   0  NVIDIA L4                      On  |" in capture
    assert "|   0  NVIDIA L4                      On  |" in table
    g6 = instance_type("aws", "g6.xlarge")
    assert g6 is not None and matches_gpu(g6, gpu.memory_total_mib, gpu.vgpu_profile) is None


def test_a_restart_with_another_types_gpu_replaces_it_and_keeps_key_and_password(tmp_path: Path) -> None:
    state = tmp_path / "demo"
    first, _, _, before = _run("l4/8", state, bind="127.0.0.8")
    after_inv, _, _, after = _run("l4/2", state, bind="127.0.0.9")  # "the instance came back as 1/2"
    kept_inv, _, _, kept = _run(None, state)  # no --gpus: what the state has
    assert [g.name for g in first.gpus] == ["NVIDIA L4-3Q"]
    assert [g.name for g in after_inv.gpus] == ["NVIDIA L4-12Q"] == [g.name for g in kept_inv.gpus]
    assert before.host_key_fingerprint == after.host_key_fingerprint == kept.host_key_fingerprint
    assert before.password == after.password == kept.password
