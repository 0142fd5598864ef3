"""The cloud instance-type catalog (core/resize/instance_types): fractions, families, prices,
and the check that the GPU seen after a resize is what the type promises."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from gpuws.core.resize.instance_types import (
    CATALOG,
    SOURCES,
    InstanceType,
    family_of,
    instance_type,
    matches_gpu,
    price_for,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "nvidia-smi-captures"


def test_every_type_names_known_sources_and_figures_are_sane() -> None:
    keys = {s.key for s in SOURCES}
    assert len(keys) == len(SOURCES)
    for t in CATALOG:
        assert t.sources, t.name
        assert set(t.sources) <= keys, t.name
        assert 0 < t.fraction <= 1
        assert t.vcpus > 0 and t.memory_gib > 0 and t.framebuffer_mib > 0
        assert all(p > 0 for p in t.prices.values()) and all(p > 0 for p in t.spot_prices.values())
    assert len({(t.provider, t.name) for t in CATALOG}) == len(CATALOG)


def test_aws_g6f_fractions_of_an_l4_as_the_issue_lists_them() -> None:
    expected = {"g6f.large": Fraction(1, 8), "g6f.xlarge": Fraction(1, 8),
                "g6f.2xlarge": Fraction(1, 4), "g6f.4xlarge": Fraction(1, 2), "g6.xlarge": Fraction(1)}
    for name, fraction in expected.items():
        t = instance_type("aws", name)
        assert t is not None and t.card == "L4" and t.fraction == fraction
    large = instance_type("aws", "g6f.large")
    assert large is not None and large.vgpu_profile == "NVIDIA L4-3Q" and large.framebuffer_mib == 3072


def test_the_whole_l4_framebuffer_is_what_a_real_l4_shows() -> None:
    capture = (FIXTURES / "l4__550.90.07__table-and-a.txt").read_text()
    g6 = instance_type("aws", "g6.xlarge")
    assert g6 is not None
    assert f"/  {g6.framebuffer_mib}MiB" in capture


def test_family_lists_every_fraction_and_the_whole_card_smallest_first() -> None:
    names = [t.name for t in family_of("aws", "g6f.2xlarge")]
    assert names == ["g6f.large", "g6f.xlarge", "g6f.2xlarge", "g6f.4xlarge",
                     "g6.xlarge", "g6.2xlarge", "g6.4xlarge"]
    azure = family_of("azure", "Standard_NV36ads_A10_v5")
    assert [t.fraction_text for t in azure] == ["1/6", "1/3", "1/2", "full"]
    alibaba = family_of("alibaba", "ecs.gn7i-c8g1.2xlarge")
    assert [t.fraction_text for t in alibaba][:3] == ["1/6", "1/3", "1/2"]
    assert all(t.card == "A10" for t in alibaba)
    assert family_of("aws", "p5.48xlarge") == ()


def test_lookup_by_name_alone_for_a_host_without_a_preset() -> None:
    # Azure has no provider preset: such a host is kind "custom" (its own commands).
    t = instance_type("custom", "Standard_NV6ads_A10_v5")
    assert t is not None and t.provider == "azure"
    assert instance_type(None, "type:g6f.large") == instance_type("aws", "g6f.large")
    assert instance_type("azure", "g6f.large") is None


def test_price_per_region_and_none_where_not_published() -> None:
    g6 = instance_type("aws", "g6.xlarge")
    large = instance_type("aws", "g6f.large")
    assert g6 is not None and large is not None
    assert g6.price("us-east-1") == pytest.approx(0.8048)
    assert g6.price("mars-north-1") is None and g6.price(None) is None
    assert large.price("us-east-1") is None  # not published in a source read: no guess
    assert g6.spot_price("us-east-1") is not None


def test_the_hosts_slice_price_overrides_the_catalog() -> None:
    t = instance_type("aws", "g6.xlarge")
    assert t is not None
    assert price_for(t, "us-east-1") == (0.8048, "catalog")
    assert price_for(t, "us-east-1", {"g6.xlarge": 0.5}) == (0.5, "override")
    assert price_for(t, "us-east-1", {"type:g6.xlarge": 0.6}) == (0.6, "override")
    large = instance_type("aws", "g6f.large")
    assert large is not None
    assert price_for(large, "us-east-1") == (None, "none")


@pytest.mark.parametrize(("name", "fb", "profile"), [
    ("g6f.large", 3072, "NVIDIA L4-3Q"),
    ("g6f.4xlarge", 12288, "NVIDIA L4-12Q"),
    ("g6.xlarge", 23034, None),
    ("Standard_NV6ads_A10_v5", 4096, "NVIDIA A10-4Q"),
    ("Standard_NV36ads_A10_v5", 23028, None),  # 24 GiB nominal; a whole A10 reports 23028 MiB
])
def test_matches_the_gpu_the_type_promises(name: str, fb: int, profile: str | None) -> None:
    t = instance_type(None, name)
    assert t is not None
    assert matches_gpu(t, fb, profile) is None


def test_a_mismatch_names_both_the_gpu_seen_and_the_type() -> None:
    half = instance_type("aws", "g6f.4xlarge")
    assert half is not None
    reason = matches_gpu(half, 3072, "NVIDIA L4-3Q")
    assert reason is not None
    assert "3072 MiB" in reason and "NVIDIA L4-3Q" in reason and "g6f.4xlarge" in reason and "1/2" in reason
    full = instance_type("aws", "g6.xlarge")
    assert full is not None
    reason = matches_gpu(full, 12288, "NVIDIA L4-12Q")
    assert reason is not None and "full" in reason and "12288 MiB" in reason
    # The right size but another profile (an A-series or C-series vGPU) is still not the type.
    reason = matches_gpu(half, 12288, "NVIDIA L4-12C")
    assert reason is not None and "NVIDIA L4-12C" in reason and "NVIDIA L4-12Q" in reason
    # A passthrough card where a vGPU was promised.
    reason = matches_gpu(half, 12288, None)
    assert reason is not None and "passthrough" in reason


def test_the_tolerance_never_takes_the_next_fraction_for_this_one() -> None:
    for t in CATALOG:
        for other in family_of(t.provider, t.name):
            if other.fraction != t.fraction:
                assert matches_gpu(t, other.framebuffer_mib, other.vgpu_profile) is not None, (t.name, other.name)


def test_instance_type_is_frozen() -> None:
    t = instance_type("aws", "g6.xlarge")
    assert isinstance(t, InstanceType)
    with pytest.raises(AttributeError):
        t.name = "x"  # type: ignore[misc]


@pytest.mark.parametrize(("name", "vgpu"), [
    ("NVIDIA L4-3Q", True), ("NVIDIA L4-12Q", True), ("NVIDIA A10-4Q", True), ("GRID A100-10C", True),
    ("NVIDIA L4", False), ("NVIDIA A10", False), ("NVIDIA H100 80GB HBM3", False),
])
def test_a_cloud_vgpu_guest_is_a_vgpu_slice_not_a_full_card(name: str, vgpu: bool) -> None:
    # A G6f or NVadsA10 v5 guest's GPU is named "NVIDIA L4-3Q", without "GRID": the Resize tab and
    # the advice called it the whole card.
    from gpuws.core.resize.targets import is_vgpu

    assert is_vgpu(name) is vgpu
