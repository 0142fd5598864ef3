"""The fleet model: real dcgm-exporter captures read into watch-shaped records; ranking; steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.core.fleet.model import (
    IDLE_PEAK,
    MAX_POINTS_PER_SERIES,
    Attention,
    FleetGpu,
    assemble,
    range_step,
    rank,
    summarize,
)
from gpuws.core.models import AlertThresholds
from gpuws.core.telemetry.alerts import AlertEngine, AlertKind
from tests.support.exposition import as_vectors

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm_exporter"


def test_a_real_l4_capture() -> None:
    (gpu,) = assemble(as_vectors((FIXTURES / "kops-l4.metrics").read_text(), {"instance": "10.0.0.7:9400"}))
    d = gpu.to_dict(0.0)
    assert d["host"] == "i-030791dc5a37cd257" and d["gpu"] == 0 and d["model"] == "NVIDIA L4"
    assert d["uuid"] == "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
    assert d["util_gpu_pct"] == 0 and d["mem_used_mib"] == 0
    assert d["mem_total_mib"] == 22563 + 0 + 470  # free + used + reserved, as nvidia-smi's total
    assert d["power_w"] == pytest.approx(16.365) and d["temp_c"] == 31 and d["sm_clock_mhz"] == 210
    assert d["pcie_tx_kib_s"] == pytest.approx(112603 / 1024)
    # Not published by this exporter: null, never 0.
    assert d["throttle_reasons"] is None and d["fan_pct"] is None and d["xid_errors"] is None
    assert d["power_limit_w"] is None
    assert d["source"] == "prometheus" and d["simulated"] is False and d["mig"] is None


def test_a_real_mig_capture_gives_the_gpu_and_its_instance() -> None:
    gpus = assemble(as_vectors((FIXTURES / "nvidia-docs-a100-mig.metrics").read_text()))
    assert [(g.gpu, g.gi) for g in gpus] == [(0, None), (0, 13)]
    whole, mig = gpus
    assert whole.value("mem_total_mib") == 35690 + 4845  # no FB_RESERVED in dcgm-exporter 2.x
    assert mig.uuid == whole.uuid and mig.mig_profile == "1g.5gb" and mig.device_key == "0/mig13"
    assert mig.value("gr_engine_active_pct") == pytest.approx(99.5687)
    assert mig.value("mem_used_mib") is None and mig.to_dict(0)["mig"] == {"parent_gpu": 0, "gi": 13,
                                                                            "profile": "1g.5gb"}


def test_lowercase_hostname_of_newer_exporters() -> None:
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-x",hostname="n7"} 40\n'
    (gpu,) = assemble(as_vectors(text))
    assert gpu.host == "n7" and gpu.gpu == 1 and gpu.value("util_gpu_pct") == 40


def test_nan_is_null() -> None:
    (gpu,) = assemble(as_vectors('DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="h"} NaN\n'))
    assert gpu.value("temp_c") is None


def _gpu(host: str, util: float, used: float, total: float = 1000.0, mask: int | None = None,
         xid: float | None = None) -> FleetGpu:
    text = (f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",Hostname="{host}"}} {util}\n'
            f'DCGM_FI_DEV_FB_USED{{gpu="0",Hostname="{host}"}} {used}\n'
            f'DCGM_FI_DEV_FB_FREE{{gpu="0",Hostname="{host}"}} {total - used}\n')
    if mask is not None:
        text += f'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{gpu="0",Hostname="{host}"}} {mask}\n'
    if xid is not None:
        text += f'DCGM_FI_DEV_XID_ERRORS{{gpu="0",Hostname="{host}"}} {xid}\n'
    return assemble(as_vectors(text))[0]


def test_attention_order_uses_the_host_alert_thresholds() -> None:
    gpus = [_gpu("busy", 80, 500), _gpu("idle", 0, 1, mask=1), _gpu("hot", 90, 400, mask=0x40),
            _gpu("xid", 50, 300, xid=79), _gpu("full", 95, 950)]
    ranked = rank(gpus)
    assert [(a, g.host) for a, g in ranked] == [
        (Attention.OOM_RISK, "full"), (Attention.XID, "xid"), (Attention.THROTTLING, "hot"),
        (Attention.IDLE, "idle"), (Attention.NONE, "busy")]
    assert ranked[3][1].idle is True and ranked[3][1].throttle_reasons == []  # idle is not a throttle
    # A stricter memory threshold from a profile changes the verdict.
    assert rank([_gpu("a", 80, 850)], AlertThresholds(mem_used_pct=80))[0][0] is Attention.OOM_RISK


def test_idle_needs_the_whole_window_quiet() -> None:
    vectors = as_vectors('DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h"} 0\n')
    vectors[IDLE_PEAK] = [{"metric": {"gpu": "0", "Hostname": "h"}, "value": [0, "63"]}]
    (gpu,) = assemble(vectors)
    assert rank([gpu])[0][0] is Attention.NONE  # was busy 10 minutes ago


def test_summary_and_idle_money() -> None:
    gpus = [_gpu("a", 80, 500), _gpu("b", 0, 10)]
    s = summarize(gpus, price_per_gpu_hour=2.5)
    assert s.gpus == 2 and s.hosts == 2 and s.util_avg_pct == 40
    assert s.mem_used_mib == 510 and s.mem_total_mib == 2000
    assert s.power_w is None  # nobody publishes power: unknown, not 0
    assert s.attention == {"idle": 1} and s.idle_cost_per_hour == 2.5


def test_fleet_samples_feed_the_host_alert_engine() -> None:
    engine = AlertEngine()
    engine.configure("h", AlertThresholds(), price_per_hour=4.0)
    events = engine.evaluate("h", [_gpu("h", 97, 950).to_sample(100.0)])
    assert [e.alert.kind for e in events] == [AlertKind.OOM_RISK]


@pytest.mark.parametrize("window", [60, 3600, 86_400, 7 * 86_400, 30 * 86_400])
@pytest.mark.parametrize("points", [2, 600, 11_000, 50_000])
def test_range_step_stays_under_prometheus_point_limit(window: float, points: int) -> None:
    step = range_step(window, points)
    assert step >= 1 and window / step + 1 < MAX_POINTS_PER_SERIES


def test_range_step_refuses_more_than_30_days() -> None:
    with pytest.raises(ValueError):
        range_step(31 * 86_400)


# --- #26: current DCGM names, XIDs by kind, identity, staleness ------------------------------

_GPU = 'gpu="0",UUID="GPU-a",Hostname="n1"'


def test_throttle_from_the_current_name_and_the_retired_one_as_fallback() -> None:
    from gpuws.core.fleet.model import NOT_EXPORTED, THROTTLE, THROTTLE_RETIRED

    (current,) = assemble(as_vectors(f"{THROTTLE}{{{_GPU}}} 64\n{THROTTLE_RETIRED}{{{_GPU}}} 0\n"))
    assert current.throttle_source == THROTTLE and current.throttle_reasons == ["hw_thermal_slowdown"]
    (retired,) = assemble(as_vectors(f"{THROTTLE_RETIRED}{{{_GPU}}} 4\n"))
    assert retired.throttle_source == THROTTLE_RETIRED and retired.to_dict(0)["throttle_source"] == THROTTLE_RETIRED
    assert attention_of_gpu(current) is Attention.THROTTLING
    (neither,) = assemble(as_vectors(f"DCGM_FI_DEV_GPU_TEMP{{{_GPU}}} 50\n"))
    assert neither.to_dict(0)["throttle_source"] == NOT_EXPORTED and neither.to_dict(0)["throttle_reasons"] is None


def attention_of_gpu(gpu: FleetGpu) -> Attention:
    from gpuws.core.fleet.model import attention_of

    return attention_of(gpu)


def test_xids_by_kind_application_ones_are_information() -> None:
    # The last XID (it stays set) when the exporter has no XID counter.
    (last_app,) = assemble(as_vectors(f"DCGM_FI_DEV_XID_ERRORS{{{_GPU}}} 13\n"))
    assert last_app.to_dict(0)["xid_class"] == "application"
    assert attention_of_gpu(last_app) is Attention.XID_INFO and not Attention.XID_INFO.urgent
    (last_hw,) = assemble(as_vectors(f"DCGM_FI_DEV_XID_ERRORS{{{_GPU}}} 79\n"))
    assert attention_of_gpu(last_hw) is Attention.XID and Attention.XID.urgent
    # With DCGM_EXP_XID_ERRORS_COUNT the window's counts decide, not the stale last value.
    text = (f"DCGM_FI_DEV_XID_ERRORS{{{_GPU}}} 79\n"
            f'DCGM_EXP_XID_ERRORS_COUNT{{{_GPU},window_size_in_ms="300000",xid="31"}} 2\n')
    (counted,) = assemble(as_vectors(text))
    assert counted.to_dict(0)["xids"] == [{"xid": 31, "count": 2, "class": "application",
                                           "name": "GPU memory page fault"}]
    assert attention_of_gpu(counted) is Attention.XID_INFO


def test_the_uuid_label_of_use_old_namespace() -> None:
    (gpu,) = assemble(as_vectors('DCGM_FI_DEV_FB_USED{gpu="2",uuid="GPU-old",Hostname="n1"} 5\n'))
    assert gpu.uuid == "GPU-old"


def test_gr_engine_active_stands_in_for_a_missing_gpu_util_on_whole_gpus() -> None:
    mig_labels = 'gpu="0",UUID="GPU-a",GPU_I_ID="3",GPU_I_PROFILE="1g.10gb",Hostname="n1"'
    text = f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{_GPU}}} 0.25\nDCGM_FI_PROF_GR_ENGINE_ACTIVE{{{mig_labels}}} 0.5\n"
    whole, mig = assemble(as_vectors(text))
    assert whole.value("util_gpu_pct") == pytest.approx(25) and whole.util_source == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    assert mig.value("util_gpu_pct") is None  # a MIG instance has no utilisation of its own
    (util,) = assemble(as_vectors(f"DCGM_FI_DEV_GPU_UTIL{{{_GPU}}} 70\nDCGM_FI_PROF_GR_ENGINE_ACTIVE{{{_GPU}}} 0.1\n"))
    assert util.value("util_gpu_pct") == 70 and util.util_source == "DCGM_FI_DEV_GPU_UTIL"


def test_summary_counts_gpus_and_mig_instances_apart_and_each_gpu_once() -> None:
    text = (f"DCGM_FI_DEV_POWER_USAGE{{{_GPU}}} 300\n"
            'DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",Hostname="n1"} 100\n'
            'DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",GPU_I_ID="1",GPU_I_PROFILE="3g.40gb",Hostname="n1"} 10\n')
    gpus = assemble(as_vectors(text))
    # The same card seen by a second scrape job under another node name (same UUID): once.
    twin = FleetGpu(host="n1-alias", gpu=0, uuid="GPU-a", model=None, values={"power_w": 300.0})
    s = summarize([*gpus, twin])
    assert (s.gpus, s.mig_instances, s.power_w) == (2, 1, 400.0)
    assert s.counted() == "2 GPUs (1 MIG instance) on 1 host"


def test_values_older_than_two_scrape_intervals_are_stale() -> None:
    from gpuws.core.fleet.model import SAMPLE_COUNT, SAMPLE_TIME, FleetAssembler

    assembler = FleetAssembler()
    assembler.add("DCGM_FI_DEV_FB_USED", [{"metric": {"gpu": "0", "Hostname": "n"}, "value": [100, "5"]}])
    assembler.add(SAMPLE_TIME, [{"metric": {"gpu": "0", "Hostname": "n"}, "value": [100, "40"]}])
    assembler.add(SAMPLE_COUNT, [{"metric": {"gpu": "0", "Hostname": "n"}, "value": [100, "20"]}])  # every 15 s
    (gpu,) = assembler.result(100.0, newest_up=100.0)  # the store's newest scrape was at 100
    assert gpu.age_s == 60 and gpu.scrape_interval_s == pytest.approx(300 / 19) and gpu.stale
    assert gpu.to_dict(100.0)["stale"] is True


def test_a_device_known_only_from_window_answers_is_not_in_the_snapshot() -> None:
    from gpuws.core.fleet.model import SAMPLE_TIME, FleetAssembler

    assembler = FleetAssembler()
    assembler.add("DCGM_FI_DEV_FB_USED", [{"metric": {"gpu": "0", "Hostname": "n"}, "value": [100, "5"]}])
    for name in (IDLE_PEAK, SAMPLE_TIME):  # a GPU gone since: still in the idle window and in timestamp()
        assembler.add(name, [{"metric": {"gpu": "1", "Hostname": "n"}, "value": [100, "50"]}])
    assert [g.gpu for g in assembler.result(100.0)] == [0]


def test_simulated_and_the_first_pod_whatever_the_order() -> None:
    from gpuws.core.fleet.model import FleetAssembler

    def labels(pod: str) -> dict[str, str]:
        return {"gpu": "0", "UUID": "GPU-a", "Hostname": "n", "pod": pod, "namespace": "ml", "simulated": "true"}

    for order in (["job-1", "job-0"], ["job-0", "job-1"]):
        assembler = FleetAssembler()
        assembler.add("DCGM_FI_DEV_FB_USED", [{"metric": labels(p), "value": [1, "5"]} for p in order])
        (gpu,) = assembler.result()
        assert gpu.simulated and gpu.kube == {"pod": "job-0", "namespace": "ml"}
