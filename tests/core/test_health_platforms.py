"""Health verdicts on cards and platforms beyond the demo host (issue 32) and on readings no GPU
gives (issue 36, item 11), on real captures (tests/fixtures/real/README.md). Where a case has no
public capture, the test edits one field of a real capture and says which."""

from __future__ import annotations

import re

import pytest

from gpuws.cli.commands.health import exit_status
from gpuws.core.health.checks import Finding, GpuHealth, HealthVerdict, gpu_findings
from gpuws.core.health.collect import evaluate, split_sections
from gpuws.core.health.facts import parse_smi_document
from gpuws.remote.probe import XML_BEGIN, XML_END, parse_probe_output
from tests.support.real_fixtures import REAL_FIXTURES

XML = REAL_FIXTURES / "nvidia-smi-xml"
P100 = XML / "tesla-p100-pcie-x2-v8.xml"  # DTD v8, pre-Ampere ECC layout
V = HealthVerdict


def _text(name: str) -> str:
    return (XML / name).read_text()


def _output(xml: str, final_newline: bool = True) -> str:
    """The health script's output around `xml`, as the script prints it."""
    return (f"\n@@gpuws-health hostname\nbox\n\n@@gpuws-health smi\n{xml}{chr(10) if final_newline else ''}"
            f"\n@@rc 0\n\n@@gpuws-health kernel dmesg\n\n")


def _pcie(g: GpuHealth) -> Finding:
    (found,) = [f for f in g.findings if f.check == "pcie"]
    return found


def _one_gpu(xml: str) -> GpuHealth:
    doc = parse_smi_document(xml)
    return gpu_findings(doc.gpus[0], [], None)


def _set(xml: str, tag: str, value: str, count: int = 1) -> str:
    """`xml` with the first `count` <tag> values replaced (to model a case on a real capture)."""
    new, n = re.subn(rf"<{tag}>[^<]*</{tag}>", f"<{tag}>{value}</{tag}>", xml, count=count)
    assert n == count, f"{tag}: {n} replaced"
    return new


# --- ECC on every schema -------------------------------------------------------------------------------------

def _p100_with(volatile_dbe: str, volatile_sbe: str, total: bool = True) -> str:
    """The real P100 (v8) capture with its first GPU's volatile counts set: device memory and
    `<total>` as the driver writes them (the total counts every location once)."""
    xml = P100.read_text()
    gpu0_end = xml.index("</gpu>")
    gpu0, rest = xml[:gpu0_end], xml[gpu0_end:]
    volatile = gpu0[gpu0.index("<volatile>"):gpu0.index("</volatile>")]
    edited = volatile
    for kind, count in (("double_bit", volatile_dbe), ("single_bit", volatile_sbe)):
        block = edited[edited.index(f"<{kind}>"):edited.index(f"</{kind}>")]
        new = block.replace("<device_memory>0</device_memory>", f"<device_memory>{count}</device_memory>")
        new = new.replace("<total>0</total>", f"<total>{count if total else 'N/A'}</total>")
        edited = edited.replace(block, new)
    return gpu0.replace(volatile, edited) + rest


def test_pre_ampere_ecc_counts_the_total_once() -> None:
    """Issue 32: a card with 7 double-bit errors was reported 14, and 600 corrected ones tripped
    'over 1000' (parts and <total> added)."""
    doc = parse_smi_document(_p100_with("7", "600"))
    gpu = doc.gpus[0]
    assert gpu.ecc_volatile_uncorrectable == 7 and gpu.ecc_volatile_correctable == 600
    assert gpu.ecc_aggregate_uncorrectable == 0
    (ecc,) = [f for f in gpu_findings(gpu, [], None).findings if f.check == "ecc"]
    assert ecc.verdict is V.UNHEALTHY and ecc.detail.startswith("7 uncorrectable")
    corrected_only = parse_smi_document(_p100_with("0", "600")).gpus[0]
    (ecc,) = [f for f in gpu_findings(corrected_only, [], None).findings if f.check == "ecc"]
    assert ecc.verdict is V.HEALTHY  # 600 corrected is under the line of 1000


def test_pre_ampere_ecc_without_a_total_adds_the_locations() -> None:
    gpu = parse_smi_document(_p100_with("3", "5", total=False)).gpus[0]
    assert gpu.ecc_volatile_uncorrectable == 3 and gpu.ecc_volatile_correctable == 5


def test_real_pre_ampere_capture_reads_zero_and_is_healthy() -> None:
    doc = parse_smi_document(P100.read_text())
    assert [g.ecc_volatile_uncorrectable for g in doc.gpus] == [0, 0]
    assert [g.ecc_aggregate_uncorrectable for g in doc.gpus] == [0, 0]
    health = evaluate("p100", _output(P100.read_text()))
    assert health.verdict is V.HEALTHY, [(f.check, f.detail) for g in health.gpus for f in g.findings]


def test_pre_ampere_schema_without_dtd_and_without_ecc_reads_none_not_zero() -> None:
    """Real Quadro P400, driver 418, no DTD line: every location and total is N/A."""
    (gpu,) = parse_smi_document(_text("quadro-p400.xml")).gpus
    assert (gpu.ecc_volatile_uncorrectable, gpu.ecc_aggregate_uncorrectable, gpu.ecc_volatile_correctable) == (
        None, None, None)
    (ecc,) = [f for f in gpu_findings(gpu, [], None).findings if f.check == "ecc"]
    assert ecc.verdict is V.INFO


def test_ampere_and_newer_schemas_add_their_per_memory_counts() -> None:
    """v13 splits SRAM uncorrectable into parity and SEC-DED: both count, and the aggregate's
    `sram_threshold_exceeded` (No/Yes) is not a count."""
    xml = _text("nvidia-gb200-x4-v13.xml")
    xml = _set(xml, "sram_uncorrectable_parity", "2")  # GPU 0, volatile
    xml = _set(xml, "sram_uncorrectable_secded", "3")
    gpu = parse_smi_document(xml).gpus[0]
    assert gpu.ecc_volatile_uncorrectable == 5 and gpu.ecc_aggregate_uncorrectable == 0
    assert not gpu.bad_readings


# --- the PCIe link: width first, generation against the platform's own limit ---------------------------------

def test_grace_blackwell_at_gen5_is_information_not_a_fault() -> None:
    """Real GB200 tray: a Grace CPU's PCIe is Gen5, the card could do Gen6. It was DEGRADED (exit 11)."""
    health = evaluate("gb200", _output(_text("nvidia-gb200-x4-v13.xml")))
    assert len(health.gpus) == 4
    for g in health.gpus:
        pcie = _pcie(g)
        assert pcie.verdict is V.INFO and "Grace" in pcie.detail and "Gen5 of the card's Gen6" in pcie.detail
    assert health.verdict is V.HEALTHY and exit_status(health.verdict) == 0


def test_a_host_max_that_contradicts_the_running_link_is_not_believed() -> None:
    """Real GB300 tray: max_host_link_gen says 4 while the link runs at Gen6."""
    health = evaluate("gb300", _output(_text("nvidia-gb300-x4-v13.xml")))
    assert [_pcie(g).verdict for g in health.gpus] == [V.HEALTHY] * 4
    assert health.verdict is V.HEALTHY


def _rtx3080_under_load_in_a_gen3_slot(current_gen: str) -> str:
    """Real RTX 3080 v13 capture (P2, 65 % busy, Gen4 x16 in a Gen4 host), its link fields set
    as an older host shows them: the slot is Gen3."""
    xml = _text("rtx-3080-v13.xml")
    for tag in ("max_link_gen", "max_host_link_gen"):
        xml = _set(xml, tag, "3")
    for tag in ("current_link_gen", "device_current_link_gen"):
        xml = _set(xml, tag, current_gen)
    return xml


def test_an_older_slot_is_information_with_the_reason() -> None:
    g = _one_gpu(_rtx3080_under_load_in_a_gen3_slot("3"))
    assert g.verdict is V.HEALTHY
    pcie = _pcie(g)
    assert pcie.verdict is V.INFO and "Gen3 of the card's Gen4" in pcie.detail and "slot" in pcie.detail


def test_a_link_below_the_slots_own_maximum_under_load_is_degraded() -> None:
    g = _one_gpu(_rtx3080_under_load_in_a_gen3_slot("2"))
    pcie = _pcie(g)
    assert pcie.verdict is V.DEGRADED and "running at Gen2" in pcie.detail and "Gen3" in pcie.detail


def test_a_narrower_link_than_the_cards_is_degraded_on_a_real_node() -> None:
    """Real AWS g6e.2xlarge: the L40S trained at x8 of its x16."""
    pcie = _pcie(_one_gpu(_text("nvidia-l40s-v13.xml")))
    assert pcie.verdict is V.DEGRADED and "x8 of the card's x16" in pcie.detail


def test_width_is_judged_when_the_cards_generation_is_unknown() -> None:
    """A GeForce card nvidia-smi calls "Graphics Device" (real capture, driver 418: no device
    generation, no datasheet), put at x1 of x16 under full load as a mining riser does. It was
    HEALTHY ("the card's own link is unknown")."""
    xml = _text("gtx-1660-ti.xml")
    xml = re.sub(r"\s*<max_link_gen>[^<]*</max_link_gen>", "", xml)  # generation unknown altogether
    xml = _set(xml, "current_link_width", "1x")
    xml = _set(xml, "performance_state", "P2")
    xml = _set(xml, "gpu_util", "100 %")
    g = _one_gpu(xml)
    pcie = _pcie(g)
    assert pcie.verdict is V.DEGRADED and "x1 of the card's x16" in pcie.detail
    assert g.verdict is V.DEGRADED and exit_status(g.verdict) == 11


def test_generation_at_idle_is_power_saving_and_under_load_a_fault() -> None:
    idle = _pcie(_one_gpu(_text("3090-v13.xml")))  # real: P8, Gen1 of Gen4
    assert idle.verdict is V.INFO and "power saving" in idle.detail
    assert _pcie(_one_gpu(_text("rtx-3080-v13.xml"))).verdict is V.HEALTHY  # real: P2 under load, Gen4 of Gen4


def test_no_real_capture_is_called_degraded_for_its_platform_alone() -> None:
    for path in sorted(XML.glob("*.xml")):
        for gpu in parse_smi_document(path.read_text()).gpus:
            pcie = _pcie(gpu_findings(gpu, [], None))
            if pcie.verdict is V.DEGRADED:  # only ever for a narrower link (x8, or x1 on a mining riser)
                assert re.search(r"trained at x(8|1) of the card's x16", pcie.detail), (path.name, pcie.detail)


# --- readings no GPU gives -----------------------------------------------------------------------------------

def _nan_host() -> str:
    """Issue 36: NaN temperature, infinite power and -99999999999999999999 attached GPUs, on a
    real v13 capture."""
    xml = _text("rtx-3080-v13.xml")
    xml = _set(xml, "gpu_temp", "NaN C")
    xml = _set(xml, "instant_power_draw", "inf W")
    return _set(xml, "attached_gpus", "-99999999999999999999")


def test_nan_readings_are_inconclusive_never_healthy() -> None:
    health = evaluate("h", _output(_nan_host()))
    assert health.verdict is V.INCONCLUSIVE and exit_status(health.verdict) == 12
    (whole,) = [f for f in health.findings if f.check == "readings"]
    assert whole.verdict is V.INCONCLUSIVE
    assert "attached_gpus" in whole.detail and "-99999999999999999999" in whole.detail
    (gpu,) = [f for f in health.gpus[0].findings if f.check == "readings"]
    assert "temperature/gpu_temp" in gpu.detail and "NaN" in gpu.detail
    assert "instant_power_draw" in gpu.detail and "infinite" in gpu.detail


@pytest.mark.parametrize(("tag", "value", "why"), [
    ("dram_uncorrectable", "-4", "impossible"),
    ("current_power_limit", "nan W", "NaN"),
    ("gpu_util", "250 %", "impossible"),
    ("replay_counter", "1e999", "infinite"),
    ("replay_counter", "12 furlongs", "not a number"),
    ("current_link_width", "-16x", "link width"),
])
def test_an_impossible_value_in_a_checked_field_is_inconclusive_not_a_crash(tag: str, value: str, why: str) -> None:
    health = evaluate("h", _output(_set(_text("rtx-3080-v13.xml"), tag, value)))
    (found,) = [f for f in health.gpus[0].findings if f.check == "readings"]
    assert why in found.detail and tag in found.detail
    assert health.verdict is V.INCONCLUSIVE


def test_plausible_readings_of_every_real_capture_are_not_flagged() -> None:
    for path in sorted(XML.glob("*.xml")):
        doc = parse_smi_document(path.read_text())
        assert not doc.bad_readings and not [b for g in doc.gpus for b in g.bad_readings], path.name


def test_probe_lists_the_impossible_readings_and_still_shows_the_gpu() -> None:
    from gpuws.cli.commands.probe import format_inventory

    inventory, no_driver = parse_probe_output(f"hostname=h\n{XML_BEGIN}\n{_nan_host()}\n{XML_END} 0\n")
    assert no_driver is None and len(inventory.gpus) == 1
    text = format_inventory("h", inventory)
    assert "warning: nvidia-smi gave a reading no working GPU gives: attached_gpus" in text
    assert "temperature/gpu_temp = 'NaN C': not a number (NaN)" in text
    assert "instant_power_draw = 'inf W': infinite" in text
    assert inventory.to_dict()["warnings"] == inventory.warnings and len(inventory.warnings) == 3


def test_check_number_bounds() -> None:
    from gpuws.core.nvsmi.readings import check_number

    assert check_number("41 C", -60, 200, "C") is None and check_number("N/A", 0, 1, "C") is None
    assert check_number("-300 C", -60, 200, "C") is not None
    assert check_number("12 furlongs", 0, 100, "W") == "not a number of W"


# --- framing: output without a final newline ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["rtx-3080-v13.xml", "tesla-p100-pcie-x2-v8.xml"])
def test_a_missing_final_newline_changes_nothing(name: str) -> None:
    xml = _text(name).rstrip("\n")
    with_newline, without = evaluate("h", _output(xml)), evaluate("h", _output(xml, final_newline=False))
    assert without.to_json() == with_newline.to_json()
    assert len(without.gpus) == len(parse_smi_document(xml).gpus)
    assert not [f for f in without.findings if f.check == "nvidia-smi"]


def test_sections_keep_text_exit_status_and_the_old_unframed_layout() -> None:
    framed = split_sections("\n@@gpuws-health smi\n<x/>\n@@rc 3\n\n@@gpuws-health kernel dmesg\na\nb\n")
    smi, kernel = framed.get("smi"), framed.get("kernel")
    assert smi is not None and smi.text == "<x/>" and smi.rc == 3
    assert kernel is not None and kernel.text == "a\nb" and kernel.arg == "dmesg"
    unframed = split_sections("@@gpuws-health smi\n<x/>\n@@rc 0\n@@gpuws-health kernel dmesg\na\n")
    assert unframed.get("smi") is not None and unframed.parts["smi"].text == "<x/>"


def test_the_recorded_h200_output_still_reads() -> None:
    """Recorded with the script before the framing newline (tests/fixtures/real/h200)."""
    out = (REAL_FIXTURES / "h200" / "health-script-output.txt").read_text()
    health = evaluate("h200", out)
    assert len(health.gpus) == 1 and health.verdict is V.HEALTHY

