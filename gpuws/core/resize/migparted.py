"""Import and export layouts in NVIDIA mig-parted's YAML config format.

    version: v1
    mig-configs:
      NAME:
        - devices: all            # or a list of GPU indexes: [0, 1]
          mig-enabled: true
          mig-devices:
            "1g.10gb": 7

Read with `yaml.safe_load` only. `device-filter` entries are refused rather than ignored, since
applying a config meant for another GPU model would be wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gpuws.core.errors import ParseError
from gpuws.core.resize.catalog import GpuModel
from gpuws.core.resize.layout import FULL_LAYOUT, Layout, LayoutError, fit_placements, make_layout

_MAX_YAML_BYTES = 1_000_000


@dataclass(frozen=True)
class MigPartedEntry:
    """One list item of a mig-parted config: which devices, and the layout they get."""

    devices: tuple[int, ...] | None  # None: all devices
    mig_enabled: bool
    mig_devices: tuple[tuple[str, int], ...]

    def applies_to(self, gpu_index: int) -> bool:
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
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ParseError(f"mig-parted config is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or doc.get("version") != "v1":
        raise ParseError("mig-parted config: expected `version: v1` at the top")
    configs = doc.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise ParseError("mig-parted config: `mig-configs` must map names to lists of entries")
    return {str(name): _entries(str(name), items) for name, items in configs.items()}


def layout_for_gpu(entries: list[MigPartedEntry], gpu_index: int, model: GpuModel | None) -> Layout:
    """The layout a config gives GPU `gpu_index` (the last matching entry wins, as in mig-parted)."""
    matching = [e for e in entries if e.applies_to(gpu_index)]
    if not matching:
        raise LayoutError(f"the mig-parted config has no entry for GPU {gpu_index}")
    return matching[-1].layout(model)


def _entries(name: str, items: object) -> list[MigPartedEntry]:
    if not isinstance(items, list) or not items:
        raise ParseError(f"mig-parted config {name!r}: expected a list of entries")
    return [_entry(name, item) for item in items]


def _entry(name: str, item: object) -> MigPartedEntry:
    where = f"mig-parted config {name!r}"
    if not isinstance(item, dict):
        raise ParseError(f"{where}: each entry must be a mapping")
    if "device-filter" in item:
        raise ParseError(f"{where}: `device-filter` is not supported; list GPU indexes in `devices`")
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
    return MigPartedEntry(devices, enabled, tuple(mig_devices))
