"""NVIDIA XID errors: the one table of what each XID says about the card, and the kernel-log parser.

The driver logs an XID to the kernel log (`NVRM: Xid (PCI:0000:cb:00): 13, pid=..., ...`) and
dcgm-exporter reports the last one as `DCGM_FI_DEV_XID_ERRORS`. Both `gpuws health` and the fleet
view class them here, so one XID means the same everywhere.

Classes (sources: NVIDIA's "XID Errors" catalog, docs.nvidia.com/deploy/xid-errors, its "Causes"
columns and "GPU debug guidelines" actions; NVIDIA k8s-device-plugin `internal/rm/health.go`, whose
default list of application XIDs that never mark a GPU unhealthy is 13, 31, 43, 45, 68, 109):

- HARDWARE_FAIL: the card needs a reset, a reboot or an RMA (fallen off the bus, uncorrectable or
  uncontained memory errors, a failed row remap, GSP firmware errors).
- HARDWARE_DEGRADE: the hardware reported a fault it survived or corrected (NVLink errors, a
  contained ECC error, a high single-bit error rate, a row-remap event); the card works but should
  be watched or drained.
- APPLICATION: caused by the program that ran (illegal address, bad instruction, a killed or
  timed-out context); shown as information, never a fault of the card.
- UNCLASSIFIED: not in this table; shown as information with the code, to look up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class XidClass(StrEnum):
    """What an XID says about the card."""

    HARDWARE_FAIL = "hardware-fail"
    HARDWARE_DEGRADE = "hardware-degrade"
    APPLICATION = "application"
    UNCLASSIFIED = "unclassified"


@dataclass(frozen=True)
class XidInfo:
    """One XID: its code, class and NVIDIA's name for it."""

    code: int
    xid_class: XidClass
    name: str


_F, _D, _A = XidClass.HARDWARE_FAIL, XidClass.HARDWARE_DEGRADE, XidClass.APPLICATION

XID_TABLE: dict[int, XidInfo] = {
    x.code: x
    for x in (
        XidInfo(13, _A, "Graphics Engine Exception"),
        XidInfo(31, _A, "GPU memory page fault"),
        XidInfo(43, _A, "GPU stopped processing (reset channel)"),
        XidInfo(45, _A, "Preemptive cleanup, due to previous errors"),
        XidInfo(68, _A, "NVDEC0 Exception"),
        XidInfo(109, _A, "Context Switch Timeout Error"),
        XidInfo(48, _F, "Double Bit ECC Error"),
        XidInfo(61, _D, "Internal micro-controller breakpoint/warning"),
        XidInfo(62, _F, "Internal micro-controller halt"),
        XidInfo(63, _D, "ECC page retirement or row remapping recording event"),
        XidInfo(64, _F, "ECC page retirement or row remapper recording failure"),
        XidInfo(74, _D, "NVLink Error"),
        XidInfo(79, _F, "GPU has fallen off the bus"),
        XidInfo(92, _D, "High single-bit ECC error rate"),
        XidInfo(94, _D, "Contained ECC error"),
        XidInfo(95, _F, "Uncontained ECC error"),
        XidInfo(119, _F, "GSP RPC Timeout"),
        XidInfo(120, _F, "GSP Error"),
        XidInfo(121, _D, "C2C Link Error"),
        XidInfo(123, _D, "SPI PMU RPC write failure"),
        XidInfo(140, _F, "Unrecovered ECC Error"),
        XidInfo(143, _F, "GPU Initialization Failure"),
    )
}

# gpud (leptonai/gpud) matches `NVRM: Xid.*?: (\d+),`; the PCI part tells which GPU.
_XID_RE = re.compile(r"NVRM: Xid \(PCI:(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.\d)?\)"
                     r"(?: GPU-I: \d+ GPU-CI: \d+\))?: (?P<code>\d{1,4}),\s*(?P<rest>.*)$")


def xid_info(code: int) -> XidInfo:
    """The table entry for `code`; an UNCLASSIFIED entry for a code not in the table."""
    return XID_TABLE.get(code) or XidInfo(code, XidClass.UNCLASSIFIED, f"XID {code} (not in gpuws's table)")


@dataclass(frozen=True)
class XidEvent:
    """One `NVRM: Xid` kernel-log line."""

    code: int
    pci: str  # "0000:cb:00" as the driver writes it (domain:bus:device)
    message: str  # the rest of the line after the code
    line: str  # the whole line, as logged (capped)

    @property
    def info(self) -> XidInfo:
        """The class and name of this XID."""
        return xid_info(self.code)

    def matches_bus_id(self, pci_bus_id: str) -> bool:
        """True when this event belongs to the GPU with nvidia-smi bus id `pci_bus_id`
        ("00000000:CB:00.0"); domains are compared as numbers (4 or 8 hex digits)."""
        return _bus_key(self.pci) == _bus_key(pci_bus_id)


def _bus_key(text: str) -> tuple[int, int, int] | None:
    parts = text.strip().split(".")[0].split(":")
    if len(parts) != 3:
        return None
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2], 16)
    except ValueError:
        return None


def parse_xid_line(line: str) -> XidEvent | None:
    """The XID event of one kernel-log line (dmesg or journalctl format), or None."""
    found = _XID_RE.search(line)
    if found is None:
        return None
    return XidEvent(int(found["code"]), found["pci"], found["rest"].strip()[:300], line.strip()[:500])


def parse_xid_lines(text: str) -> list[XidEvent]:
    """Every XID event of a kernel log, in order."""
    return [e for e in (parse_xid_line(line) for line in text.splitlines()) if e is not None]
