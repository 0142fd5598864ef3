"""`nvidia-smi -q -x` parsing against every real capture in tests/fixtures/real/nvidia-smi-xml."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

from gpuws.core.errors import GpuwsError, ParseError
from gpuws.core.inventory import GpuInfo, HostFacts, Inventory
from gpuws.core.nvsmi import is_simulated_xml, parse_nvidia_smi_xml
from gpuws.core.simulation import SIM_XML_MARKER
from gpuws.core.terminal import printable
from tests.core.nvsmi_fixtures import XML_DIR, read_fixture

# Values read from the files themselves (see the tags named in each comment's file).
EXPECTED: dict[str, list[dict[str, Any]]] = {
    "3090-v13.xml": [
        dict(name="NVIDIA GeForce RTX 3090", uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
             pci_bus_id="00000000:09:00.0", memory_total_mib=24576, driver_version="590.44.01",
             cuda_version="13.1", mig_mode=None, virtualization_mode="None", pcie_gen_current=1,
             pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16, power_limit_w=350.0,
             max_sm_clock_mhz=2100, max_mem_clock_mhz=9751, ecc_mode=None, persistence_mode="Enabled",
             product_brand="GeForce", serial=None),
    ],
    "a100-sxm4-v12.xml": [
        dict(name="NVIDIA A100-SXM4-80GB", uuid="GPU-513536b6-7d19-9063-b049-1e69664bb298",
             pci_bus_id="00000000:01:00.0", memory_total_mib=81920, driver_version="535.54.03",
             cuda_version="12.2", mig_mode="Enabled", mig_mode_pending="Enabled", virtualization_mode="None",
             pcie_gen_current=4, pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16,
             power_limit_w=500.0, max_sm_clock_mhz=1410, max_mem_clock_mhz=1593, ecc_mode="Enabled",
             persistence_mode="Disabled", product_brand="NVIDIA", serial="1650522003820"),
    ],
    "a10g.xml": [
        dict(name="NVIDIA A10G", uuid="GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94", pci_bus_id="00000000:00:1E.0",
             memory_total_mib=23028, driver_version="515.105.01", cuda_version="11.7", mig_mode=None,
             virtualization_mode="Pass-Through", pcie_gen_current=1, pcie_gen_max=4, pcie_width_current=8,
             pcie_width_max=16, power_limit_w=300.0, max_sm_clock_mhz=1710, max_mem_clock_mhz=6251,
             ecc_mode="Enabled", persistence_mode="Disabled", product_brand="NVIDIA", serial="0000000000000"),
    ],
    "dual_2070-v13.xml": [
        dict(index=0, name="NVIDIA GeForce RTX 2070", uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
             pci_bus_id="00000000:01:00.0", memory_total_mib=8192, driver_version="590.44.01", cuda_version="13.1",
             pcie_gen_max=3, pcie_width_current=8, pcie_width_max=16, power_limit_w=175.0,
             max_sm_clock_mhz=2100, max_mem_clock_mhz=7001, persistence_mode="Enabled"),
        dict(index=1, name="NVIDIA GeForce RTX 2070", uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789cd",
             pci_bus_id="00000000:02:00.0", memory_total_mib=8192, driver_version="590.44.01", cuda_version="13.1",
             pcie_gen_max=3, pcie_width_current=8, pcie_width_max=16, power_limit_w=175.0,
             max_sm_clock_mhz=2100, max_mem_clock_mhz=7001, persistence_mode="Enabled"),
    ],
    # DTD v10, a minimal document: no driver/cuda version, no max link info, power_draw N/A.
    "gtx-1070-ti.xml": [
        dict(name="GeForce GTX 1070 Ti", uuid="GPU-f9ba66fc-a7f5-94c5-da19-019ef2f9c665",
             pci_bus_id="00000000:01:00.0", memory_total_mib=4096, driver_version=None, cuda_version=None,
             virtualization_mode=None, pcie_gen_current=1, pcie_gen_max=None, pcie_width_current=16,
             pcie_width_max=None, power_limit_w=None, max_sm_clock_mhz=None, max_mem_clock_mhz=None,
             persistence_mode=None, product_brand=None),
    ],
    # Driver 418, no DOCTYPE line.
    "gtx-1660-ti.xml": [
        dict(name="Graphics Device", uuid="GPU-304a277d-3545-63b8-3a36-dfde3c992989", pci_bus_id="00000000:43:00.0",
             memory_total_mib=5912, driver_version="418.43", cuda_version="10.1", mig_mode=None,
             pcie_gen_max=3, pcie_width_max=16, power_limit_w=130.0, max_sm_clock_mhz=2145,
             max_mem_clock_mhz=4001, ecc_mode=None, persistence_mode="Disabled", product_brand="GeForce"),
    ],
    # NVIDIA/k8s-test-infra hardware captures (see tests/fixtures/real/README.md): a Grace
    # Blackwell tray whose link stops at the Grace CPU's Gen5 (max_device_link_gen 6), and a
    # GB300 whose max_host_link_gen (4) contradicts the Gen6 link it runs.
    "nvidia-gb200-x4-v13.xml": [
        dict(name="NVIDIA GB200", uuid="GPU-00000000-0000-0000-0000-000000000000",
             pci_bus_id="00000000:29:00.0", memory_total_mib=189471,
             driver_version="580.173.02", cuda_version="13.0", mig_mode="Disabled", virtualization_mode="Pass-Through",
             pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16,
             power_limit_w=1200.0, max_sm_clock_mhz=2062, max_mem_clock_mhz=3996, ecc_mode="Enabled",
             persistence_mode="Enabled", product_brand="NVIDIA", serial="1650000000001"),
        dict(name="NVIDIA GB200", uuid="GPU-00000001-0000-0000-0000-000000000001",
             pci_bus_id="00000000:3F:00.0", memory_total_mib=189471,
             driver_version="580.173.02", cuda_version="13.0", mig_mode="Disabled", virtualization_mode="Pass-Through",
             pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16,
             power_limit_w=1200.0, max_sm_clock_mhz=2062, max_mem_clock_mhz=3996, ecc_mode="Enabled",
             persistence_mode="Enabled", product_brand="NVIDIA", serial="1650000000001"),
        dict(name="NVIDIA GB200", uuid="GPU-00000002-0000-0000-0000-000000000002",
             pci_bus_id="00000000:9C:00.0", memory_total_mib=189471,
             driver_version="580.173.02", cuda_version="13.0", mig_mode="Disabled", virtualization_mode="Pass-Through",
             pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16,
             power_limit_w=1200.0, max_sm_clock_mhz=2062, max_mem_clock_mhz=3996, ecc_mode="Enabled",
             persistence_mode="Enabled", product_brand="NVIDIA", serial="1650000000002"),
        dict(name="NVIDIA GB200", uuid="GPU-00000003-0000-0000-0000-000000000003",
             pci_bus_id="00000000:B2:00.0", memory_total_mib=189471,
             driver_version="580.173.02", cuda_version="13.0", mig_mode="Disabled", virtualization_mode="Pass-Through",
             pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16,
             power_limit_w=1200.0, max_sm_clock_mhz=2062, max_mem_clock_mhz=3996, ecc_mode="Enabled",
             persistence_mode="Enabled", product_brand="NVIDIA", serial="1650000000002"),
    ],
    "nvidia-gb300-x4-v13.xml": [
        dict(name="NVIDIA GB300", uuid="GPU-00000000-0000-0000-0000-000000000000",
             pci_bus_id="00000008:06:00.0", memory_total_mib=284208,
             driver_version="580.173.02", cuda_version="13.0", mig_mode="Disabled", virtualization_mode="None",
             pcie_gen_current=6, pcie_gen_max=6, pcie_width_current=16, pcie_width_max=16,
             power_limit_w=1400.0, max_sm_clock_mhz=2070, max_mem_clock_mhz=3996, ecc_mode="Enabled",
             persistence_mode="Enabled", product_brand="NVIDIA", serial="1650000000001"),
        dict(name="NVIDIA GB300", uuid="GPU-00000001-0000-0000-0000-000000000001",
             pci_bus_id="00000009:06:00.0", memory_total_mib=284208,
             driver_version="580.173.02", cuda_version="13.0", mig_mode="Disabled", virtualization_mode="None",
             pcie_gen_current=6, pcie_gen_max=6, pcie_width_current=16, pcie_width_max=16,
             power_limit_w=1400.0, max_sm_clock_mhz=2070, max_mem_clock_mhz=3996, ecc_mode="Enabled",
             persistence_mode="Enabled", product_brand="NVIDIA", serial="1650000000001"),
        dict(name="NVIDIA GB300", uuid="GPU-00000002-0000-0000-0000-000000000002",
             pci_bus_id="00000018:06:00.0", memory_total_mib=284208,
             driver_version="580.173.02", cuda_version="13.0", mig_mode="Disabled", virtualization_mode="None",
             pcie_gen_current=6, pcie_gen_max=6, pcie_width_current=16, pcie_width_max=16,
             power_limit_w=1400.0, max_sm_clock_mhz=2070, max_mem_clock_mhz=3996, ecc_mode="Enabled",
             persistence_mode="Enabled", product_brand="NVIDIA", serial="1650000000002"),
        dict(name="NVIDIA GB300", uuid="GPU-00000003-0000-0000-0000-000000000003",
             pci_bus_id="00000019:06:00.0", memory_total_mib=284208,
             driver_version="580.173.02", cuda_version="13.0", mig_mode="Disabled", virtualization_mode="None",
             pcie_gen_current=6, pcie_gen_max=6, pcie_width_current=16, pcie_width_max=16,
             power_limit_w=1400.0, max_sm_clock_mhz=2070, max_mem_clock_mhz=3996, ecc_mode="Enabled",
             persistence_mode="Enabled", product_brand="NVIDIA", serial="1650000000002"),
    ],
    # AWS g6e.2xlarge: the L40S trained at x8 of its x16.
    "nvidia-l40s-v13.xml": [
        dict(name="NVIDIA L40S", uuid="GPU-00000000-0000-0000-0000-000000000000", pci_bus_id="00000000:30:00.0",
             memory_total_mib=46068, driver_version="595.91.07", cuda_version="13.2", mig_mode=None,
             virtualization_mode="Pass-Through", pcie_gen_current=4, pcie_gen_max=4, pcie_width_current=8,
             pcie_width_max=16, power_limit_w=350.0, max_sm_clock_mhz=2520, max_mem_clock_mhz=9001,
             ecc_mode="Enabled", persistence_mode="Enabled", product_brand="NVIDIA", serial="1650000000001"),
    ],
    # DTD v8, driver 375 (apache/hadoop): pre-Ampere ECC (per-location counts and <total>), no
    # cuda_version, `power_readings`; the publisher renamed the second GPU "..._2".
    "tesla-p100-pcie-x2-v8.xml": [
        dict(name="Tesla P100-PCIE-12GB", uuid="GPU-28604e81-21ec-cc48-6759-bf2648b22e16",
             pci_bus_id="0000:04:00.0", memory_total_mib=11567, driver_version="375.66", cuda_version=None,
             mig_mode=None, virtualization_mode="None", pcie_gen_current=3, pcie_gen_max=3, pcie_width_current=16,
             pcie_width_max=16, power_limit_w=250.0, max_sm_clock_mhz=1328, max_mem_clock_mhz=715,
             ecc_mode="Enabled", persistence_mode="Disabled", product_brand="Tesla", serial="0320717030197"),
        dict(name="Tesla P100-PCIE-12GB_2", uuid="GPU-46915a82-3fd2-8e11-ae26-a80b607c04f3",
             pci_bus_id="0000:82:00.0", memory_total_mib=12290, power_limit_w=250.0, serial="0320717031755"),
    ],
    "quadro-p2000-v12.xml": [
        dict(name="Quadro P2000", uuid="GPU-396caaed-39ca-3199-2e68-717cdb786ec6", pci_bus_id="00000000:17:00.0",
             memory_total_mib=5120, driver_version="525.125.06", cuda_version="12.0", power_limit_w=75.0,
             pcie_width_current=8, pcie_width_max=16, max_sm_clock_mhz=1721, max_mem_clock_mhz=3504,
             product_brand="Quadro", serial="0322218049033"),
    ],
    # Driver 418, no DOCTYPE; power_limit is N/A.
    "quadro-p400.xml": [
        dict(name="Quadro P400", uuid="GPU-8f750be4-dfbc-23b9-b33f-da729a536494", memory_total_mib=1998,
             driver_version="418.43", cuda_version="10.1", power_limit_w=None, max_sm_clock_mhz=1252,
             max_mem_clock_mhz=2005, pcie_gen_max=3, serial="0424418054852"),
    ],
    "rtx-3080-v12.xml": [
        dict(name="NVIDIA GeForce RTX 3080", memory_total_mib=10240, driver_version="536.40", cuda_version="12.2",
             virtualization_mode="Pass-Through", power_limit_w=336.0, max_mem_clock_mhz=9501,
             persistence_mode=None, pcie_gen_current=4),
    ],
    "rtx-3080-v13.xml": [
        dict(name="NVIDIA GeForce RTX 3080", pci_bus_id="00000000:0C:00.0", driver_version="595.58.03",
             cuda_version="13.2", power_limit_w=320.0, persistence_mode="Disabled", serial="REDACTED"),
    ],
    "rtx-3090-v12.xml": [
        dict(name="NVIDIA GeForce RTX 3090", pci_bus_id="00000000:00:10.0", driver_version="525.147.05",
             cuda_version="12.0", virtualization_mode="Pass-Through", power_limit_w=200.0, memory_total_mib=24576),
    ],
    "rtx-4000-sff-ada-v13.xml": [
        dict(name="NVIDIA RTX 4000 SFF Ada Generation", uuid="GPU-37037c3f-65c8-ec4d-24a9-420204ad8026",
             memory_total_mib=20475, driver_version="595.84", cuda_version="13.2", power_limit_w=70.0,
             max_sm_clock_mhz=3105, max_mem_clock_mhz=7001, ecc_mode="Disabled", product_brand="NVIDIA RTX"),
    ],
    "tesla-t4.xml": [
        dict(name="Tesla T4", uuid="GPU-d37e67a5-91dd-3774-a5cb-99096249601a", pci_bus_id="00000000:00:1E.0",
             memory_total_mib=15360, driver_version="515.105.01", cuda_version="11.7",
             virtualization_mode="Pass-Through", pcie_gen_current=3, pcie_gen_max=3, pcie_width_current=8,
             pcie_width_max=16, power_limit_w=70.0, max_sm_clock_mhz=1590, max_mem_clock_mhz=5001,
             ecc_mode="Enabled", persistence_mode="Disabled", serial="0000000000000"),
    ],
}  # fmt: skip


def parse_fixture(name: str) -> list[GpuInfo]:
    return parse_nvidia_smi_xml(read_fixture(XML_DIR / name))


def test_every_real_xml_fixture_has_expectations() -> None:
    """Field by field here for these; every capture, these and the later ones, is also read by
    tests/core/test_real_captures_sweep.py against ElementTree, whose table must name them all."""
    from tests.core.test_real_captures_sweep import VERDICTS

    on_disk = sorted(path.name for path in XML_DIR.glob("*.xml"))
    assert on_disk, f"no XML fixtures in {XML_DIR}"
    assert set(EXPECTED) <= set(on_disk)
    assert {f"nvidia-smi-xml/{name}" for name in on_disk} <= set(VERDICTS)


@pytest.mark.parametrize("file_name", sorted(EXPECTED))
def test_real_fixture_parses_to_the_values_in_the_file(file_name: str) -> None:
    gpus = parse_fixture(file_name)
    assert len(gpus) == len(EXPECTED[file_name])
    for position, (gpu, expected) in enumerate(zip(gpus, EXPECTED[file_name], strict=True)):
        assert gpu.index == position
        actual = {field: getattr(gpu, field) for field in expected}
        assert actual == expected
        # Nothing in these files is a vGPU guest, and none is simulated.
        assert gpu.is_vgpu_slice is False
        assert gpu.vgpu_profile is None


@pytest.mark.parametrize("file_name", sorted(EXPECTED))
def test_real_fixtures_are_never_labelled_simulated(file_name: str) -> None:
    assert is_simulated_xml(read_fixture(XML_DIR / file_name)) is False


def test_a100_mig_devices_come_from_the_xml_with_derived_profiles() -> None:
    (gpu,) = parse_fixture("a100-sxm4-v12.xml")
    assert [(d.index, d.gpu_instance_id, d.compute_instance_id) for d in gpu.mig_devices] == [
        (0, 3, 0),
        (1, 4, 0),
        (2, 5, 0),
        (3, 6, 0),
    ]
    # 14 SMs and 19968 MiB on an 80 GB A100 is the 1g.20gb profile (one compute, two memory slices).
    assert {(d.sm_count, d.memory_total_mib, d.profile) for d in gpu.mig_devices} == {(14, 19968, "1g.20gb")}
    assert all(d.uuid is None for d in gpu.mig_devices)


def test_non_mig_gpus_have_no_mig_mode_and_no_devices() -> None:
    (t4,) = parse_fixture("tesla-t4.xml")  # mig_mode N/A
    (p400,) = parse_fixture("quadro-p400.xml")  # no mig_mode element at all (driver 418)
    for gpu in (t4, p400):
        assert gpu.mig_mode is None and gpu.mig_mode_pending is None and gpu.mig_devices == []


def test_pcie_degradation_reads_width_only() -> None:
    (t4,) = parse_fixture("tesla-t4.xml")
    (a100,) = parse_fixture("a100-sxm4-v12.xml")
    (rtx3090,) = parse_fixture("3090-v13.xml")
    assert t4.pcie_degraded  # x8 of x16
    assert not a100.pcie_degraded
    assert not rtx3090.pcie_degraded  # gen 1 of 4 at idle is power saving, not a fault


def test_dual_gpu_file_gives_two_distinct_gpus_in_order() -> None:
    gpus = parse_fixture("dual_2070-v13.xml")
    assert [g.index for g in gpus] == [0, 1]
    assert len({g.uuid for g in gpus}) == 2
    assert len({g.pci_bus_id for g in gpus}) == 2


# --- vGPU guests ----------------------------------------------------------------------------


def _retag(xml: str, tag: str, value: str) -> str:
    return re.sub(rf"<{tag}>[^<]*</{tag}>", f"<{tag}>{value}</{tag}>", xml, count=1)


def test_vgpu_guest_by_virtualization_mode() -> None:
    # A T4 guest as a vGPU driver reports it: the profile is the product name, mode "VGPU".
    xml = _retag(read_fixture(XML_DIR / "tesla-t4.xml"), "product_name", "GRID T4-16Q")
    xml = _retag(xml, "virtualization_mode", "VGPU")
    (gpu,) = parse_nvidia_smi_xml(xml)
    assert gpu.is_vgpu_slice is True
    assert gpu.vgpu_profile == "GRID T4-16Q"
    assert gpu.virtualization_mode == "VGPU"


@pytest.mark.parametrize(
    ("product_name", "is_slice"),
    [
        ("GRID P4-1Q", True),
        ("NVIDIA A100-4C", True),
        ("GRID A100-1-5C", True),  # MIG-backed vGPU
        ("NVIDIA L40S-48Q", True),
        ("NVIDIA A100-SXM4-80GB", False),
        ("NVIDIA A100-PCIE-40GB", False),
        ("Tesla V100-SXM2-16GB", False),
        ("NVIDIA H100 80GB HBM3", False),
    ],
)
def test_vgpu_guest_by_product_name_even_when_mode_is_missing(product_name: str, is_slice: bool) -> None:
    xml = _retag(read_fixture(XML_DIR / "tesla-t4.xml"), "product_name", product_name)
    xml = _retag(xml, "virtualization_mode", "N/A")
    (gpu,) = parse_nvidia_smi_xml(xml)
    assert gpu.is_vgpu_slice is is_slice
    assert gpu.vgpu_profile == (product_name if is_slice else None)


def test_hypervisor_host_is_not_a_vgpu_slice() -> None:
    xml = _retag(read_fixture(XML_DIR / "a100-sxm4-v12.xml"), "virtualization_mode", "Host VGPU")
    (gpu,) = parse_nvidia_smi_xml(xml)
    assert gpu.virtualization_mode == "Host VGPU"
    assert gpu.is_vgpu_slice is False


# --- simulation marker -----------------------------------------------------------------------


def test_simulation_marker_comment_is_detected_before_or_inside_the_root() -> None:
    real = read_fixture(XML_DIR / "tesla-t4.xml")
    before_root = real.replace("<nvidia_smi_log>", f"<!-- {SIM_XML_MARKER} -->\n<nvidia_smi_log>", 1)
    inside_gpu = real.replace("<product_name>", f"<!-- {SIM_XML_MARKER} --><product_name>", 1)
    assert is_simulated_xml(before_root)
    assert is_simulated_xml(inside_gpu)
    # The marker comment does not change what is parsed.
    assert parse_nvidia_smi_xml(before_root) == parse_nvidia_smi_xml(real)


def test_marker_as_element_text_is_not_a_simulation_label() -> None:
    xml = _retag(read_fixture(XML_DIR / "tesla-t4.xml"), "product_name", SIM_XML_MARKER)
    assert is_simulated_xml(xml) is False


# --- bad input -------------------------------------------------------------------------------

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<nvidia_smi_log><gpu><product_name>&lol3;</product_name></gpu></nvidia_smi_log>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<nvidia_smi_log><gpu><product_name>&secret;</product_name></gpu></nvidia_smi_log>
"""


@pytest.mark.parametrize("document", [BILLION_LAUGHS, EXTERNAL_ENTITY], ids=["billion-laughs", "external-entity"])
def test_entity_declarations_are_refused(document: str) -> None:
    with pytest.raises(ParseError, match="entities"):
        parse_nvidia_smi_xml(document)
    with pytest.raises(ParseError, match="entities"):
        is_simulated_xml(document)


def test_truncated_output_names_the_line() -> None:
    real = read_fixture(XML_DIR / "a100-sxm4-v12.xml")
    cut = real[: real.index("<mig_devices>") + 40]
    with pytest.raises(ParseError, match=r"^nvidia-smi XML is truncated or malformed at line \d+$"):
        parse_nvidia_smi_xml(cut)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
            'printed "NVIDIA-SMI has failed',
        ),
        ("<html><body>proxy error</body></html>", "expected <nvidia_smi_log>"),
        ("<nvidia_smi_log><gpu><uuid>GPU-1</uuid></gpu></nvidia_smi_log>", "no product_name"),
    ],
)
def test_unexpected_output_is_a_clear_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)):
        parse_nvidia_smi_xml(text)


@pytest.mark.parametrize(
    ("fragment", "field"),
    [
        ("<fb_memory_usage><total>lots MiB</total></fb_memory_usage>", "memory_total_mib"),
        ("<fb_memory_usage><total>-81920 MiB</total></fb_memory_usage>", "memory_total_mib"),
        ("<power_readings><power_limit>300 kW</power_limit></power_readings>", "power_limit_w"),
        ("<power_readings><power_limit>-300.00 W</power_limit></power_readings>", "power_limit_w"),
        ("<pci><pci_gpu_link_info><link_widths><max_link_width>wide</max_link_width><current_link_width>-16x"
         "</current_link_width></link_widths></pci_gpu_link_info></pci>", "pcie_width_current"),
        ("<max_clocks><sm_clock>-1410 MHz</sm_clock></max_clocks>", "max_sm_clock_mhz"),
    ],
)
def test_one_bad_field_is_unknown_and_the_rest_is_kept(fragment: str, field: str) -> None:
    # Issue 13: one odd value (`-16x` link width) used to reject the whole inventory.
    xml = ("<nvidia_smi_log><driver_version>550.54</driver_version><gpu><product_name>X</product_name>"
           f"<uuid>GPU-1</uuid>{fragment}</gpu><gpu><product_name>Y</product_name></gpu></nvidia_smi_log>")
    gpus = parse_nvidia_smi_xml(xml)
    assert [g.name for g in gpus] == ["X", "Y"]
    assert getattr(gpus[0], field) is None
    assert (gpus[0].uuid, gpus[0].driver_version) == ("GPU-1", "550.54")


def test_names_from_the_host_keep_the_real_string() -> None:
    # Issue 28: the parsed value (and so --json) is the host's real string; views escape it
    # (gpuws.core.terminal.printable; see tests/cli/test_terminal_safety.py).
    xml = ("<nvidia_smi_log><gpu><product_name>NVIDIA A100\n9  FAKE GPU\u202eevil\u200b</product_name>"
           "</gpu></nvidia_smi_log>")
    (gpu,) = parse_nvidia_smi_xml(xml)
    assert gpu.name == "NVIDIA A100\n9  FAKE GPU\u202eevil\u200b"
    doc = json.dumps(Inventory(HostFacts(), [gpu]).to_dict())
    assert "NVIDIA A100\\n9  FAKE GPU\\u202eevil\\u200b" in doc  # escaped by the JSON encoding
    assert json.loads(doc)["gpus"][0]["name"] == gpu.name


def test_a_log_without_gpus_is_an_empty_inventory() -> None:
    xml = "<nvidia_smi_log><driver_version>550.54</driver_version><attached_gpus>0</attached_gpus></nvidia_smi_log>"
    assert parse_nvidia_smi_xml(xml) == []


def test_a_deep_document_without_gpus_is_an_error_not_an_empty_host() -> None:
    """Issue 28: well-formed XML 200,000 levels deep with no <gpu> read as "no GPUs reported"."""
    depth = 200_000
    xml = "<nvidia_smi_log>" + "<x>" * depth + "</x>" * depth + "</nvidia_smi_log>"
    with pytest.raises(ParseError, match="no <gpu> element"):
        parse_nvidia_smi_xml(xml)
    with pytest.raises(ParseError, match="no <gpu> element"):
        parse_nvidia_smi_xml("<nvidia_smi_log><driver_version>550.54</driver_version></nvidia_smi_log>")


def test_missing_markers_of_every_generation_are_none() -> None:
    xml = _retag(read_fixture(XML_DIR / "a100-sxm4-v12.xml"), "serial", "Requested functionality has been deprecated")
    xml = _retag(xml, "persistence_mode", "[Not Supported]")
    xml = _retag(xml, "current_ecc", "Not Supported")
    (gpu,) = parse_nvidia_smi_xml(xml)
    assert (gpu.serial, gpu.persistence_mode, gpu.ecc_mode) == (None, None, None)


def test_hostile_text_is_kept_escapable_and_bounded() -> None:
    # C1 controls are legal XML 1.0 characters but would drive a terminal (0x9b is CSI): the value
    # keeps it, the terminal view escapes it.
    xml = _retag(read_fixture(XML_DIR / "tesla-t4.xml"), "product_name", "Tesla&#x9b;31m T4")
    xml = _retag(xml, "serial", "9" * 10_000)
    (gpu,) = parse_nvidia_smi_xml(xml)
    assert gpu.name == "Tesla\x9b31m T4" and printable(gpu.name) == "Tesla\\x9b31m T4"
    assert gpu.serial is not None and len(gpu.serial) == 256


def test_damaged_documents_only_ever_raise_parse_errors() -> None:
    """Cut and corrupt a real document at many places: every outcome is a result or a ParseError."""
    real = read_fixture(XML_DIR / "a100-sxm4-v12.xml")
    rng = random.Random(20240611)
    outcomes = {"parsed": 0, "refused": 0}
    for _ in range(300):
        at = rng.randrange(len(real))
        damaged = rng.choice(
            [
                real[:at],
                real[:at] + rng.choice(["<", "&", "]]>", "\x00", "</gpu>", "x MiB"]) + real[at:],
                real[:at] + real[at + rng.randrange(1, 200) :],
            ]
        )
        try:
            parse_nvidia_smi_xml(damaged)
            outcomes["parsed"] += 1
        except ParseError as exc:
            assert isinstance(exc, GpuwsError)
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and outcomes["parsed"] > 0
