"""The simulated dcgm-exporter prints what a real one prints (checked against real captures)."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from gpuws.sim.dcgm_exporter import METRICS, SimFleet, make_hosts
from tests.support.exposition import label_names, parse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm_exporter"
CAPTURES = ("kops-l4.metrics", "upcloud-l40s.metrics", "vks-grid-a100-10c.metrics")


def _help_type(text: str) -> dict[str, tuple[str, str]]:
    helps: dict[str, str] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line[7:].partition(" ")[0]
            helps[name] = line
        elif line.startswith("# TYPE "):
            name = line[7:].partition(" ")[0]
            types[name] = line
    return {name: (helps[name], types[name]) for name in helps}


def _sim_text(mig: bool = False) -> str:
    return make_hosts(1, 2, mig_every=1 if mig else 0)[0].render()


@pytest.mark.parametrize("capture", CAPTURES)
def test_help_and_type_lines_are_the_real_exporters(capture: str) -> None:
    real = _help_type((FIXTURES / capture).read_text())
    ours = _help_type(_sim_text())
    common = set(real) & set(ours)
    assert len(common) >= 10, sorted(common)
    for name in common:
        assert ours[name] == real[name]


def test_every_default_counter_is_served_with_the_csvs_help() -> None:
    csv = (FIXTURES / "default-counters.csv").read_text().splitlines()
    rows = [[c.strip() for c in line.split(",", 2)] for line in csv if line.strip() and not line.startswith("#")]
    ours = _help_type(_sim_text())
    for name, kind, help_text in rows:
        if kind == "label":
            continue
        assert ours[name] == (f"# HELP {name} {help_text}", f"# TYPE {name} {kind}")


def test_labels_in_the_real_order_plus_simulated() -> None:
    real_line = next(line for line in (FIXTURES / "kops-l4.metrics").read_text().splitlines()
                     if line.startswith("DCGM_FI_DEV_GPU_TEMP{"))
    ours = next(line for line in _sim_text().splitlines() if line.startswith("DCGM_FI_DEV_GPU_TEMP{"))
    assert label_names(ours) == [*label_names(real_line), "simulated"]


def test_mig_instances_carry_profile_and_id_where_the_real_exporter_puts_them() -> None:
    real = [line for line in (FIXTURES / "nvidia-docs-a100-mig.metrics").read_text().splitlines() if "GPU_I_ID" in line]
    ours = [line for line in _sim_text(mig=True).splitlines() if "GPU_I_ID" in line]
    assert ours
    real_names = label_names(real[0])
    our_names = label_names(ours[0])
    # Same relative order: after the device labels, before Hostname.
    for names in (real_names, our_names):
        assert names.index("UUID") < names.index("GPU_I_PROFILE") < names.index("GPU_I_ID") < names.index("Hostname")
    real_metrics = {line.split("{")[0] for line in real}
    assert real_metrics <= {line.split("{")[0] for line in ours}


def test_every_value_is_labelled_simulated_and_formatted_like_dcgm() -> None:
    samples = parse(_sim_text(mig=True))
    assert samples and all(labels.get("simulated") == "true" for _, labels, _ in samples)
    floats = {name for name, _, _, is_float in METRICS if is_float}
    for metric, _, value in samples:
        if metric in floats:
            assert "." in value and len(value.split(".")[1]) == 6, (metric, value)  # %f, as 16.365000
        else:
            assert value.lstrip("-").isdigit(), (metric, value)


def test_a_mig_mode_gpu_publishes_no_utilisation() -> None:
    samples = parse(_sim_text(mig=True))
    util = [labels for metric, labels, _ in samples if metric == "DCGM_FI_DEV_GPU_UTIL"]
    assert {labels["gpu"] for labels in util} == {"1"}  # GPU 0 is in MIG mode


def test_fleet_serves_metrics_over_http_on_loopback() -> None:
    with SimFleet(make_hosts(2, 1)) as fleet:
        assert len(fleet.targets) == 2 and all(t.startswith("127.0.0.1:") for t in fleet.targets)
        with urllib.request.urlopen(f"http://{fleet.targets[1]}/metrics", timeout=10) as response:
            body = response.read().decode()
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert 'Hostname="sim-gpu-node-001"' in body
        assert body == fleet.hosts[1].render()


def test_faults_and_exporter_settings_a_real_fleet_has() -> None:
    from gpuws.sim.dcgm_exporter import CLOCK_THROTTLE_REASONS, CLOCKS_EVENT_REASONS, ExporterFault, ThrottleMetric
    from gpuws.sim.models import GPU_MODELS

    host = make_hosts(1, 2, mig_every=0)[0]
    served = {(m, labels.get("gpu")) for m, labels, _ in parse(host.render())}
    assert (CLOCKS_EVENT_REASONS, "1") in served and not any(m == CLOCK_THROTTLE_REASONS for m, _ in served)
    assert ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "0") in served  # an H100 SXM board has NVLink
    host.fault(ExporterFault.GPU_LOST, 1)
    samples = parse(host.render())
    assert {labels["gpu"] for _, labels, _ in samples} == {"0"}  # fell off the bus: not published at all
    host.fault(ExporterFault.GPU_LOST, 1, on=False)
    host.fault(ExporterFault.XID_APP, 0)
    host.throttle_metric, host.old_namespace = ThrottleMetric.NONE, True
    samples = parse(host.render())
    xid = [(labels["xid"], labels["window_size_in_ms"], v) for m, labels, v in samples
           if m == "DCGM_EXP_XID_ERRORS_COUNT"]
    assert xid == [("13", "300000", "1")]
    assert not any(m in (CLOCKS_EVENT_REASONS, CLOCK_THROTTLE_REASONS) for m, _, _ in samples)
    assert all("uuid" in labels and "UUID" not in labels for _, labels, _ in samples)
    # GPU facts are the simulated host's (core/gpus): framebuffer, reserved memory, power limit.
    h100 = GPU_MODELS["h100"]
    fb = {m: float(v) for m, labels, v in samples if labels["gpu"] == "1"}
    total = fb["DCGM_FI_DEV_FB_USED"] + fb["DCGM_FI_DEV_FB_FREE"] + fb["DCGM_FI_DEV_FB_RESERVED"]
    assert total == h100.memory_total_mib
    assert fb["DCGM_FI_DEV_FB_RESERVED"] == h100.memory_reserved_mib
    assert fb["DCGM_FI_DEV_POWER_MGMT_LIMIT"] == h100.power_limit_w


def test_mig_instances_have_the_registrys_size() -> None:
    from gpuws.core.gpus.models import MIG_GPUS

    host = make_hosts(1, 1, mig_every=1)[0]
    expected = next(p.memory_mib for p in MIG_GPUS["h100-80gb"].profiles if p.name == "3g.40gb")
    totals: dict[str, float] = {}
    for m, labels, v in parse(host.render()):
        if m in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE") and "GPU_I_ID" in labels:
            totals[labels["GPU_I_ID"]] = totals.get(labels["GPU_I_ID"], 0.0) + float(v)
    assert len(totals) == 2 and set(totals.values()) == {expected} == {40448}  # was 40192 (the A100's) for an H100
