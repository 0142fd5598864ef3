"""A fleet read through a real store scraping simulated dcgm-exporters (no mock of the API): every
test runs against Prometheus and against VictoriaMetrics (single node), each started once here."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gpuws.app.fleet import open_fleet
from gpuws.core.fleet.model import SNAPSHOT_METRICS, range_step
from gpuws.core.fleet.profiles import FleetProfile
from gpuws.remote.prometheus import (
    PrometheusClient,
    PrometheusError,
    PrometheusUnreachable,
)
from tests.support.exposition import parse
from tests.support.sshd import free_port
from tests.support.tenant_proxy import TenantProxy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["prometheus", "victoria-metrics"])
def sim_prometheus(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object]]:
    """The conftest fleet (4 hosts of 4 GPUs, one MIG GPU), scraped by each store in turn."""
    from gpuws.sim.dcgm_exporter import SimFleet, make_hosts
    from tests.support.prometheus import start_store

    fleet = SimFleet(make_hosts(4, 4, mig_every=3)).start()
    server = start_store(request.param, tmp_path_factory.mktemp(request.param), fleet.targets)
    try:
        server.wait_scraped(targets=4, series_min=16 + 2)
        yield server, fleet
    finally:
        server.stop()
        fleet.stop()


def _served(fleet: Any) -> dict[tuple[str, int, int | None], dict[str, float]]:
    """What the exporters serve, per (host, gpu, gi) and metric."""
    out: dict[tuple[str, int, int | None], dict[str, float]] = {}
    for host in fleet.hosts:
        for metric, labels, value in parse(host.render()):
            gi = int(labels["GPU_I_ID"]) if "GPU_I_ID" in labels else None
            out.setdefault((labels["Hostname"], int(labels["gpu"]), gi), {})[metric] = float(value)
    return out


async def test_snapshot_matches_what_the_exporters_served(sim_prometheus: Any) -> None:
    server, fleet = sim_prometheus
    async with open_fleet(FleetProfile("lab", server.url)) as source:
        snap = await source.snapshot()
    served = _served(fleet)
    assert len(snap.gpus) == len(served) == 16 + 2 * 2  # 16 GPUs, 2 MIG GPUs with 2 instances each
    doc = json.loads(json.dumps(snap.to_dict()))
    assert doc["fleet"] == "lab" and doc["t"].endswith("Z")
    for gpu in doc["gpus"]:
        key = (gpu["host"], gpu["gpu"], gpu["mig"]["gi"] if gpu["mig"] else None)
        metrics = served[key]
        assert gpu["source"] == "prometheus" and gpu["simulated"] is True
        assert gpu["mem_used_mib"] == metrics["DCGM_FI_DEV_FB_USED"]
        assert gpu["mem_total_mib"] == (metrics["DCGM_FI_DEV_FB_USED"] + metrics["DCGM_FI_DEV_FB_FREE"]
                                        + metrics.get("DCGM_FI_DEV_FB_RESERVED", 0))
        if "DCGM_FI_DEV_GPU_UTIL" in metrics or gpu["mig"]:
            assert gpu["util_gpu_pct"] == metrics.get("DCGM_FI_DEV_GPU_UTIL")
        else:  # a MIG-mode GPU has no GPU_UTIL: its graphics engine, as DCGM measures it
            assert gpu["util_gpu_pct"] == pytest.approx(100 * metrics["DCGM_FI_PROF_GR_ENGINE_ACTIVE"])
            assert gpu["util_source"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
        assert gpu["power_w"] == metrics.get("DCGM_FI_DEV_POWER_USAGE")
        assert gpu["temp_c"] == metrics.get("DCGM_FI_DEV_GPU_TEMP")
        assert gpu["sm_clock_mhz"] == metrics.get("DCGM_FI_DEV_SM_CLOCK")
        assert gpu["xid_errors"] == metrics.get("DCGM_FI_DEV_XID_ERRORS")
        assert gpu["fan_pct"] is None  # not published: null, never 0
        assert gpu["nvlink_bandwidth_total"] == metrics.get("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")
        assert gpu["stale"] is False and 0 <= gpu["age_s"] < 30
        if gpu["mig"] is None:
            assert gpu["throttle_source"] == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
            mask = int(metrics["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"])
            assert ("hw_thermal_slowdown" in gpu["throttle_reasons"]) == bool(mask & 0x40)
            assert gpu["idle"] == bool(mask & 1)
            assert gpu["model"] and gpu["uuid"].startswith("GPU-")


async def test_one_query_per_metric_whatever_the_fleet_size(sim_prometheus: Any) -> None:
    server, _ = sim_prometheus
    with TenantProxy(server.url) as proxy:  # counts what reaches the store
        async with open_fleet(FleetProfile("lab", proxy.url)) as source:
            snap = await source.snapshot()
    # One query per metric, plus the idle-window peak, the sample times and their counts over 3
    # windows (age of the values), the devices of the last hour (for those not reporting), the
    # store's clock and the exporters' `up`, for 20 devices.
    assert not snap.missing
    assert proxy.queries() == len(SNAPSHOT_METRICS) + 8 < len(snap.gpus) * 2


async def test_selector_narrows_the_fleet(sim_prometheus: Any) -> None:
    server, _ = sim_prometheus
    profile = FleetProfile("one", server.url, selector='Hostname="sim-gpu-node-001"')
    async with open_fleet(profile) as source:
        snap = await source.snapshot()
        assert {g.host for g in snap.gpus} == {"sim-gpu-node-001"} and len(snap.gpus) == 4
        assert await source.series_count() == 4


async def test_history_is_downsampled_by_prometheus(sim_prometheus: Any) -> None:
    server, _ = sim_prometheus
    time.sleep(2)  # a few scrapes of history
    async with open_fleet(FleetProfile("lab", server.url)) as source:
        history = await source.history(30 * 86_400, points=600)
        assert history.step == range_step(30 * 86_400, 600) and len(history.times) <= 601
        recent = await source.history(60, points=60)
    assert recent.step == 1
    last = recent.power_w[~__import__("numpy").isnan(recent.power_w)]
    assert len(last) > 0 and last[-1] > 0
    assert len(recent.per_gpu_util) == 16  # GPU_UTIL, or GR_ENGINE_ACTIVE for the 2 in MIG mode


async def test_a_bad_query_is_prometheus_own_one_line_error(sim_prometheus: Any) -> None:
    server, _ = sim_prometheus
    async with PrometheusClient(server.url) as client:
        with pytest.raises(PrometheusError) as info:
            await client.query("sum(")
    message = str(info.value)  # each store's own words: "parse error", "unexpected token"
    assert "\n" not in message and ("parse error" in message or "unexpected token" in message)


async def test_nobody_listening_is_unreachable() -> None:
    async with PrometheusClient(f"http://127.0.0.1:{free_port()}", name="gone", timeout=5) as client:
        with pytest.raises(PrometheusUnreachable) as info:
            await client.query("up")
    assert str(info.value).startswith("gone: cannot reach Prometheus")
