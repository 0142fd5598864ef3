"""Slice catalog, TARGET parsing and MIG placement rules, and per-host prices."""

from __future__ import annotations

import pytest

from gpuws.core.models import HostProfile
from gpuws.core.resize.catalog import GPU_MODELS, model_by_key, model_for_gpu_name
from gpuws.core.resize.layout import FULL_LAYOUT, LayoutError, fit_placements, parse_target, valid_layouts
from gpuws.core.resize.pricing import price_book

H100 = model_by_key("h100-80gb")
A100_40 = model_by_key("a100-40gb")


_LGIP_IDS = (19, 20, 15, 14, 9, 5, 0)  # `mig -lgip` order: 1g, 1g+me, 1g x2 memory, 2g, 3g, 4g, 7g


@pytest.mark.parametrize(
    ("key", "names"),
    [
        ("a100-40gb", ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")),
        ("a100-80gb", ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
        ("h100-80gb", ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
        ("h100-nvl", ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")),
        ("h200-141gb", ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
        ("b200", ("1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb")),
    ],
)
def test_profile_names_and_ids_per_model(key: str, names: tuple[str, ...]) -> None:
    model = model_by_key(key)
    assert {p.name: p.profile_id for p in model.profiles} == dict(zip(names, _LGIP_IDS, strict=True))
    assert [p.max_count for p in model.profiles] == [7, 1, 4, 3, 2, 1, 1]
    assert [p.compute_slices for p in model.profiles] == [1, 1, 1, 2, 3, 4, 7]


@pytest.mark.parametrize(
    ("product_name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-80gb"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA H200", "h200-141gb"),
        ("NVIDIA B200", "b200"),
    ],
)
def test_driver_product_names_map_to_models(product_name: str, key: str) -> None:
    model = model_for_gpu_name(product_name)
    assert model is not None and model.key == key


@pytest.mark.parametrize("name", ["NVIDIA L40S", "GRID A100-10C", "Tesla T4", ""])
def test_non_mig_gpus_have_no_catalog(name: str) -> None:
    assert model_for_gpu_name(name) is None


def test_catalog_placements_match_the_driver_fixture_lgipp() -> None:
    # `nvidia-smi mig -lgipp` on a real H100 NVL (fixture) lists these for IDs 19, 20, 15, 14, 9, 5, 0.
    expected = {19: ((0, 1, 2, 3, 4, 5, 6), 1), 20: ((0, 1, 2, 3, 4, 5, 6), 1), 15: ((0, 2, 4, 6), 2),
                14: ((0, 2, 4), 2), 9: ((0, 4), 4), 5: ((0,), 4), 0: ((0,), 8)}
    for model in GPU_MODELS:
        assert {p.profile_id: (p.placement_starts, p.placement_size) for p in model.profiles} == expected


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("full", "full"),
        ("FULL", "full"),
        ("mig", "mig"),
        ("7x1g.10gb", "7x1g.10gb"),
        ("3g.40gb,3g.40gb", "2x3g.40gb"),
        ("1g.10gb, 2g.20gb ,4g.40gb", "4g.40gb,2g.20gb,1g.10gb"),
        ("4x1g.20gb", "4x1g.20gb"),
        ("3g.40gb,2g.20gb,1g.10gb,1g.10gb", "3g.40gb,2g.20gb,2x1g.10gb"),
        ("7g.80gb", "7g.80gb"),
    ],
)
def test_targets_parse_to_canonical_layouts(text: str, canonical: str) -> None:
    layout = parse_target(text, H100)
    assert layout.describe() == canonical
    assert parse_target(canonical, H100) == layout  # the canonical text reads back the same


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("8x1g.10gb", "must be 1 to 7"),
        ("5x1g.20gb", "at most 4 1g.20gb"),
        ("3x3g.40gb", "at most 2 3g.40gb"),
        ("4g.40gb,4g.40gb", "at most 1 4g.40gb"),
        ("4g.40gb,3g.40gb,1g.10gb", "needs 8 compute slices"),
        ("7g.80gb,1g.10gb", "needs 8 compute slices"),
        ("4g.40gb,3x1g.20gb", "no valid placement"),  # 7 compute slices, but only slots 4-7 are left
        ("3g.40gb,4x1g.20gb", "no valid placement"),  # 4 + 8 memory slots of 8
        ("1g.5gb", "not a MIG profile of the H100 80GB"),
        ("7x1g.10gb; rm -rf /", "cannot read"),
        ("", "give a layout"),
        ("x" * 500, "give a layout"),
    ],
)
def test_layouts_that_do_not_fit_are_refused_with_why(text: str, reason: str) -> None:
    with pytest.raises(LayoutError, match=reason):
        parse_target(text, H100)


def test_mixed_layout_gets_a_valid_placement() -> None:
    placed = fit_placements(parse_target("4g.40gb,2g.20gb,1g.10gb", H100), H100)
    slots = sorted((p.name, start) for p, start in placed)
    assert slots == [("1g.10gb", 6), ("2g.20gb", 4), ("4g.40gb", 0)]


def test_valid_layouts_start_with_full_and_include_seven_small_slices() -> None:
    names = [layout.describe() for layout in valid_layouts(A100_40)]
    assert names[0] == "full"
    assert "7x1g.5gb" in names and "2x3g.20gb" in names and "7g.40gb" in names
    assert "3x3g.20gb" not in names


def test_prices_derive_from_full_card_by_compute_share_and_can_be_overridden() -> None:
    profile = HostProfile(name="box", host="h", price_per_hour=14.0)
    book = price_book(profile, H100, gpu_count=2)  # two GPUs: 7.00 per card
    assert book.full_card == 7.0 and book.source == "profile"
    assert book.layout_price(FULL_LAYOUT, H100) == 7.0
    assert book.layout_price(parse_target("3g.40gb", H100), H100) == 3.0
    assert book.layout_price(parse_target("1g.10gb,2g.20gb", H100), H100) == 3.0
    profile.slice_prices = {"1g.10gb": 0.5, "full": 8.0}
    book = price_book(profile, H100, gpu_count=2)
    assert book.source == "override" and book.full_card == 8.0
    assert book.layout_price(parse_target("7x1g.10gb", H100), H100) == 3.5
    assert book.layout_price(parse_target("4g.40gb", H100), H100) == pytest.approx(8.0 * 4 / 7, abs=1e-4)


def test_hosts_without_a_price_use_the_labelled_reference_price() -> None:
    book = price_book(HostProfile(name="demo", host="127.0.0.1"), H100)
    assert book.source == "reference" and book.full_card == H100.reference_price_per_hour
    assert price_book(None, None).full_card is None
