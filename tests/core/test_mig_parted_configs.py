"""NVIDIA's own mig-parted default config (tests/fixtures/mig-parted), read with mig-parted's rules."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from gpuws.core.errors import ParseError
from gpuws.core.gpus.models import MIG_GPUS, VARIANTS
from gpuws.core.resize.catalog import GPU_MODELS, model_by_key
from gpuws.core.resize.layout import FULL_LAYOUT, LayoutError, creation_order, parse_target
from gpuws.core.resize.migparted import (
    GpuAction,
    HostGpu,
    MigPartedEntry,
    assert_differences,
    config_targets,
    export_mig_parted,
    import_mig_parted,
    select_entry,
)

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "mig-parted" / "config-default.yaml"
H100 = model_by_key("h100-80gb")
A100_40 = model_by_key("a100-40gb")


@functools.cache
def _configs() -> dict[str, list[MigPartedEntry]]:
    return import_mig_parted(DEFAULT_CONFIG.read_text())


def test_nvidias_default_config_imports_whole() -> None:
    configs = _configs()
    assert len(configs) == 81
    assert {"all-disabled", "all-1g.10gb", "all-balanced", "all-1g.35gb", "all-1g.10gb.me"} <= set(configs)


def _pairs() -> list[tuple[str, str, str]]:
    """(config, catalog model, PCI id) for every pair mig-parted would apply: the entry it selects
    for a GPU of that model names only that model's profiles."""
    pairs = []
    for name, entries in _configs().items():
        for model in GPU_MODELS:
            ids = [i for v in VARIANTS if v.mig == model.key for i in v.pci_device_ids]
            for pci in ids[:1]:
                entry = select_entry(entries, 0, pci)
                if entry is None or not entry.mig_enabled:
                    continue
                if all(model.profile(p) is not None for p, _ in entry.mig_devices):
                    pairs.append((name, model.key, pci))
    return pairs


def test_every_pair_mig_parted_would_apply_is_accepted() -> None:
    pairs = _pairs()
    assert len(pairs) >= 50  # 6 catalog models x the configs whose profiles they have
    for name, key, pci in pairs:
        entry = select_entry(_configs()[name], 0, pci)
        assert entry is not None
        layout = entry.layout(model_by_key(key))  # raises LayoutError if gpuws disagreed with mig-parted
        creation_order(layout, model_by_key(key))  # and it can be created one instance at a time


def test_balanced_layouts_are_created_in_an_order_the_driver_can_place() -> None:
    """Largest first puts 3g at 0-3, 2g at 4-5, 1g at 6, and the last 1g finds no start (slot 7 is
    not one): the driver says "Insufficient Resources". Smallest first fits."""
    layout = parse_target("3g.40gb,2g.20gb,2x1g.10gb", H100)
    order = [p.name for p in creation_order(layout, H100)]
    assert sorted(order) == sorted(layout.instances)
    assert order != ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert [p.name for p in creation_order(parse_target("7x1g.10gb", H100), H100)] == ["1g.10gb"] * 7


@pytest.mark.parametrize(
    ("config", "pci", "key", "layout"),
    [
        ("all-1g.10gb", "0x233010DE", "h100-80gb", "7x1g.10gb"),
        ("all-1g.10gb", "0x20B010DE", "a100-40gb", "4x1g.10gb"),  # the A100-40GB entry: 1g.10gb is ID 15
        ("all-balanced", "0x233010DE", "h100-80gb", "3g.40gb,2g.20gb,2x1g.10gb"),
        ("all-balanced", "0x20B210DE", "a100-80gb", "3g.40gb,2g.20gb,2x1g.10gb"),
        ("all-balanced", "0x20B010DE", "a100-40gb", "3g.20gb,2g.10gb,2x1g.5gb"),
        ("all-balanced", "0x232110DE", "h100-nvl", "3g.47gb,2g.24gb,2x1g.12gb"),
        ("all-balanced", "0x233510DE", "h200-141gb", "3g.71gb,2g.35gb,2x1g.18gb"),
        ("all-balanced", "0x290110DE", "b200", "3g.90gb,2g.45gb,2x1g.23gb"),
        ("all-1g.35gb", "0x233510DE", "h200-141gb", "4x1g.35gb"),
        ("all-1g.10gb.me", "0x233010DE", "h100-80gb", "1g.10gb+me"),
        ("all-1g.23gb.me", "0x290110DE", "b200", "1g.23gb+me"),
        ("all-disabled", "0x233010DE", "h100-80gb", "full"),
    ],
)
def test_device_filter_selects_the_entry_for_each_gpu(config: str, pci: str, key: str, layout: str) -> None:
    model = model_by_key(key)
    entry = select_entry(_configs()[config], 0, pci)
    assert entry is not None and entry.layout(model) == parse_target(layout, model)


def test_selection_rules_are_mig_parteds() -> None:
    text = """
version: v1
mig-configs:
  c:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
    - device-filter: "0x233010DE"
      devices: [1]
      mig-enabled: false
    - device-filter: ["0x20B210DE", "0x233010de"]
      devices: [2, 3]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
"""
    entries = import_mig_parted(text)["c"]
    assert select_entry(entries, 0, "0x233010DE") is entries[0]  # no later entry matches GPU 0
    assert select_entry(entries, 1, "0x233010DE") is entries[1]  # the last match wins
    assert select_entry(entries, 1, "0x20B210DE") is entries[0]  # filter by PCI id: not this one
    assert select_entry(entries, 3, "0x233010DE") is entries[2]  # ids compare case-insensitively
    only_filtered = import_mig_parted(
        "version: v1\nmig-configs: {c: [{device-filter: '0x20B010DE', devices: all, mig-enabled: false}]}")["c"]
    assert select_entry(only_filtered, 0, "0x233010DE") is None  # not selected: left alone


def _gpu(index: int, pci: str | None, key: str | None, layout: str = "full", name: str = "GPU") -> HostGpu:
    model = model_by_key(key) if key else None
    return HostGpu(index, name, pci, model, parse_target(layout, model) if model else FULL_LAYOUT)


def test_targets_and_assert_on_a_mixed_host() -> None:
    entries = _configs()["all-1g.10gb"]
    gpus = [_gpu(0, "0x233010DE", "h100-80gb", "7x1g.10gb"), _gpu(1, "0x20B210DE", "a100-80gb"),
            _gpu(2, "0x26B910DE", None), _gpu(3, "0x20F110DE", None, name="GRID A100-10C")]
    targets = config_targets("all-1g.10gb", entries, gpus)
    assert [t.action for t in targets] == [GpuAction.UNCHANGED, GpuAction.CHANGE, GpuAction.NOT_SELECTED,
                                           GpuAction.NOT_MIG_CAPABLE]
    diffs = assert_differences(targets)
    assert diffs == ["GPU 1 (GPU): has full, the config wants 7x1g.10gb"]
    disabled = config_targets("all-disabled", _configs()["all-disabled"], gpus)
    assert [t.action for t in disabled] == [GpuAction.CHANGE, GpuAction.UNCHANGED, GpuAction.UNCHANGED,
                                            GpuAction.UNCHANGED]


def test_a_config_that_does_not_fit_a_selected_gpu_is_refused_naming_it() -> None:
    with pytest.raises(LayoutError, match=r"config 'all-1g.5gb' on GPU 0 \(GPU\)"):
        config_targets("all-1g.5gb", _configs()["all-1g.5gb"], [_gpu(0, "0x233010DE", "h100-80gb")])


@pytest.mark.parametrize("bad", ["[1, 2]", "'not-an-id'", "[]"])
def test_bad_device_filters_are_parse_errors(bad: str) -> None:
    with pytest.raises(ParseError, match="device-filter"):
        import_mig_parted(f"version: v1\nmig-configs: {{c: [{{device-filter: {bad}, devices: all, "
                          "mig-enabled: false}]}")


def test_export_reads_back_through_the_same_rules() -> None:
    layouts = {0: parse_target("1g.10gb+me,3g.40gb", H100), 1: parse_target("4x1g.10gb", A100_40)}
    entries = import_mig_parted(export_mig_parted(layouts, "mine"))["mine"]
    assert select_entry(entries, 0, "0x233010DE") is not None
    assert select_entry(entries, 0, "0x233010DE").layout(H100) == layouts[0]  # type: ignore[union-attr]
    assert select_entry(entries, 1).layout(A100_40) == layouts[1]  # type: ignore[union-attr]
    assert all(g.profiles for g in MIG_GPUS.values() if g.key in {m.key for m in GPU_MODELS})
