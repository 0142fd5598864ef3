"""Import and export layouts in NVIDIA mig-parted's YAML config format.

    version: v1
    mig-configs:
      NAME:
        - devices: all            # or a list of GPU indexes: [0, 1]
          mig-enabled: true
          mig-devices:
            "1g.10gb": 7

Read with `yaml.safe_load` only. mig-parted's selection rules (api/spec/v1, `nvidia-mig-parted
assert/apply`): an entry applies to a GPU when its `devices` (`all` or a list of indexes) include
the GPU's index and its `device-filter` (one PCI device id such as "0x233010DE", or a list; absent:
any) includes the GPU's PCI device id; when several entries match a GPU, the last one wins; a GPU
no entry selects is left as it is. Profile names (`1g.10gb+me`, also ones gpuws does not know such
as `1g.24gb+gfx`) are checked only against the GPUs an entry selects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import yaml

from gpuws.core.errors import ParseError
from gpuws.core.gpus.models import normalise_pci_id
from gpuws.core.jsontypes import JsonObject
from gpuws.core.nesting import NestingTooDeep, check_yaml_nesting
from gpuws.core.resize.catalog import GpuModel
from gpuws.core.resize.layout import FULL_LAYOUT, Layout, LayoutError, fit_placements, make_layout

_MAX_YAML_BYTES = 1_000_000
_PCI_ID = re.compile(r"[0-9A-F]{8}")  # device id + vendor id, as "0x233010DE" normalised


@dataclass(frozen=True)
class MigPartedEntry:
    """One list item of a mig-parted config: which devices, and the layout they get."""

    devices: tuple[int, ...] | None  # None: all devices
    mig_enabled: bool
    mig_devices: tuple[tuple[str, int], ...]
    device_filter: tuple[str, ...] = ()  # normalised PCI device ids ("233010DE"); empty: any GPU

    def applies_to(self, gpu_index: int, pci_device_id: str | None = None) -> bool:
        """mig-parted's MatchesDeviceFilter and MatchesDevices for one GPU."""
        if self.device_filter and (pci_device_id is None or normalise_pci_id(pci_device_id) not in self.device_filter):
            return False
        return self.devices is None or gpu_index in self.devices

    def layout(self, model: GpuModel | None) -> Layout:
        """This entry as a Layout; with a model, checked against its profiles and placements."""
        if not self.mig_enabled:
            return FULL_LAYOUT
        names = [name for name, count in self.mig_devices for _ in range(count)]
        layout = make_layout(model, True, names)
        if model is not None:
            fit_placements(layout, model)
        return layout


def export_mig_parted(layouts: Mapping[int, Layout], config_name: str = "gpuws") -> str:
    """A mig-parted config named `config_name` with one entry per GPU index."""
    entries: list[dict[str, Any]] = []
    for index in sorted(layouts):
        layout = layouts[index]
        entry: dict[str, Any] = {"devices": [index], "mig-enabled": layout.mig_enabled}
        if layout.mig_enabled:
            counts: dict[str, int] = {}
            for name in layout.instances:
                counts[name] = counts.get(name, 0) + 1
            entry["mig-devices"] = counts
        entries.append(entry)
    return yaml.safe_dump({"version": "v1", "mig-configs": {config_name: entries}}, sort_keys=False)


def import_mig_parted(text: str) -> dict[str, list[MigPartedEntry]]:
    """Every config in a mig-parted YAML document; ParseError says what is wrong."""
    if len(text.encode()) > _MAX_YAML_BYTES:
        raise ParseError("mig-parted config is too large")
    try:
        check_yaml_nesting(text)  # before the recursive composer: a RecursionError is no answer
        doc = yaml.safe_load(text)
    except NestingTooDeep as exc:
        raise ParseError(f"mig-parted config, {exc}") from None
    except yaml.YAMLError as exc:
        raise ParseError(f"mig-parted config is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or doc.get("version") != "v1":
        raise ParseError("mig-parted config: expected `version: v1` at the top")
    configs = doc.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise ParseError("mig-parted config: `mig-configs` must map names to lists of entries")
    return {str(name): _entries(str(name), items) for name, items in configs.items()}


def select_entry(
    entries: list[MigPartedEntry], gpu_index: int, pci_device_id: str | None = None
) -> MigPartedEntry | None:
    """The entry a config applies to this GPU: the last matching one, or None (left as it is)."""
    matching = [e for e in entries if e.applies_to(gpu_index, pci_device_id)]
    return matching[-1] if matching else None


def layout_for_gpu(
    entries: list[MigPartedEntry], gpu_index: int, model: GpuModel | None, pci_device_id: str | None = None
) -> Layout:
    """The layout a config gives GPU `gpu_index` (the last matching entry wins, as in mig-parted)."""
    entry = select_entry(entries, gpu_index, pci_device_id)
    if entry is None:
        raise LayoutError(f"the mig-parted config has no entry for GPU {gpu_index}")
    return entry.layout(model)


@dataclass(frozen=True)
class HostGpu:
    """What a config is applied against: one GPU of the host as read now."""

    index: int
    name: str
    pci_device_id: str | None
    model: GpuModel | None  # the MIG catalog entry; None: not MIG-capable here
    layout: Layout
    settled: bool = True  # every GPU instance has its compute instance and no mode change is pending


class GpuAction(StrEnum):
    """What applying a config does to one GPU."""

    CHANGE = "change"
    UNCHANGED = "unchanged"  # already as the config says
    NOT_SELECTED = "not-selected"  # no entry matches: mig-parted leaves it alone
    NOT_MIG_CAPABLE = "not-mig-capable"  # selected with MIG enabled, but MIG cannot be set here


@dataclass(frozen=True)
class GpuTarget:
    """One GPU's part of a config: its target layout (None when it is left alone) and why."""

    gpu: HostGpu
    action: GpuAction
    target: Layout | None
    note: str = ""

    def to_dict(self) -> JsonObject:
        """One GPU's row of `mig-parted apply --json`: what it has, what it gets, and why."""
        return {"gpu": self.gpu.index, "name": self.gpu.name, "pci_device_id": self.gpu.pci_device_id,
                "action": str(self.action), "current": self.gpu.layout.describe(),
                "target": self.target.describe() if self.target else None, "note": self.note}


def config_targets(config: str, entries: list[MigPartedEntry], gpus: list[HostGpu]) -> list[GpuTarget]:
    """Each GPU's target under a config; LayoutError (naming the GPU) when a selected GPU cannot take it.

    A GPU that is not MIG-capable (no MIG mode, e.g. a vGPU guest or an L40S) and that an entry
    selects with `mig-enabled: false` needs nothing; with `mig-enabled: true` mig-parted would
    fail, gpuws leaves it alone and says so (its layout changes only through the provider).
    """
    targets: list[GpuTarget] = []
    for gpu in gpus:
        entry = select_entry(entries, gpu.index, gpu.pci_device_id)
        if entry is None:
            targets.append(GpuTarget(gpu, GpuAction.NOT_SELECTED, None, f"no entry of {config!r} selects it"))
            continue
        if gpu.model is None:
            note = "not MIG-capable: left as it is" + (
                "; mig-parted would refuse this config here" if entry.mig_enabled else "")
            targets.append(GpuTarget(gpu, GpuAction.NOT_MIG_CAPABLE if entry.mig_enabled else GpuAction.UNCHANGED,
                                     None, note))
            continue
        try:
            layout = entry.layout(gpu.model)
        except LayoutError as exc:
            raise LayoutError(f"config {config!r} on GPU {gpu.index} ({gpu.name}): {exc}") from None
        same = layout == gpu.layout and gpu.settled
        targets.append(GpuTarget(gpu, GpuAction.UNCHANGED if same else GpuAction.CHANGE, layout))
    return targets


def assert_differences(targets: list[GpuTarget]) -> list[str]:
    """`nvidia-mig-parted assert`: one line per GPU that is not as the config says (empty: matches)."""
    return [
        f"GPU {t.gpu.index} ({t.gpu.name}): has {t.gpu.layout.describe()}"
        + ("" if t.gpu.settled else " (not settled: an instance without compute instance or a pending mode)")
        + f", the config wants {t.target.describe() if t.target else '?'}"
        for t in targets if t.action is GpuAction.CHANGE
    ]


def _entries(name: str, items: object) -> list[MigPartedEntry]:
    if not isinstance(items, list) or not items:
        raise ParseError(f"mig-parted config {name!r}: expected a list of entries")
    return [_entry(name, item) for item in items]


def _entry(name: str, item: object) -> MigPartedEntry:
    where = f"mig-parted config {name!r}"
    if not isinstance(item, dict):
        raise ParseError(f"{where}: each entry must be a mapping")
    device_filter = _device_filter(where, item.get("device-filter"))
    devices_raw = item.get("devices")
    devices: tuple[int, ...] | None
    if devices_raw == "all":
        devices = None
    elif isinstance(devices_raw, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in devices_raw):
        devices = tuple(devices_raw)
    else:
        raise ParseError(f"{where}: `devices` must be `all` or a list of GPU indexes")
    enabled = item.get("mig-enabled")
    if not isinstance(enabled, bool):
        raise ParseError(f"{where}: `mig-enabled` must be true or false")
    mig_devices_raw = item.get("mig-devices") or {}
    if not isinstance(mig_devices_raw, dict):
        raise ParseError(f"{where}: `mig-devices` must map profile names to counts")
    mig_devices = []
    for profile, count in mig_devices_raw.items():
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= 7:
            raise ParseError(f"{where}: count for {str(profile)[:40]!r} must be a number from 0 to 7")
        if count:
            mig_devices.append((str(profile), count))
    if mig_devices and not enabled:
        raise ParseError(f"{where}: `mig-devices` given with `mig-enabled: false`")
    return MigPartedEntry(devices, enabled, tuple(mig_devices), device_filter)


def _device_filter(where: str, raw: object) -> tuple[str, ...]:
    """`device-filter`: one PCI device id or a list of them (mig-parted accepts both)."""
    if raw is None or raw == "":
        return ()
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise ParseError(f"{where}: `device-filter` must be a PCI device id such as \"0x233010DE\" or a list of them")
    ids = tuple(normalise_pci_id(i) for i in items)
    if not all(_PCI_ID.fullmatch(i) for i in ids):
        raise ParseError(f"{where}: `device-filter` entries must be PCI device ids such as \"0x233010DE\"")
    return ids
