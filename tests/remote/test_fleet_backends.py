"""`gpuws fleet` against the stores teams really run: Prometheus and VictoriaMetrics scraping the
same simulated dcgm-exporters, a TLS-fronted Prometheus with a private CA and a client
certificate, and a tenant-checking proxy (Mimir's X-Scope-OrgID) in front of a real store.

The exporters differ per node as real fleets do: node 000 publishes the retired throttle name
only, node 001 DCGM's current DCGM_FI_DEV_CLOCKS_EVENT_REASONS only (its GPU 3 runs hot), node
002 neither (dcgm-exporter's default counters) and has an application XID (13) on GPU 0, node
003 runs with --use-old-namespace (label `uuid`), has XID 79 on GPU 1, and publishes every GPU
twice (two Kubernetes pods share each).
"""

from __future__ import annotations

import calendar
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuws.cli.main import main
from gpuws.core.fleet.alerts import FleetAlerts
from gpuws.core.fleet.model import THROTTLE, THROTTLE_RETIRED
from gpuws.core.telemetry.alerts import AlertKind
from gpuws.sim.dcgm_exporter import ExporterFault, SimFleet, ThrottleMetric, make_hosts
from tests.support.prometheus import PrometheusServer, start_prometheus, start_victoria_metrics
from tests.support.tenant_proxy import TenantProxy
from tests.support.tls import make_pki

pytestmark = pytest.mark.slow

STORES = ("prometheus", "victoria-metrics")
# What differs between two reads by nature: when, and how old the newest sample was then.
VOLATILE = frozenset({"t", "age_s", "scrape_interval_s"})


@pytest.fixture(scope="module")
def fleet() -> Iterator[SimFleet]:
    hosts = make_hosts(4, 4, mig_every=3)
    hosts[0].throttle_metric = ThrottleMetric.RETIRED
    hosts[1].throttle_metric = ThrottleMetric.CURRENT
    hosts[2].throttle_metric = ThrottleMetric.NONE
    hosts[2].fault(ExporterFault.XID_APP, 0)
    hosts[3].old_namespace = True
    hosts[3].shared_pods = 2  # Kubernetes: each GPU of node 003 published once per pod (two pods)
    sim = SimFleet(hosts).start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def stores(fleet: SimFleet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, PrometheusServer]]:
    """Prometheus and VictoriaMetrics at once, both scraping `fleet` every second."""
    servers = {"prometheus": start_prometheus(tmp_path_factory.mktemp("prom"), fleet.targets),
               "victoria-metrics": start_victoria_metrics(tmp_path_factory.mktemp("vm"), fleet.targets)}
    try:
        for server in servers.values():
            server.wait_scraped(targets=4, series_min=16 + 2)
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def snapshot_json(capsys: pytest.CaptureFixture[str], name: str) -> dict[str, Any]:
    code, out, err = run(capsys, "fleet", "snapshot", name, "--json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def _stable(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in gpu.items() if k not in VOLATILE} for gpu in doc["gpus"]]


def test_victoria_metrics_gives_the_same_gpus_and_values_as_prometheus(
        capsys: pytest.CaptureFixture[str], stores: dict[str, PrometheusServer]) -> None:
    for store, server in stores.items():
        assert run(capsys, "fleet", "add", store, "--prometheus", server.url)[0] == 0
    prom, vm = (snapshot_json(capsys, store) for store in STORES)
    assert len(prom["gpus"]) == 20 and prom["empty"] is None and prom["not_reporting"] == []
    assert _stable(vm) == _stable(prom)
    assert vm["not_reporting"] == prom["not_reporting"] == []
    for doc in (prom, vm):
        assert all(g["stale"] is False and g["age_s"] is not None for g in doc["gpus"])
        old_namespace = [g for g in doc["gpus"] if g["host"] == "sim-gpu-node-003"]
        assert old_namespace and all(g["uuid"] and g["uuid"].startswith("GPU-") for g in old_namespace)


@pytest.mark.parametrize("store", STORES)
def test_throttle_under_either_name_and_not_exported_where_neither(
        capsys: pytest.CaptureFixture[str], stores: dict[str, PrometheusServer], store: str) -> None:
    url = stores[store].url
    run(capsys, "fleet", "add", "current", "--prometheus", url, "--selector", 'Hostname="sim-gpu-node-001"')
    run(capsys, "fleet", "add", "retired", "--prometheus", url, "--selector", 'Hostname="sim-gpu-node-000"')
    run(capsys, "fleet", "add", "neither", "--prometheus", url, "--selector", 'Hostname="sim-gpu-node-002"')
    current = snapshot_json(capsys, "current")
    assert {g["throttle_source"] for g in current["gpus"]} == {THROTTLE}
    hot = next(g for g in current["gpus"] if g["gpu"] == 3)
    assert "hw_thermal_slowdown" in hot["throttle_reasons"]
    code, text, _ = run(capsys, "fleet", "snapshot", "current")
    assert code == 0 and any(line.startswith("sim-gpu-node-001  3 ") and line.endswith("throttling")
                             for line in text.splitlines())
    retired = snapshot_json(capsys, "retired")
    assert {g["throttle_source"] for g in retired["gpus"] if g["mig"] is None} == {THROTTLE_RETIRED}
    neither = snapshot_json(capsys, "neither")
    assert {g["throttle_source"] for g in neither["gpus"]} == {"not exported"}
    assert all(g["throttle_reasons"] is None for g in neither["gpus"])
    code, text, _ = run(capsys, "fleet", "snapshot", "neither")
    assert code == 0 and sum("throttle not exported" in line for line in text.splitlines()) == 4


@pytest.mark.parametrize("store", STORES)
async def test_alerts_say_not_exported_and_throttling_from_the_current_name(
        stores: dict[str, PrometheusServer], store: str) -> None:
    from gpuws.app.fleet import open_fleet
    from gpuws.core.fleet.profiles import FleetProfile

    async with open_fleet(FleetProfile("lab", stores[store].url)) as source:
        snap = await source.snapshot()
    alerts = FleetAlerts("lab")
    alerts.evaluate(snap.t, snap.gpus, snap.missing)
    active = alerts.active()
    not_exported = {(a.host, a.gpu) for a in active if a.kind is AlertKind.NOT_EXPORTED}
    assert not_exported == {("lab/sim-gpu-node-002", None)}
    [blind] = [a for a in active if a.kind is AlertKind.NOT_EXPORTED]
    assert blind.message.startswith("lab/sim-gpu-node-002 GPU 0, 1, 2, 3: throttle reasons not exported")
    assert any(a.kind is AlertKind.THERMAL_THROTTLE and a.host == "lab/sim-gpu-node-001" and a.gpu == "3"
               for a in alerts.engine.log.entries()) or any(
        g.host == "sim-gpu-node-001" and g.gpu == 3 and "hw_thermal_slowdown" in (g.throttle_reasons or [])
        for g in snap.gpus)


@pytest.mark.parametrize("store", STORES)
def test_xids_by_kind_from_the_count_metric(capsys: pytest.CaptureFixture[str],
                                            stores: dict[str, PrometheusServer], store: str) -> None:
    run(capsys, "fleet", "add", "lab", "--prometheus", stores[store].url)
    doc = snapshot_json(capsys, "lab")
    by_key = {(g["host"], g["gpu"], g["mig"] is None): g for g in doc["gpus"]}
    app = by_key[("sim-gpu-node-002", 0, True)]
    assert app["xids"] == [{"xid": 13, "count": 1, "class": "application", "name": "Graphics Engine Exception"}]
    assert app["xid_class"] == "application"
    lost = by_key[("sim-gpu-node-003", 1, True)]
    assert lost["xid_class"] == "hardware-fail" and lost["xids"][0]["xid"] == 79
    code, text, _ = run(capsys, "fleet", "snapshot", "lab")
    assert code == 0
    rows = text.splitlines()[2:]
    # The hardware XID is urgent (near the top); the application XID is information, after every urgent row.
    xid_row = next(i for i, r in enumerate(rows) if r.startswith("sim-gpu-node-003  1 "))
    app_row = next(i for i, r in enumerate(rows) if r.startswith("sim-gpu-node-002  0 "))
    assert rows[xid_row].endswith("XID error") and "application XID" in rows[app_row]
    assert xid_row < app_row and all(("ok" in r or "application" in r) for r in rows[app_row:])


def test_an_empty_answer_says_why(capsys: pytest.CaptureFixture[str], fleet: SimFleet, tmp_path: Path,
                                  stores: dict[str, PrometheusServer]) -> None:
    # A selector that matches nothing: no series.
    run(capsys, "fleet", "add", "typo", "--prometheus", stores["prometheus"].url, "--selector", 'Hostname="nope"')
    code, out, err = run(capsys, "fleet", "snapshot", "typo", "--json")
    assert code == 0 and json.loads(out)["gpus"] == [] and json.loads(out)["empty"]["reason"] == "no_series"
    assert "no series matched" in err
    # VictoriaMetrics with its default -search.latencyOffset (30 s), seconds after its first scrape.
    vm = start_victoria_metrics(tmp_path / "vm-default", fleet.targets, latency_offset="30s")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the series are in its index (queries still show nothing)
            found: Any = None
            with contextlib.suppress(OSError):
                found = vm.get("/api/v1/series?match[]=DCGM_FI_DEV_FB_USED")
            if found and found["data"]:
                break
            time.sleep(0.5)
        run(capsys, "fleet", "add", "young", "--prometheus", vm.url)
        code, out, err = run(capsys, "fleet", "snapshot", "young", "--json")
    finally:
        vm.stop()
    doc = json.loads(out)
    assert code == 0 and doc["gpus"] == [] and doc["empty"]["reason"] == "stale"
    assert "latencyOffset" in err and err.count("\n") == 1


@pytest.mark.parametrize("store", STORES)
def test_tenant_is_sent_as_x_scope_orgid(capsys: pytest.CaptureFixture[str], stores: dict[str, PrometheusServer],
                                         store: str) -> None:
    with TenantProxy(stores[store].url, tenant="team-a") as proxy:
        run(capsys, "fleet", "add", "bare", "--prometheus", proxy.url)
        code, out, err = run(capsys, "fleet", "snapshot", "bare", "--json")
        assert code == 3 and out == "" and "needs a tenant (X-Scope-OrgID)" in err and "--tenant" in err
        assert run(capsys, "fleet", "add", "mimir", "--prometheus", proxy.url, "--tenant", "team-a")[0] == 0
        doc = snapshot_json(capsys, "mimir")
    assert len(doc["gpus"]) == 20
    assert {s.tenant for s in proxy.seen if s.path.startswith("/api/v1/query")} >= {"team-a"}


def test_tls_fleet_with_private_ca_and_client_certificate(capsys: pytest.CaptureFixture[str], fleet: SimFleet,
                                                          tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    server = start_prometheus(tmp_path / "prom-tls", fleet.targets, tls=pki)
    try:
        server.wait_scraped(targets=4, series_min=16 + 2)
        # No CA: the private CA is not trusted, and the message says what to give.
        run(capsys, "fleet", "add", "plain", "--prometheus", server.url)
        code, out, err = run(capsys, "fleet", "snapshot", "plain", "--json")
        assert code == 5 and out == "" and "not trusted" in err and "--ca-file" in err and err.count("\n") == 1
        # The CA but no client certificate: Prometheus refuses the handshake.
        run(capsys, "fleet", "add", "ca-only", "--prometheus", server.url, "--ca-file", str(pki.ca_cert))
        code, out, err = run(capsys, "fleet", "snapshot", "ca-only", "--json")
        assert code == 3 and out == "" and "client certificate" in err and "--client-cert" in err
        # Trusting an unrelated CA is not enough either.
        run(capsys, "fleet", "add", "wrong-ca", "--prometheus", server.url, "--ca-file", str(pki.other_ca_cert),
            "--client-cert", str(pki.client_cert), "--client-key", str(pki.client_key))
        code, _, err = run(capsys, "fleet", "snapshot", "wrong-ca", "--json")
        assert code == 5 and "not trusted" in err
        # All three: it works.
        code, _, err = run(capsys, "fleet", "add", "secure", "--prometheus", server.url, "--ca-file",
                           str(pki.ca_cert), "--client-cert", str(pki.client_cert), "--client-key", str(pki.client_key))
        assert code == 0, err
        doc = snapshot_json(capsys, "secure")
        assert len(doc["gpus"]) == 20 and doc["insecure"] is False
        # --insecure skips the server check (still with the client certificate) and says so everywhere.
        code, _, err = run(capsys, "fleet", "add", "lax", "--prometheus", server.url, "--insecure",
                           "--client-cert", str(pki.client_cert), "--client-key", str(pki.client_key))
        assert code == 0, err
        code, out, err = run(capsys, "fleet", "snapshot", "lax", "--json")
        assert code == 0 and json.loads(out)["insecure"] is True and "INSECURE" in err
        code, out, _ = run(capsys, "fleet", "snapshot", "lax")
        assert "[INSECURE: TLS not verified]" in out.splitlines()[0]
        code, out, _ = run(capsys, "fleet", "list")
        assert any(line.startswith("lax ") and "INSECURE" in line for line in out.splitlines())
        assert not any(line.startswith("secure ") and "INSECURE" in line for line in out.splitlines())
    finally:
        server.stop()


@pytest.mark.parametrize("store", STORES)
def test_a_gpu_dropped_by_its_exporter_is_not_reporting_at_the_top(
        capsys: pytest.CaptureFixture[str], fleet: SimFleet, stores: dict[str, PrometheusServer], store: str) -> None:
    host = fleet.hosts[0]
    run(capsys, "fleet", "add", "lab", "--prometheus", stores[store].url)
    dropped_at = time.time()
    host.fault(ExporterFault.GPU_LOST, 2)
    try:
        deadline = time.monotonic() + 60
        doc = snapshot_json(capsys, "lab")
        while not doc["not_reporting"] and time.monotonic() < deadline:
            time.sleep(1)
            doc = snapshot_json(capsys, "lab")
        [gone] = doc["not_reporting"]
        assert (gone["host"], gone["gpu"], gone["exporter_up"]) == ("sim-gpu-node-000", 2, True)
        assert gone["uuid"] == host.gpus[2].uuid and gone["message"].startswith("not reporting since ")
        since = calendar.timegm(time.strptime(gone["since"][:19], "%Y-%m-%dT%H:%M:%S"))
        assert dropped_at - 30 <= since <= dropped_at + 5  # its newest sample: about when it dropped
        assert len(doc["gpus"]) == 19
        code, text, _ = run(capsys, "fleet", "snapshot", "lab")
        first = text.splitlines()[2]
        assert code == 0 and first.startswith("sim-gpu-node-000  2 ") and "not reporting since" in first
        assert "15 GPUs (4 MIG instances) on 4 hosts, 1 not reporting" in text.splitlines()[0]
    finally:
        host.fault(ExporterFault.GPU_LOST, 2, on=False)


@pytest.mark.parametrize("store", STORES)
async def test_totals_count_a_gpu_shared_by_pods_once(fleet: SimFleet, stores: dict[str, PrometheusServer],
                                                      store: str) -> None:
    """Found (#26): fleet sums added each pod's series of a shared GPU: its power and memory twice."""
    import numpy as np

    from gpuws.app.fleet import open_fleet
    from gpuws.core.fleet.model import summarize
    from gpuws.core.fleet.profiles import FleetProfile

    node = fleet.hosts[3]
    power = sum(g.power_w for g in node.gpus)
    memory = sum(g.fb_used_mib for g in node.gpus)
    async with open_fleet(FleetProfile("k8s", stores[store].url, selector='Hostname="sim-gpu-node-003"')) as source:
        snap = await source.snapshot()
        history = await source.history(60, points=60)
    whole = [g for g in snap.gpus if g.gi is None]
    assert len(whole) == 4 and all(g.kube == {"pod": "job-0", "namespace": "ml", "container": "train"}
                                   for g in whole)
    summary = summarize(snap.gpus)
    assert summary.gpus == 4 and summary.power_w == pytest.approx(power)
    assert summary.mem_used_mib == pytest.approx(memory)
    drawn = history.power_w[~np.isnan(history.power_w)]
    assert len(drawn) > 0 and drawn[-1] == pytest.approx(power, rel=1e-4)
    used = history.mem_used_mib[~np.isnan(history.mem_used_mib)]
    assert used[-1] == pytest.approx(memory, rel=1e-4)


def test_an_exporter_that_stops_answering_is_exporter_down(capsys: pytest.CaptureFixture[str], fleet: SimFleet,
                                                            stores: dict[str, PrometheusServer]) -> None:
    """The host is counted by its exporter's `up`: node 002's exporter dies, its 4 GPUs say so.
    (Last in this module: the exporter stays down.)"""
    for store, server in stores.items():
        run(capsys, "fleet", "add", store, "--prometheus", server.url)
    fleet.stop_host(2)
    expected = {("sim-gpu-node-002", i) for i in range(4)}
    for store in STORES:
        deadline = time.monotonic() + 60
        doc = snapshot_json(capsys, store)
        # (Until then the GPU the test before dropped and brought back may still be catching up.)
        while {(g["host"], g["gpu"]) for g in doc["not_reporting"]} != expected and time.monotonic() < deadline:
            time.sleep(1)
            doc = snapshot_json(capsys, store)
        gone = doc["not_reporting"]
        assert {(g["host"], g["gpu"]) for g in gone} == expected, store
        assert all(g["exporter_up"] is False and g["message"].startswith("exporter down since ") for g in gone)
        assert not any(g["host"] == "sim-gpu-node-002" for g in doc["gpus"])
