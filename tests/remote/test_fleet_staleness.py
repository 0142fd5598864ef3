"""Staleness on every store's defaults (issue 32): judged on the store's own clock and the exporters'
`up`, never the wall clock, and from a fleet's first minute.

VictoriaMetrics on its defaults answers 30 s behind (`-search.latencyOffset`): judged by the wall
clock every GPU of a healthy fleet looked stale and a dead exporter hid among them. The scrape
interval was 300 s / the samples of 5 minutes, so in a store's first minutes it read as 15-30 s and
nothing was stale for minutes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuws.app.fleet import open_fleet
from gpuws.core.fleet.model import (
    SAMPLE_COUNT,
    SAMPLE_COUNT_RECENT,
    SAMPLE_COUNT_SHORT,
    SAMPLE_TIME,
    FleetAssembler,
    scrape_interval,
    store_clock,
)
from gpuws.core.fleet.profiles import FleetProfile
from gpuws.remote.prometheus import Snapshot
from gpuws.sim.dcgm_exporter import SimFleet, make_hosts
from tests.support.prometheus import PrometheusServer, start_prometheus, start_victoria_metrics

KEY = {"Hostname": "node-a", "gpu": "0", "instance": "127.0.0.1:9400"}


def _vector(value: float, **labels: str) -> list[dict[str, object]]:
    return [{"metric": {**KEY, **labels}, "value": [0, str(value)]}]


def test_the_scrape_interval_of_a_young_series_comes_from_its_shortest_window() -> None:
    # 5 s old, scraped every second: 6 samples in every window (was 300 / 6 = 50 s: stale after 100 s).
    assert scrape_interval({10.0: 6, 60.0: 6, 300.0: 6}) == pytest.approx(2.0)
    assert scrape_interval({10.0: 11, 60.0: 61, 300.0: 301}) == pytest.approx(1.0)
    # Scraped every 30 s: at most one sample in 10 s, two or three in a minute.
    assert 30 <= scrape_interval({10.0: 1, 60.0: 3, 300.0: 11}) <= 31  # type: ignore[operator]
    # Every 2 minutes: only the 5 minutes hold two samples or more.
    assert scrape_interval({10.0: 0, 60.0: 1, 300.0: 3}) == pytest.approx(150.0)
    assert scrape_interval({10.0: 0, 60.0: 0, 300.0: 1}) == pytest.approx(300.0)
    assert scrape_interval({10.0: None, 60.0: None, 300.0: None}) is None


def test_ages_count_from_the_store_clock_not_the_wall_clock() -> None:
    """A store 30 s behind (VictoriaMetrics' default): the device scraped at the store's newest
    scrape is fresh; the device whose exporter stopped 5 s before is stale."""
    wall = 10_000.0
    assembler = FleetAssembler()
    assembler.add("DCGM_FI_DEV_FB_USED", _vector(100))
    assembler.add(SAMPLE_TIME, _vector(wall - 30))
    assembler.add(SAMPLE_COUNT, _vector(300))
    assembler.add(SAMPLE_COUNT_RECENT, _vector(60))
    assembler.add(SAMPLE_COUNT_SHORT, _vector(10))
    other = {"Hostname": "node-b", "instance": "127.0.0.1:9401"}
    assembler.add("DCGM_FI_DEV_FB_USED", _vector(100, **other))
    assembler.add(SAMPLE_TIME, _vector(wall - 35, **other))
    assembler.add(SAMPLE_COUNT, _vector(295, **other))
    assembler.add(SAMPLE_COUNT_RECENT, _vector(55, **other))
    assembler.add(SAMPLE_COUNT_SHORT, _vector(5, **other))
    fresh, dead = assembler.result(wall, newest_up=wall - 30)
    assert fresh.host == "node-a" and fresh.age_s == pytest.approx(0.0) and not fresh.stale
    assert dead.host == "node-b" and dead.age_s == pytest.approx(5.0) and dead.stale
    # Without any `up` the fleet's own newest sample is the clock: still relative.
    assert store_clock(None, [fresh, dead]) == wall - 30


def test_an_exporter_whose_up_is_0_is_stale_whatever_its_age() -> None:
    assembler = FleetAssembler()
    assembler.add("DCGM_FI_DEV_FB_USED", _vector(100))
    assembler.add(SAMPLE_TIME, _vector(1000))
    (gpu,) = assembler.result(1000.0, newest_up=1000.0)
    assert not gpu.stale
    gpu.exporter_up = False
    assert gpu.stale and gpu.to_dict(1000.0)["exporter_up"] is False


# --- Real stores -------------------------------------------------------------------------------------


@pytest.fixture
def fleet() -> Iterator[SimFleet]:
    sim = SimFleet(make_hosts(3, 2, mig_every=99)).start()
    try:
        yield sim
    finally:
        sim.stop()


async def _snapshot(server: PrometheusServer) -> Snapshot:
    async with open_fleet(FleetProfile("lab", server.url)) as source:
        return await source.snapshot()


async def _first_snapshot_past(server: PrometheusServer, store_time: float, timeout: float = 120.0) -> Snapshot:
    """The first snapshot whose store clock has passed `store_time` (wall time of a scrape): what a
    user sees once the store shows data from then on. Not a timing assertion: the store's clock
    decides when the question is asked, the snapshot's content is what is checked."""
    deadline = time.monotonic() + timeout
    while True:
        snap = await _snapshot(server)
        if snap.store_t is not None and snap.store_t >= store_time:
            return snap
        if time.monotonic() > deadline:
            raise TimeoutError(f"the store's clock never passed {store_time} (at {snap.store_t})")
        time.sleep(0.5)


def _flagged(snap: Snapshot, host: str) -> bool:
    """Every GPU of `host` is either not reporting or stale, and is said to be."""
    listed = [g for g in snap.gpus if g.host == host]
    gone = [m for m in snap.missing if m.host == host]
    return bool(listed or gone) and all(g.stale for g in listed)


@pytest.mark.slow
@pytest.mark.parametrize("store", ["prometheus", "victoria-metrics-defaults"])
async def test_no_gpu_is_stale_while_its_exporter_runs_and_a_killed_one_shows_in_two_intervals(
        fleet: SimFleet, tmp_path: Path, store: str) -> None:
    if store == "prometheus":
        server = start_prometheus(tmp_path / "prom", fleet.targets)
    else:  # VictoriaMetrics as Debian installs it: answers 30 s behind
        server = start_victoria_metrics(tmp_path / "vm", fleet.targets, latency_offset="30s")
    try:
        server.wait_scraped(targets=3, series_min=6, timeout=120)
        snap = await _snapshot(server)
        # A few scrapes in (one sample says nothing of how often they come).
        snap = await _first_snapshot_past(server, (snap.store_t or 0) + 10)
        assert len({(g.host, g.gpu) for g in snap.gpus}) == 6 and snap.store_t is not None
        assert [g.host for g in snap.gpus if g.stale] == []
        assert all(g.exporter_up is True for g in snap.gpus)
        if store != "prometheus":
            assert snap.store_lag_s is not None and snap.store_lag_s >= 20  # it really is 30 s behind
        dead_host = fleet.hosts[1].hostname
        fleet.stop_host(1)
        killed = time.time()
        interval = max(g.scrape_interval_s or 0 for g in snap.gpus)
        assert 0 < interval <= 2  # scraped every second
        # Two scrape intervals on the store's clock after the kill (and the failed scrape's own timeout).
        snap = await _first_snapshot_past(server, killed + 2 * interval + 1.0)
        assert _flagged(snap, dead_host), [(g.host, g.age_s, g.exporter_up) for g in snap.gpus]
        assert [g.host for g in snap.gpus if g.stale and g.host != dead_host] == []
    finally:
        server.stop()


@pytest.mark.slow
async def test_staleness_works_from_a_stores_first_minute(fleet: SimFleet, tmp_path: Path) -> None:
    server = start_victoria_metrics(tmp_path / "vm", fleet.targets)
    try:
        server.wait_scraped(targets=3, series_min=6)
        snap = await _snapshot(server)
        snap = await _first_snapshot_past(server, (snap.store_t or 0) + 3)
        started = min(g.sample_t for g in snap.gpus if g.sample_t is not None)
        young = [g for g in snap.gpus if g.sample_t is not None and g.sample_t - started < 60]
        assert young, "the store was not young any more"
        # Scraped every second, a few seconds in: the estimate errs late while the series is young
        # (10 s / the samples so far), not by 50x as 300 s / the samples of 5 minutes did.
        assert all(g.scrape_interval_s is not None and g.scrape_interval_s <= 5 for g in snap.gpus), \
            [g.scrape_interval_s for g in snap.gpus]
    finally:
        server.stop()
