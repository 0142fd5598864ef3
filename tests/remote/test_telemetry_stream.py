"""TelemetryStream end to end: the NVML agent and the nvidia-smi fallback, locally and through a real sshd."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gpuws.core.errors import GpuwsError
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.runner import LocalRunner
from gpuws.core.telemetry.sample import SampleBatch
from gpuws.core.telemetry.store import TelemetryStore
from gpuws.remote.telemetry import AgentUnavailable, TelemetryError, TelemetryStream, measure_clock_skew
from tests.remote.telemetry_hosts import (
    install_nvml_python3,
    install_replay_nvidia_smi,
    start_simulated_nvml_host,
)
from tests.support.sshd import SshdServer, install_sim_nvidia_smi


def local_host(tmp_path: Path, *, nvml: bool, smi: str | None = "sim") -> LocalRunner:
    """A LocalRunner whose PATH looks like a GPU host: the simulated or a replayed nvidia-smi."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    if smi == "sim":
        install_sim_nvidia_smi(bin_dir)
    elif smi is not None:
        install_replay_nvidia_smi(bin_dir, smi)
    if nvml:
        install_nvml_python3(bin_dir)
    else:  # a python3 without pynvml, like a bare host
        (bin_dir / "python3").symlink_to("/usr/bin/python3")
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GPUWS_SIM_STATE": str(state), "HOME": str(tmp_path)}
    return LocalRunner(env=env)


async def take(stream: TelemetryStream, n: int) -> list[SampleBatch]:
    batches = []
    async with stream:
        async for batch in stream:
            batches.append(batch)
            if len(batches) >= n:
                break
    return batches


def test_agent_path_streams_every_gpu_from_nvml(tmp_path: Path) -> None:
    stream = TelemetryStream(local_host(tmp_path, nvml=True), hz=10)
    started = time.time()
    batches = asyncio.run(take(stream, 3))
    finished = time.time()
    assert stream.source == "nvml" and stream.simulated is True and stream.fallback_reason is None
    assert abs(stream.skew_s) < 0.5
    for batch in batches:
        assert batch.source == "nvml" and batch.simulated
        assert [s.gpu for s in batch.samples if s.mig is None] == [0, 1, 2, 3]
        # Local unix time (the host's skew removed): inside the span the test ran, in order.
        assert started - 1 <= batch.t <= finished + 1
    h100 = batches[-1].samples[0]
    assert h100.mem_total_mib == 81559 and h100.power_limit_w == 700 and h100.sm_clock_max_mhz == 1980
    assert h100.fan_pct is None and h100.throttle_reasons is not None and h100.processes is not None
    # In order; their spacing at 10 Hz is measured by benchmarks/bench_telemetry.py, not asserted here.
    assert batches[0].t < batches[1].t < batches[2].t


def test_fallback_when_the_host_has_no_nvml(tmp_path: Path) -> None:
    stream = TelemetryStream(local_host(tmp_path, nvml=False), hz=5)
    batches = asyncio.run(take(stream, 2))
    assert stream.source == "nvidia-smi" and "pynvml" in (stream.fallback_reason or "")
    assert stream.simulated is True  # the emulator's XML carries the simulation marker
    for batch in batches:
        assert batch.source == "nvidia-smi" and [s.gpu for s in batch.samples] == [0, 1, 2, 3]
        assert all(s.pcie_rx_kib_s is None and s.processes is None for s in batch.samples)
        assert all(s.mem_total_mib for s in batch.samples)


def test_prefer_nvml_refuses_to_fall_back(tmp_path: Path) -> None:
    stream = TelemetryStream(local_host(tmp_path, nvml=False), hz=5, prefer="nvml")
    with pytest.raises(AgentUnavailable, match="pynvml"):
        asyncio.run(take(stream, 1))


def test_no_driver_is_a_clear_error(tmp_path: Path) -> None:
    stream = TelemetryStream(local_host(tmp_path, nvml=False, smi=None), hz=5)
    with pytest.raises(TelemetryError, match="no NVIDIA driver"):
        asyncio.run(take(stream, 1))


def test_bad_rate_and_source_are_refused() -> None:
    with pytest.raises(TelemetryError, match="between"):
        TelemetryStream(LocalRunner(), hz=50)
    with pytest.raises(TelemetryError, match="source"):
        TelemetryStream(LocalRunner(), prefer="dcgm")


@pytest.mark.parametrize("capture", ["h100-80gb-hbm3__590.48.01.txt", "h100-mig__590.48.01.txt"])
def test_replayed_real_capture_gives_real_values(tmp_path: Path, capture: str) -> None:
    stream = TelemetryStream(local_host(tmp_path, nvml=False, smi=capture), hz=10)
    idle_batch, load_batch = asyncio.run(take(stream, 2))
    assert stream.source == "nvidia-smi" and stream.simulated is False  # a real capture is never simulated
    (idle,) = idle_batch.samples
    (load,) = load_batch.samples
    assert idle.idle is True and load.idle is False and load.throttle_reasons == []
    assert load.sm_clock_mhz == 1980 and load.mem_total_mib == 81559 and load.fan_pct is None
    if "mig" in capture:
        assert load.util_gpu_pct is None and load.mem_used_mib == 11125 and load.power_w == 433.78
    else:
        assert (load.util_gpu_pct, load.util_mem_pct, load.mem_used_mib, load.power_w, load.temp_c) == (
            100, 11, 19818, 631.95, 59)


def test_skew_measurement_removes_a_host_clock_offset(tmp_path: Path) -> None:
    bin_dir = tmp_path / "skewbin"
    bin_dir.mkdir()
    fake_date = bin_dir / "date"
    # A host whose clock runs 1000 s ahead.
    fake_date.write_text(f'#!{sys.executable}\nimport time\nprint("%.6f" % (time.time() + 1000))\n')
    fake_date.chmod(0o755)
    runner = LocalRunner(env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    skew = asyncio.run(measure_clock_skew(runner))
    assert skew == pytest.approx(1000, abs=0.3)


def _profile(server: SshdServer) -> HostProfile:
    return HostProfile(name="gpu", host="127.0.0.1", port=server.port, user=server.user, auth=AuthMethod.KEY,
                       key_path=str(server.client_key))


async def _over_ssh(server: SshdServer, n: int, **kwargs: object) -> tuple[TelemetryStream, list[SampleBatch]]:
    from gpuws.remote.connection import HostConnection

    async with HostConnection(_profile(server), known_host_key=server.host_public_key) as conn:
        stream = TelemetryStream(conn.runner, **kwargs)  # type: ignore[arg-type]
        return stream, await take(stream, n)


@pytest.mark.sshd
def test_agent_through_real_sshd(tmp_path: Path) -> None:
    server, python = start_simulated_nvml_host(tmp_path / "host")
    try:
        stream, batches = asyncio.run(_over_ssh(server, 4, hz=10, python=python))
    finally:
        server.stop()
    assert stream.source == "nvml", stream.fallback_reason
    assert stream.simulated is True
    store = TelemetryStore()
    for batch in batches:
        store.ingest("gpu", batch)
    assert store.device_keys("gpu")[:4] == ["0", "1", "2", "3"]
    assert store.status("gpu").source == "nvml"
    t, util = store.series("gpu", "2", "util_gpu_pct", batches[0].t, batches[-1].t)
    assert len(t) == 4 and not np.isnan(util).any()


@pytest.mark.sshd
def test_fallback_through_real_sshd(sshd: SshdServer) -> None:
    stream, batches = asyncio.run(_over_ssh(sshd, 2, hz=5))
    assert stream.source == "nvidia-smi" and stream.simulated is True
    assert [s.gpu for s in batches[-1].samples] == [0, 1, 2, 3]


@pytest.mark.sshd
def test_stream_drop_marks_a_gap(sshd: SshdServer) -> None:
    """sshd killed mid-stream: the stream ends with an error and the store shows a gap."""
    from gpuws.remote.connection import HostConnection
    store = TelemetryStore()

    async def main() -> None:
        async with HostConnection(_profile(sshd), known_host_key=sshd.host_public_key) as conn:
            stream = TelemetryStream(conn.runner, hz=5, prefer="nvidia-smi")
            received = 0
            with pytest.raises(GpuwsError, match=r"lost|stopped"):
                async with stream:
                    async for batch in stream:
                        store.ingest("gpu", batch)
                        received += 1
                        if received == 3:
                            sshd.kill_sessions()
            store.mark_offline("gpu", time.time())

    asyncio.run(asyncio.wait_for(main(), 60))
    assert store.status("gpu").online is False
    t, temp = store.window("gpu", "0", 0, time.time() + 1, tier="raw").column("temp_c")
    assert len(t) == 4 and np.isnan(temp[-1]) and not np.isnan(temp[:3]).any()  # 3 readings, then the break


def test_a_skew_within_the_round_trip_is_taken_as_none(tmp_path: Path) -> None:
    bin_dir = tmp_path / "slowdate"
    bin_dir.mkdir()
    fake_date = bin_dir / "date"
    # Same clock, but `date` answers only after a slow start: the midpoint rule would see +0.1 s.
    fake_date.write_text(f'#!{sys.executable}\nimport time\ntime.sleep(0.2)\nprint("%.6f" % time.time())\n')
    fake_date.chmod(0o755)
    runner = LocalRunner(env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert asyncio.run(measure_clock_skew(runner)) == 0.0
