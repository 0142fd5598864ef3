"""The health parsers and checks on real captures (tests/fixtures/real), and the verdict rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.core.health.checks import HealthVerdict, cuda_finding, gpu_findings, worst
from gpuws.core.health.collect import evaluate, split_sections
from gpuws.core.health.facts import parse_nvlink, parse_smi_document

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
XML = sorted((REAL / "nvidia-smi-xml").glob("*.xml"))


@pytest.mark.parametrize("path", XML, ids=lambda p: p.name)
def test_every_real_xml_parses_and_no_healthy_card_is_called_unhealthy(path: Path) -> None:
    doc = parse_smi_document(path.read_text())
    assert doc.gpus and not doc.simulated
    for gpu in doc.gpus:
        assert gpu.uuid and gpu.pci_bus_id
        g = gpu_findings(gpu, [], None)
        if path.name in _FAULTY:
            continue  # published for its fault; judged in tests/core/test_real_captures_sweep.py
        # These were published as ordinary cards; none had pending remaps, XIDs or resets.
        assert g.verdict in (HealthVerdict.HEALTHY, HealthVerdict.DEGRADED), [f for f in g.findings]
        assert not [f for f in g.findings if f.verdict is HealthVerdict.UNHEALTHY]


def _faulty() -> set[str]:
    """The captures published to show a fault (a page retirement pending, ...): the sweep's table."""
    from tests.core.test_real_captures_sweep import VERDICTS

    return {name.removeprefix("nvidia-smi-xml/") for name, expect in VERDICTS.items()
            if expect.verdict is HealthVerdict.UNHEALTHY}


_FAULTY = _faulty()


def test_fields_of_a_v13_capture() -> None:
    (gpu,) = parse_smi_document((REAL / "nvidia-smi-xml" / "rtx-4000-sff-ada-v13.xml").read_text()).gpus
    assert gpu.recovery_action == "None" and gpu.remap_pending is False and gpu.remap_failure is False
    assert gpu.power_limit_w == 70.0 and gpu.power_default_w == 70.0
    assert gpu.pcie_replays == 0 and gpu.fabric_state is None  # "N/A" is no value


def test_old_driver_power_readings_and_retired_pages() -> None:
    (gpu,) = parse_smi_document((REAL / "nvidia-smi-xml" / "tesla-t4.xml").read_text()).gpus
    assert gpu.power_default_w == 70.0 and gpu.retired_sbe == 0 and gpu.retired_dbe == 0
    assert gpu.ecc_volatile_uncorrectable == 0


def test_real_nvlink_error_counters() -> None:
    text = (REAL / "nvlink" / "h100-nvlink-e__ml-engineering.txt").read_text()
    counters = parse_nvlink(text)["GPU-abcdefab-cdef-abdc-abcd-abababababab"]
    assert sorted(counters.per_link) == [0, 1, 17]
    assert counters.errors == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}


def test_real_nvlink_status_counts_links() -> None:
    text = (REAL / "nvidia-smi-captures" / "h100-80gb-hbm3__590.48.01.txt").read_text()
    start = text.index("$ nvidia-smi nvlink -s")
    status = parse_nvlink("", text[start:start + 2000])
    (counters,) = status.values()
    assert counters.links_active == 18 and counters.links_inactive == []


def _output(kernel: str, kernel_text: str) -> str:
    xml = (REAL / "nvidia-smi-xml" / "3090-v13.xml").read_text()
    return (f"@@gpuws-health hostname\nbox\n@@gpuws-health smi\n{xml}\n@@rc 0\n"
            f"@@gpuws-health kernel {kernel}\n{kernel_text}\n")


def test_an_unreadable_kernel_log_is_inconclusive_with_the_reason() -> None:
    health = evaluate("h", _output("none", "dmesg: read kernel buffer failed: Operation not permitted"))
    assert health.verdict is HealthVerdict.INCONCLUSIVE
    (kernel,) = [f for f in health.findings if f.check == "kernel_log"]
    assert "Operation not permitted" in kernel.detail
    assert [f.verdict for f in health.gpus[0].findings if f.check == "xid"] == [HealthVerdict.INCONCLUSIVE]


def test_xids_go_to_the_gpu_on_their_bus() -> None:
    xml_bus = parse_smi_document((REAL / "nvidia-smi-xml" / "3090-v13.xml").read_text()).gpus[0].pci_bus_id
    assert xml_bus is not None
    domain, bus, dev = xml_bus.split(":")
    line = f"NVRM: Xid (PCI:{domain[-4:]}:{bus.lower()}:{dev[:2]}): 79, GPU has fallen off the bus."
    other = "NVRM: Xid (PCI:0000:ff:00): 48, pid=1, DBE"
    health = evaluate("h", _output("dmesg", f"{line}\n{other}"))
    xids = [f for f in health.gpus[0].findings if f.check == "xid"]
    assert [f.verdict for f in xids] == [HealthVerdict.UNHEALTHY] and "XID 79" in xids[0].detail


def test_nvidia_smi_failing_is_unhealthy_and_missing_is_inconclusive() -> None:
    broken = evaluate("h", "@@gpuws-health smi\nUnable to determine the device handle for GPU0000:44:00.0: "
                           "Unknown Error\n@@rc 255\n")
    assert broken.verdict is HealthVerdict.UNHEALTHY
    missing = evaluate("h", "@@gpuws-health smi\nsh: 1: nvidia-smi: not found\n@@rc 127\n")
    assert missing.verdict is HealthVerdict.INCONCLUSIVE


def test_sections_keep_exit_status_and_argument() -> None:
    parts = split_sections("noise\n@@gpuws-health kernel dmesg\na\nb\n@@gpuws-health smi\nx\n@@rc 3\n")
    kernel, smi = parts.get("kernel"), parts.get("smi")
    assert kernel is not None and smi is not None
    assert (kernel.arg, kernel.text, kernel.rc) == ("dmesg", "a\nb", None)
    assert (smi.text, smi.rc) == ("x", 3)


def test_cuda_minimum_driver_table() -> None:
    assert cuda_finding("535.104.05", "12.2", "12.4").verdict is HealthVerdict.UNHEALTHY
    assert cuda_finding("550.54.14", "12.4", "12.4").verdict is HealthVerdict.HEALTHY
    assert cuda_finding("550.54.14", "12.4", "twelve").verdict is HealthVerdict.INCONCLUSIVE


def test_worst_ranks_info_as_healthy() -> None:
    v = HealthVerdict
    assert worst([v.INFO, v.HEALTHY]) is v.HEALTHY
    assert worst([v.INCONCLUSIVE, v.DEGRADED]) is v.DEGRADED
    assert worst([v.UNHEALTHY, v.DEGRADED, v.INCONCLUSIVE]) is v.UNHEALTHY


H200 = REAL / "h200"


def test_real_h200_is_healthy_and_reads_every_field() -> None:
    """Recorded by gpuws's device check on one NVIDIA H200 (driver 580.159.04, 2026-12-04)."""
    output = (f"@@gpuws-health smi\n{(H200 / 'nvidia-smi-q.xml').read_text()}\n@@rc 0\n"
              f"@@gpuws-health nvlink-e\n{(H200 / 'nvlink-e.txt').read_text()}@@rc 0\n"
              f"@@gpuws-health nvlink-s\n{(H200 / 'nvlink-s.txt').read_text()}@@rc 0\n"
              "@@gpuws-health kernel journalctl\n")
    health = evaluate("h200", output, cuda="12.4")
    (gpu,) = health.gpus
    assert gpu.name == "NVIDIA H200" and gpu.verdict is HealthVerdict.HEALTHY, gpu.findings
    checks = {f.check: f for f in gpu.findings}
    assert {"ecc", "remapped_rows", "reset_required", "xid", "pcie", "pcie_replays", "power_limit", "persistence",
            "throttle"} <= set(checks)
    assert "Gen5 x16" in checks["pcie"].detail and "700 W" in checks["power_limit"].detail
    assert "fabric" not in checks  # a single H200 VM: fabric state N/A
    assert health.verdict is HealthVerdict.HEALTHY and health.driver_version == "580.159.04"


def test_real_h200_health_script_output() -> None:
    """The on-host script's own output on an H200 (gpuws device check, 2026-12-04, root: dmesg)."""
    health = evaluate("h200", (H200 / "health-script-output.txt").read_text(), cuda="13.0")
    assert health.verdict is HealthVerdict.HEALTHY, health.to_json()
    kernel = next(f for f in health.findings if f.check == "kernel_log")
    assert "dmesg" in kernel.detail and "0 XID" in kernel.detail
    assert [f.verdict for f in health.findings if f.check == "dcgm"] == [HealthVerdict.INFO]


def test_a_high_corrected_error_rate_degrades() -> None:
    doc = parse_smi_document((REAL / "nvidia-smi-xml" / "3090-v13.xml").read_text())
    gpu = doc.gpus[0]
    gpu.ecc_volatile_correctable, gpu.ecc_volatile_uncorrectable, gpu.ecc_aggregate_uncorrectable = 400, 0, 0
    fast = next(f for f in gpu_findings(gpu, [], None, uptime_s=3600.0).findings if f.check == "ecc")
    assert fast.verdict is HealthVerdict.DEGRADED and "400 per hour" in fast.detail
    slow = next(f for f in gpu_findings(gpu, [], None, uptime_s=30 * 86400.0).findings if f.check == "ecc")
    assert slow.verdict is HealthVerdict.HEALTHY


DCGM = REAL / "dcgm" / "dcgmi-diag-r1-8gpu__dcgm-3.1.0.txt"


def test_real_dcgmi_diag_output_passes_and_a_failed_test_is_unhealthy() -> None:
    from gpuws.core.health.collect import Section, dcgm_findings

    text = DCGM.read_text()
    (ok,) = dcgm_findings(Section(text=text, rc=0))
    assert ok.verdict is HealthVerdict.HEALTHY and "17 results passed" in ok.detail
    failed = text.replace('"status" : "PASS"', '"status" : "FAIL"', 1)
    (bad,) = dcgm_findings(Section(text=failed, rc=0))
    assert bad.verdict is HealthVerdict.UNHEALTHY and "Denylist (GPU 0,1,2,3,4,5,6,7)" in bad.detail
    (absent,) = dcgm_findings(Section(text="dcgmi is not installed on the host", rc=127))
    assert absent.verdict is HealthVerdict.INFO
