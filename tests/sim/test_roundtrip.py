"""Round trip: the emulator's output parses with the project's real-output parsers (gpuws.core.nvsmi)."""

from __future__ import annotations

from gpuws.core.nvsmi.compute_apps import parse_compute_apps
from gpuws.core.nvsmi.listing import parse_gpu_list
from gpuws.core.nvsmi.query_csv import parse_query_csv
from gpuws.core.nvsmi.xml_inventory import is_simulated_xml, parse_nvidia_smi_xml
from tests.sim.conftest import SmiRunner


def test_xml_round_trip(sim_store, smi: SmiRunner) -> None:
    with sim_store.update() as state:
        state.gpu(0).set_load(0.0)
    assert smi("-i", "0", "-mig", "1")[0] == 0
    assert smi("mig", "-i", "0", "-cgi", "9,14", "-C")[0] == 0
    code, out, _ = smi("-q", "-x")
    assert code == 0 and is_simulated_xml(out)
    gpus = parse_nvidia_smi_xml(out)
    assert [g.name for g in gpus] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S",
                                      "GRID A100-10C"]
    h100, a100, l40s, vgpu = gpus
    assert h100.memory_total_mib == 81559 and h100.power_limit_w == 700.0
    assert (h100.pcie_gen_max, h100.pcie_width_max) == (5, 16)
    assert h100.mig_mode == "Enabled" and len(h100.mig_devices) == 2
    assert [d.gpu_instance_id for d in h100.mig_devices] == [1, 5]  # 3g at slice 0, 2g at slice 4
    assert a100.mig_mode == "Disabled" and l40s.mig_mode is None
    assert vgpu.virtualization_mode == "VGPU" and vgpu.is_vgpu_slice


def test_csv_list_and_apps_round_trip(smi: SmiRunner) -> None:
    code, out, _ = smi("--query-gpu=index,uuid,memory.used,memory.total,power.draw,utilization.gpu",
                       "--format=csv")
    rows = parse_query_csv(out)
    assert [r["index"] for r in rows] == ["0", "1", "2", "3"]
    assert rows[3]["power.draw"] is None  # [N/A] on the vGPU guest
    code, out, _ = smi("--query-gpu=index,memory.used", "--format=csv,noheader,nounits")
    assert len(parse_query_csv(out, ["index", "memory.used"])) == 4
    code, out, _ = smi("-L")
    assert code == 0 and parse_gpu_list(out)[0].name == "NVIDIA H100 80GB HBM3"
    code, out, _ = smi("--query-compute-apps=pid,process_name,gpu_uuid,used_gpu_memory", "--format=csv")
    assert code == 0
    apps = parse_compute_apps(out)
    assert any(a.process_name == "python3 -m ipykernel_launcher" and a.used_memory_mib == 2048 for a in apps)
