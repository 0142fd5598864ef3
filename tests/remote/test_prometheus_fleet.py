"""A fleet read through a real Prometheus scraping simulated dcgm-exporters (no mock of the API)."""

from __future__ import annotations

import json
import time
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

pytestmark = pytest.mark.slow


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
        assert gpu["util_gpu_pct"] == metrics.get("DCGM_FI_DEV_GPU_UTIL")  # None on a MIG-mode GPU
        assert gpu["power_w"] == metrics.get("DCGM_FI_DEV_POWER_USAGE")
        assert gpu["temp_c"] == metrics.get("DCGM_FI_DEV_GPU_TEMP")
        assert gpu["sm_clock_mhz"] == metrics.get("DCGM_FI_DEV_SM_CLOCK")
        assert gpu["xid_errors"] == metrics.get("DCGM_FI_DEV_XID_ERRORS")
        assert gpu["fan_pct"] is None  # not published: null, never 0
        if gpu["mig"] is None:
            mask = int(metrics["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"])
            assert ("hw_thermal_slowdown" in gpu["throttle_reasons"]) == bool(mask & 0x40)
            assert gpu["idle"] == bool(mask & 1)
            assert gpu["model"] and gpu["uuid"].startswith("GPU-")


async def test_one_query_per_metric_whatever_the_fleet_size(sim_prometheus: Any) -> None:
    server, _ = sim_prometheus

    def queries_so_far() -> float:
        # Prometheus' own counter of API calls, from its /metrics page.
        import urllib.request

        with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
            text = response.read().decode()
        return sum(float(v) for m, labels, v in parse(text)
                   if m == "prometheus_http_requests_total" and labels.get("handler") == "/api/v1/query")

    before = queries_so_far()
    async with open_fleet(FleetProfile("lab", server.url)) as source:
        snap = await source.snapshot()
    after = queries_so_far()
    # One query per metric plus the idle-window peak, for 20 devices.
    assert after - before == len(SNAPSHOT_METRICS) + 1 < len(snap.gpus) * 2


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
    assert len(recent.per_gpu_util) == 14  # GPU_UTIL: 16 GPUs minus the 2 in MIG mode


async def test_a_bad_query_is_prometheus_own_one_line_error(sim_prometheus: Any) -> None:
    server, _ = sim_prometheus
    async with PrometheusClient(server.url) as client:
        with pytest.raises(PrometheusError) as info:
            await client.query("sum(")
    assert "\n" not in str(info.value) and "parse error" in str(info.value)


async def test_nobody_listening_is_unreachable() -> None:
    async with PrometheusClient(f"http://127.0.0.1:{free_port()}", name="gone", timeout=5) as client:
        with pytest.raises(PrometheusUnreachable) as info:
            await client.query("up")
    assert str(info.value).startswith("gone: cannot reach Prometheus")
