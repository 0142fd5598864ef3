"""The emulator's output follows real nvidia-smi formats (compared with real captures)."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET

from gpuws.core.simulation import SIM_XML_MARKER
from tests.sim.conftest import FIXTURES, SmiRunner

CAPTURE = FIXTURES / "nvidia-smi-captures" / "h100-80gb-hbm3__590.48.01.txt"


def _capture_section(path, title: str) -> list[str]:
    """Lines of one `# section :: title` block of a capture file."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# ") and title in line)
    body = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            if body:
                break
            continue
        body.append(line)
    return [line for line in body if line.strip()]


def test_list_gpus_matches_real_layout(smi: SmiRunner) -> None:
    real = _capture_section(CAPTURE, "list (-L)")[0]
    pattern = r"GPU \d+: .+ \(UUID: GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\)"
    assert re.fullmatch(pattern, real)
    code, out, _ = smi("-L")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 4
    assert all(re.fullmatch(pattern, line) for line in lines)
    assert lines[0].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")


def test_query_gpu_headers_and_units_match_real_capture(smi: SmiRunner) -> None:
    real_header, real_idle = _capture_section(CAPTURE, "idle :: query-gpu")[:2]
    real_cols = dict(zip(real_header.split(", "), real_idle.split(", "), strict=True))
    fields = ["index", "name", "uuid", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu",
              "power.draw", "power.limit", "clocks.current.sm", "clocks.max.memory", "pstate",
              "clocks_event_reasons.active", "pcie.link.gen.max", "fan.speed", "mig.mode.current"]
    code, out, _ = smi("-i", "0", f"--query-gpu={','.join(fields)}", "--format=csv")
    assert code == 0
    header, row = out.splitlines()
    assert all(h in real_cols for h in header.split(", ")), header
    ours = dict(zip(header.split(", "), row.split(", "), strict=True))
    for name, value in ours.items():
        real = real_cols[name]
        # Same shape: same unit suffix, [N/A] where the real card says so, hex masks as hex.
        assert value.split(" ")[-1] == real.split(" ")[-1] or not real.endswith(("W", "MiB", "MHz", "%")), name
        assert (value == "[N/A]") == (real == "[N/A]"), name
    assert ours["memory.total [MiB]"] == "81559 MiB"
    assert re.fullmatch(r"0x[0-9A-F]{16}", ours["clocks_event_reasons.active"])


def test_query_gpu_noheader_nounits_and_aliases(smi: SmiRunner) -> None:
    code, out, _ = smi("--query-gpu=index,memory.used,clocks.sm,clocks_throttle_reasons.active",
                       "--format=csv,noheader,nounits")
    assert code == 0
    rows = [r.split(", ") for r in out.splitlines()]
    assert [r[0] for r in rows] == ["0", "1", "2", "3"]
    assert all(r[1].isdigit() and r[2].isdigit() for r in rows)


def test_query_compute_apps_header_is_real(smi: SmiRunner) -> None:
    real_header = _capture_section(CAPTURE, "idle :: query-compute-apps")[0]
    code, out, _ = smi(
        "--query-compute-apps=timestamp,gpu_name,gpu_bus_id,gpu_serial,gpu_uuid,pid,process_name,used_gpu_memory",
        "--format=csv",
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == real_header
    assert all(line.endswith(" MiB") for line in lines[1:])


def test_xml_has_real_structure_and_simulation_marker(smi: SmiRunner) -> None:
    code, out, _ = smi("-q", "-x")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == '<?xml version="1.0" ?>'
    assert SIM_XML_MARKER in lines[1] and lines[1].startswith("<!--")
    assert lines[2] == '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">'
    ours = ET.fromstring(out)
    real = ET.parse(FIXTURES / "nvidia-smi-xml" / "3090-v13.xml").getroot()
    assert [c.tag for c in ours][:4] == [c.tag for c in real][:4]
    real_tags = {c.tag for c in real.find("gpu")}
    for gpu in ours.findall("gpu"):
        extra = {c.tag for c in gpu} - real_tags - {"vgpu_software_licensed_product"}
        assert not extra, extra
        for path in ("fb_memory_usage/total", "pci/pci_gpu_link_info/pcie_gen/max_link_gen",
                     "gpu_virtualization_mode/virtualization_mode", "clocks_event_reasons/clocks_event_reason_gpu_idle",
                     "gpu_power_readings/current_power_limit", "max_clocks/sm_clock", "mig_mode/current_mig"):
            assert gpu.find(path) is not None, path
    modes = [g.findtext("gpu_virtualization_mode/virtualization_mode") for g in ours.findall("gpu")]
    assert modes == ["None", "None", "None", "VGPU"]


def test_errors_use_real_texts_and_exit_codes(smi: SmiRunner) -> None:
    code, _, err = smi("--bogus")
    assert code == 2 and "Invalid combination of input arguments" in err
    code, _, err = smi("-i", "9", "-L")
    assert code == 6 and err.strip() == "No devices were found"
    code, _, err = smi("--query-gpu=nope", "--format=csv")
    assert code == 2 and 'Field "nope" is not a valid field to query.' in err


def test_streaming_prints_header_once_and_flushes_each_sample(sim_store) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuws.sim.nvidia_smi", "--query-gpu=index,utilization.gpu",
         "--format=csv", "-lms", "200", "-i", "0"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().rstrip("\n") for _ in range(4)]
    finally:
        proc.terminate()
        proc.wait(5)
        assert proc.stdout is not None
        proc.stdout.close()
    assert lines[0] == "index, utilization.gpu [%]"
    assert all(re.fullmatch(r"0, \d+ %", line) for line in lines[1:])
