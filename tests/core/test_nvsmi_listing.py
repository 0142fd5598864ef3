"""`nvidia-smi -L` parsing, MIG profile derivation and merging, against the real captures."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from gpuws.core.errors import ParseError
from gpuws.core.inventory import GpuInfo, MigDevice
from gpuws.core.nvsmi import (
    GpuListEntry,
    MigListEntry,
    derive_mig_profile,
    merge_gpu_listing,
    parse_gpu_list,
    parse_nvidia_smi_xml,
)
from tests.core.nvsmi_fixtures import H100, H100_MIG, MIG_DIR, XML_DIR, capture_section, read_fixture

MASKED_GPU_UUID = "GPU-00000000-0000-0000-0000-000000000000"


def test_plain_gpu_list_from_the_h100_capture() -> None:
    assert parse_gpu_list(capture_section(H100, "capabilities :: list (-L)")) == [
        GpuListEntry(index=0, name="NVIDIA H100 80GB HBM3", uuid=MASKED_GPU_UUID, mig_devices=[])
    ]


def test_mig_devices_listed_under_their_gpu() -> None:
    (gpu,) = parse_gpu_list(capture_section(H100_MIG, "capabilities :: list (-L)"))
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.mig_devices == [
        MigListEntry(0, "3g.40gb", "MIG-00000000-0000-0000-0000-000000000000"),
        MigListEntry(1, "2g.20gb", "MIG-00000001-0000-0000-0000-000000000001"),
        MigListEntry(2, "1g.10gb", "MIG-00000002-0000-0000-0000-000000000002"),
        MigListEntry(3, "1g.10gb", "MIG-00000003-0000-0000-0000-000000000003"),
    ]


def test_older_driver_mig_uuid_form_and_several_gpus() -> None:
    # R450/R460 wrote MIG UUIDs as MIG-GPU-<gpu uuid>/<gi>/<ci>.
    text = (
        "GPU 0: A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
        "  MIG 1g.5gb Device 0: (UUID: MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0)\n"
        "GPU 1: A100-SXM4-40GB (UUID: GPU-6e6cb1e7-e44e-3c3d-635e-af4e9e3c9b88)\n"
    )
    gpus = parse_gpu_list(text)
    assert [(g.index, len(g.mig_devices)) for g in gpus] == [(0, 1), (1, 0)]
    assert gpus[0].mig_devices[0] == MigListEntry(0, "1g.5gb", "MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("No devices were found\n", "not a GPU or MIG device line"),
        ("  MIG 1g.10gb Device 0: (UUID: MIG-1)\n", "MIG device before any GPU"),
        ("GPU 0: H100 (UUID: GPU-1)\n\x1b[31mGPU zero\n", "line 2"),
    ],
)
def test_unexpected_lines_are_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)):
        parse_gpu_list(text)


# --- profile derivation, checked against real `mig -lgip` tables and the H100 MIG capture -------

_LGIP_ROW = re.compile(
    r"^\|\s+\d+\s+MIG (?P<name>\S+)\s+\d+\s+\d+/\d+\s+(?P<gib>[\d.]+)\s+\w+\s+(?P<sm>\d+)\s+\d+\s+\d+\s+\|$"
)
_LGIP_ROW2 = re.compile(r"^\|\s+(?P<ce>\d+)\s+(?P<jpeg>\d+)\s+(?P<ofa>\d+)\s+\|$")


def lgip_profiles(path: Path) -> list[tuple[str, int, int, int]]:
    """(name, memory MiB, SMs, OFA engines) for each row of a real `nvidia-smi mig -lgip` table."""
    lines = read_fixture(path).splitlines()
    rows = []
    for line, following in itertools.pairwise(lines):
        first, second = _LGIP_ROW.match(line), _LGIP_ROW2.match(following)
        if first and second:
            memory_mib = round(float(first["gib"]) * 1024)
            rows.append((first["name"], memory_mib, int(first["sm"]), int(second["ofa"])))
    return rows


@pytest.mark.parametrize(
    ("file_name", "product_name", "parent_memory_mib"),
    [
        # Parent memory: the H100 80GB capture's memory.total; the H100 NVL table's 95830MiB.
        ("h100-sxm5-lgip.txt", "NVIDIA H100 80GB HBM3", 81559),
        ("h100-nvl-lgip-lgipp-cgi.txt", "NVIDIA H100 NVL", 95830),
    ],
)
def test_derived_profile_names_match_the_real_lgip_tables(
    file_name: str, product_name: str, parent_memory_mib: int
) -> None:
    profiles = lgip_profiles(MIG_DIR / file_name)
    assert len(profiles) == 7, "expected the seven H100 GPU-instance profiles in the fixture"
    for name, memory_mib, sm_count, ofa in profiles:
        assert derive_mig_profile(product_name, parent_memory_mib, sm_count, memory_mib, ofa) == name


def test_derived_profiles_agree_with_the_real_h100_mig_capture() -> None:
    """The -q section's SM counts and memory, derived, give the names its -L section lists."""
    query = capture_section(H100_MIG, "idle :: query (-q)")
    sms = [int(n) for n in re.findall(r"Multiprocessor count\s+:\s+(\d+)", query)]
    memory = [int(n) for n in re.findall(r"Shared FB Memory Usage\n\s+Total\s+:\s+(\d+) MiB", query)]
    (parent,) = [int(n) for n in re.findall(r"\n    FB Memory Usage\n\s+Total\s+:\s+(\d+) MiB", query)]
    (listed,) = parse_gpu_list(capture_section(H100_MIG, "capabilities :: list (-L)"))
    derived = [
        derive_mig_profile("NVIDIA H100 80GB HBM3", parent, sm, mib) for sm, mib in zip(sms, memory, strict=True)
    ]
    assert parent == 81559
    assert derived == [device.profile for device in listed.mig_devices]


@pytest.mark.parametrize(
    ("product_name", "parent", "sm", "memory", "expected"),
    [
        ("NVIDIA A100-SXM4-40GB", 40960, 14, 4864, "1g.5gb"),
        ("NVIDIA A100-SXM4-40GB", 40960, 42, 19968, "3g.20gb"),
        ("NVIDIA A100-SXM4-40GB", 40960, 98, 40192, "7g.40gb"),
        ("NVIDIA A100 80GB PCIe", 81920, 98, 80896, "7g.80gb"),
        # Approximate MiB figures for families without a real table in the fixtures.
        ("NVIDIA A30", 24576, 14, 5952, "1g.6gb"),
        ("NVIDIA A30", 24576, 56, 24062, "4g.24gb"),
        ("NVIDIA GeForce RTX 3090", 24576, 14, 5952, None),  # not MIG-capable: no guess
        ("NVIDIA H100 80GB HBM3", 81559, None, 9984, None),
        ("NVIDIA H100 80GB HBM3", 81559, 8, 9984, None),  # under one slice: not a real profile
    ],
)
def test_derivation_for_other_families_and_refusals(
    product_name: str, parent: int, sm: int | None, memory: int, expected: str | None
) -> None:
    assert derive_mig_profile(product_name, parent, sm, memory) == expected


# --- merging -L into the XML inventory ---------------------------------------------------------


def _h100_with_mig(profiles: list[str | None]) -> GpuInfo:
    return GpuInfo(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        uuid=MASKED_GPU_UUID,
        pci_bus_id="00000000:00:09.0",
        memory_total_mib=81559,
        driver_version="590.48.01",
        cuda_version="13.1",
        mig_mode="Enabled",
        mig_devices=[MigDevice(i, None, 0, p, None) for i, p in enumerate(profiles)],
    )


def test_listing_fills_profiles_and_uuids_from_the_real_capture() -> None:
    gpu = _h100_with_mig([None, "2g.20gb", "wrong-guess", None])
    merge_gpu_listing([gpu], parse_gpu_list(capture_section(H100_MIG, "capabilities :: list (-L)")))
    assert [d.profile for d in gpu.mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert gpu.mig_devices[3].uuid == "MIG-00000003-0000-0000-0000-000000000003"


def test_listing_adds_mig_devices_the_xml_did_not_describe() -> None:
    gpu = _h100_with_mig([])
    merge_gpu_listing([gpu], parse_gpu_list(capture_section(H100_MIG, "capabilities :: list (-L)")))
    assert [(d.index, d.profile, d.memory_total_mib) for d in gpu.mig_devices] == [
        (0, "3g.40gb", None),
        (1, "2g.20gb", None),
        (2, "1g.10gb", None),
        (3, "1g.10gb", None),
    ]


def test_listing_for_another_gpu_changes_nothing() -> None:
    gpus = parse_nvidia_smi_xml(read_fixture(XML_DIR / "a100-sxm4-v12.xml"))
    before = [d.profile for d in gpus[0].mig_devices]
    merge_gpu_listing(gpus, parse_gpu_list(capture_section(H100_MIG, "capabilities :: list (-L)")))
    assert [d.profile for d in gpus[0].mig_devices] == before == ["1g.20gb"] * 4


def test_repeated_masked_uuids_match_by_index_too() -> None:
    gpus = parse_nvidia_smi_xml(read_fixture(XML_DIR / "dual_2070-v13.xml"))
    gpus[1].uuid = gpus[0].uuid  # as a masked capture would have it
    text = (
        f"GPU 0: NVIDIA GeForce RTX 2070 (UUID: {gpus[0].uuid})\n"
        f"GPU 1: NVIDIA GeForce RTX 2070 (UUID: {gpus[0].uuid})\n"
        "  MIG 1g.5gb Device 0: (UUID: MIG-1)\n"
    )
    merge_gpu_listing(gpus, parse_gpu_list(text))
    assert gpus[0].mig_devices == []
    assert [d.uuid for d in gpus[1].mig_devices] == ["MIG-1"]
