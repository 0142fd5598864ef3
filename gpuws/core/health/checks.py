"""`gpuws health`: passive checks of a GPU host, judged. Qt-free, no I/O.

Per GPU each check gives a finding (`check`, `verdict`, `detail`); a GPU's verdict is its worst
finding, the host's the worst GPU's (and its host-wide findings'):

| check | unhealthy | degraded | info / healthy |
|---|---|---|---|
| ecc | volatile uncorrectable > 0; | aggregate uncorrectable > 0; > 1000 corrected since driver |
| | sram_threshold_exceeded | load, or >= 100 at over 50 per hour of uptime; ECC off on a data-centre card | none |
| retired_pages | retirement pending; >= 60 retired (NVIDIA's RMA figure) | - | a count |
| remapped_rows | remap pending (until a GPU reset), remap failure, channel/TPC | - | rows remapped |
| | repair pending, unrepairable memory | | |
| reset_required / | recovery action Reset / Reboot (older drivers: | Drain P2P / Drain and Reset (older: | None |
| drain_and_reset_recommended | gpu_reset_status/reset_required) | drain_and_reset_recommended) | |
| xid | hardware-fail XIDs (gpuws.core.xid) | hardware-degrade XIDs | application / unclassified XIDs |
| kernel_log | - | - | unreadable: **inconclusive**, with the reason |
| nvlink | - | inactive links; recovery errors; > 100 CRC + replay errors | fewer |
| gpu_lost | nvidia-smi answers "GPU is lost" for its readings (reset_required: "GPU requires reset"), | - | - |
| | or cannot reach a GPU ("Unable to determine the device handle for GPU ...", host-wide) | | |
| fabric | state not Completed, or status not Success (NVSwitch systems); fabric health | fabric health | - |
| | summary Unhealthy | Limited Capacity, a route unhealthy or recovering, bandwidth not Full | |
| pcie | - | narrower than the card; below the generation card and platform allow, under load | idle power |
| | | | saving; a platform (Grace, an older slot) slower than the card |
| pcie_replays | - | > 1000 replays | fewer |
| power_limit | - | current limit < 95 % of the default ("capped at 300 of 700 W") | - |
| persistence | - | - | Disabled (information) |
| throttle | - | HW slowdown / power brake; HW or SW thermal at rest | others |
| inforom | - | nvidia-smi warns the infoROM is corrupted (host-wide) | its other warnings |
| expect | count, model or MIG mode not as `--expect-*` asks (host-wide) | - | - |
| cuda | the driver is older than `--cuda X.Y` needs (NVIDIA's minimum-driver table) | - | - |
| dcgm | a `dcgmi diag` test failed | a test warned | absent, passed |
| readings | - | - | NaN, infinite or impossible values (a negative count, attached_gpus -5): **inconclusive** |
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from gpuws.core.gpus.models import datasheet_for_variant, variant_for_name
from gpuws.core.health.facts import GpuFacts, NvlinkCounters, SmiDocument
from gpuws.core.jsontypes import JsonObject
from gpuws.core.nvsmi.readings import BadReading, GoneMarker
from gpuws.core.xid import XidClass, XidEvent


class HealthVerdict(StrEnum):
    """A finding's, a GPU's or a host's verdict. INFO is a finding shown but never counted."""

    HEALTHY = "healthy"
    INFO = "info"
    DEGRADED = "degraded"
    UNHEALTHY = "unhealthy"
    INCONCLUSIVE = "inconclusive"


_RANK = {HealthVerdict.HEALTHY: 0, HealthVerdict.INFO: 0, HealthVerdict.INCONCLUSIVE: 1,
         HealthVerdict.DEGRADED: 2, HealthVerdict.UNHEALTHY: 3}
_V = HealthVerdict

# NVIDIA CUDA Toolkit release notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions"
# (Linux x86_64, the GA release of each minor version).
CUDA_MIN_DRIVER: dict[tuple[int, int], str] = {
    (11, 0): "450.36.06", (11, 1): "455.23", (11, 2): "460.27.03", (11, 3): "465.19.01",
    (11, 4): "470.42.01", (11, 5): "495.29.05", (11, 6): "510.39.01", (11, 7): "515.43.04",
    (11, 8): "520.61.05", (12, 0): "525.60.13", (12, 1): "530.30.02", (12, 2): "535.54.03",
    (12, 3): "545.23.06", (12, 4): "550.54.14", (12, 5): "555.42.02", (12, 6): "560.28.03",
    (12, 8): "570.26", (12, 9): "575.51.03", (13, 0): "580.65.06",
}
RETIRED_PAGES_RMA = 60  # NVIDIA "Dynamic Page Retirement": 60 or more retired pages qualify for RMA
CORRECTED_ERRORS_DEGRADED = 1000  # volatile (since driver load) corrected ECC errors
CORRECTED_PER_HOUR_DEGRADED = 50  # gpuws's line for a high corrected-error rate (no NVIDIA figure)
NVLINK_ERRORS_DEGRADED = 100  # CRC + replay errors since driver load
PCIE_REPLAYS_DEGRADED = 1000
POWER_CAP_SHARE = 0.95
BUSY_UTILIZATION_PCT = 20
# Hardware slowdown and power brake are the board protecting itself (power supply, sensors): a
# fault under load too. Thermal slowdowns count only at rest.
HW_FAULT_THROTTLES = frozenset({"hw_slowdown", "hw_power_brake_slowdown"})
HW_THROTTLES = frozenset({"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"})


@dataclass(frozen=True)
class Finding:
    """One check's result on one GPU (or host-wide)."""

    check: str
    verdict: HealthVerdict
    detail: str

    def to_json(self) -> JsonObject:
        """The JSON shape of the issue: {"check", "verdict", "detail"}."""
        return {"check": self.check, "verdict": self.verdict.value, "detail": self.detail}


@dataclass
class GpuHealth:
    """One GPU's findings and verdict."""

    index: int
    uuid: str | None
    serial: str | None
    name: str | None
    findings: list[Finding] = field(default_factory=list)

    @property
    def verdict(self) -> HealthVerdict:
        """The worst finding (INFO counts as healthy)."""
        return worst(f.verdict for f in self.findings)

    def to_json(self) -> JsonObject:
        """{"index", "uuid", "serial", "verdict", "findings"} (plus the product name)."""
        return {"index": self.index, "uuid": self.uuid, "serial": self.serial, "name": self.name,
                "verdict": self.verdict.value, "findings": [f.to_json() for f in self.findings]}


@dataclass
class HostHealth:
    """A host's health: per GPU, plus host-wide findings."""

    host: str
    gpus: list[GpuHealth] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)  # host-wide (expectations, kernel log, dcgm)
    driver_version: str | None = None
    cuda_version: str | None = None
    hostname: str | None = None
    instance_id: str | None = None
    simulated: bool = False

    @property
    def verdict(self) -> HealthVerdict:
        """The worst of every GPU and host-wide finding; inconclusive with no GPU at all."""
        if not self.gpus:
            return worst([*(f.verdict for f in self.findings), _V.INCONCLUSIVE])
        return worst([*(g.verdict for g in self.gpus), *(f.verdict for f in self.findings)])

    def to_json(self) -> JsonObject:
        """{"host", "verdict", "gpus": [...]} plus host-wide findings and identity."""
        return {"host": self.host, "verdict": self.verdict.value, "gpus": [g.to_json() for g in self.gpus],
                "findings": [f.to_json() for f in self.findings], "driver_version": self.driver_version,
                "cuda_version": self.cuda_version, "hostname": self.hostname, "instance_id": self.instance_id,
                "simulated": self.simulated}


def worst(verdicts: Iterable[HealthVerdict]) -> HealthVerdict:
    """The worst verdict: unhealthy > degraded > inconclusive > healthy (INFO counts as healthy)."""
    result = _V.HEALTHY
    for v in verdicts:
        v = _V.HEALTHY if v is _V.INFO else v
        if _RANK[v] > _RANK[result]:
            result = v
    return result


def _ecc(f: GpuFacts, ecc_card: bool | None, uptime_s: float | None = None) -> Finding:
    if f.ecc_volatile_uncorrectable:
        return Finding("ecc", _V.UNHEALTHY, f"{f.ecc_volatile_uncorrectable} uncorrectable ECC errors since the "
                                            "driver loaded (volatile)")
    if f.sram_threshold_exceeded:
        return Finding("ecc", _V.UNHEALTHY, "sram_threshold_exceeded=Yes: the card's SRAM errors passed the threshold "
                                            "of NVIDIA's field diagnostic (a card to return)")
    if f.ecc_aggregate_uncorrectable:
        return Finding("ecc", _V.DEGRADED, f"{f.ecc_aggregate_uncorrectable} uncorrectable ECC errors in the "
                                           "card's lifetime (aggregate)")
    corrected = f.ecc_volatile_correctable
    # The host's uptime bounds the driver's: the rate below is never overstated.
    hours = uptime_s / 3600 if uptime_s and uptime_s > 0 else None
    rate = corrected / hours if corrected and hours else None
    if corrected is not None and (corrected > CORRECTED_ERRORS_DEGRADED or (
            rate is not None and corrected >= 100 and rate > CORRECTED_PER_HOUR_DEGRADED)):
        per = f", {rate:.0f} per hour of uptime" if rate is not None else ""
        return Finding("ecc", _V.DEGRADED, f"{corrected} corrected ECC errors since the driver loaded{per} "
                                           f"(degraded above {CORRECTED_ERRORS_DEGRADED}, or "
                                           f"{CORRECTED_PER_HOUR_DEGRADED} per hour)")
    if (f.ecc_mode or "").lower() == "disabled":
        # Off on a data-centre card the registry knows has ECC: memory errors go unseen. Off on a
        # workstation card is the usual setting (more memory, more speed): information.
        if ecc_card:
            return Finding("ecc", _V.DEGRADED, "ECC is disabled on a card that has it")
        return Finding("ecc", _V.INFO, "ECC is disabled")
    if f.ecc_volatile_uncorrectable is None and f.ecc_aggregate_uncorrectable is None:
        return Finding("ecc", _V.INFO, "no ECC counters reported (no ECC on this card or in this mode)")
    return Finding("ecc", _V.HEALTHY, "no uncorrectable ECC errors")


def _retired(f: GpuFacts) -> Finding | None:
    if f.retirement_pending:
        return Finding("retired_pages", _V.UNHEALTHY, "page retirement pending: takes effect after a GPU reset")
    total = (f.retired_sbe or 0) + (f.retired_dbe or 0)
    if f.retired_sbe is None and f.retired_dbe is None:
        return None  # Ampere and newer remap rows instead
    if total >= RETIRED_PAGES_RMA:
        return Finding("retired_pages", _V.UNHEALTHY, f"{total} retired pages (NVIDIA: 60 or more qualifies for RMA)")
    return Finding("retired_pages", _V.INFO if total else _V.HEALTHY, f"{total} retired pages")


def _remap(f: GpuFacts) -> Finding | None:
    if f.unrepairable_memory:
        return Finding("remapped_rows", _V.UNHEALTHY, "unrepairable_memory=Yes: the memory cannot be repaired (RMA)")
    if f.repair_pending:
        return Finding("remapped_rows", _V.UNHEALTHY, f"{' and '.join(f.repair_pending)} repair pending: takes "
                                                      "effect after a GPU reset")
    if f.remap_failure:
        return Finding("remapped_rows", _V.UNHEALTHY, "row remapping failed: remapped_row_failure=Yes")
    if f.remap_pending:
        return Finding("remapped_rows", _V.UNHEALTHY, "rows pending remap: remapped_row_pending=Yes; the GPU "
                                                      "needs a reset before the remap takes effect")
    if f.remap_pending is None:
        return None
    if f.remapped_unc:
        return Finding("remapped_rows", _V.INFO, f"{f.remapped_unc} rows remapped after uncorrectable errors")
    return Finding("remapped_rows", _V.HEALTHY, "no rows pending remap")


def _recovery(f: GpuFacts) -> Finding | None:
    action = f.recovery_action
    if action is None:
        return _reset_status(f)
    low = action.lower()
    if low == "none":
        return Finding("reset_required", _V.HEALTHY, "gpu_recovery_action=None")
    if "drain" in low:
        return Finding("drain_and_reset_recommended", _V.DEGRADED, f"gpu_recovery_action={action}: drain the "
                                                                   "GPU's work, then reset it")
    return Finding("reset_required", _V.UNHEALTHY, f"gpu_recovery_action={action}: the GPU needs a "
                                                   f"{'reboot' if 'reboot' in low else 'reset'}")


def _reset_status(f: GpuFacts) -> Finding | None:
    """The older drivers' `gpu_reset_status` (reset_required, drain_and_reset_recommended)."""
    if f.reset_required:
        return Finding("reset_required", _V.UNHEALTHY, "gpu_reset_status/reset_required=Yes: the GPU needs a reset")
    if f.drain_and_reset_recommended:
        return Finding("drain_and_reset_recommended", _V.DEGRADED, "gpu_reset_status/drain_and_reset_recommended="
                                                                   "Yes: drain the GPU's work, then reset it")
    if f.reset_required is False:
        return Finding("reset_required", _V.HEALTHY, "gpu_reset_status/reset_required=No")
    return None


def _xids(f: GpuFacts, events: list[XidEvent]) -> list[Finding]:
    mine = [e for e in events if f.pci_bus_id and e.matches_bus_id(f.pci_bus_id)]
    if not mine:
        return [Finding("xid", _V.HEALTHY, "no XID since boot")]
    by_code: dict[int, list[XidEvent]] = {}
    for e in mine:
        by_code.setdefault(e.code, []).append(e)
    out = []
    for code, found in sorted(by_code.items()):
        info = found[0].info
        verdict = {XidClass.HARDWARE_FAIL: _V.UNHEALTHY, XidClass.HARDWARE_DEGRADE: _V.DEGRADED}.get(
            info.xid_class, _V.INFO)
        out.append(Finding("xid", verdict, f"XID {code} x{len(found)} ({info.name}; {info.xid_class.value}): "
                                           f"{found[-1].message[:160]}"))
    return out


def _nvlink(counters: NvlinkCounters | None) -> list[Finding]:
    if counters is None:
        return []
    out = []
    if counters.links_inactive:
        out.append(Finding("nvlink", _V.DEGRADED, f"NVLink {', '.join(map(str, counters.links_inactive))} inactive "
                                                  f"({counters.links_active} active)"))
    errors = counters.errors
    recovery = sum(v for k, v in errors.items() if "recovery" in k.lower())
    crc_replay = sum(v for k, v in errors.items() if "crc" in k.lower() or "replay" in k.lower())
    other = sum(errors.values()) - recovery - crc_replay
    shown = ", ".join(f"{k} {v}" for k, v in sorted(errors.items()) if v) or "no errors"
    if recovery or crc_replay > NVLINK_ERRORS_DEGRADED:
        out.append(Finding("nvlink_errors", _V.DEGRADED, f"NVLink error counters since driver load: {shown}"))
    elif crc_replay or other:
        out.append(Finding("nvlink_errors", _V.INFO, f"NVLink error counters since driver load: {shown}"))
    else:
        out.append(Finding("nvlink_errors", _V.HEALTHY, "no NVLink errors"))
    return out


def _fabric(f: GpuFacts) -> Finding | None:
    state, status = f.fabric_state, f.fabric_status
    if state is None or state.lower() in ("n/a", "not supported"):
        return None
    if state.lower() != "completed" or (status or "").lower() != "success":
        return Finding("fabric", _V.UNHEALTHY, f"fabric state {state}, status {status or '-'}: the fabric manager "
                                               "has not registered this GPU (NVLink through NVSwitch is down even "
                                               "if links show active; CUDA fails to start)")
    # Registered, but the driver's own view of the fabric's health since (driver 550+).
    health = f.fabric_health
    summary = health.get("summary", "")
    wrong = [f"{k}={health[k]}" for k in ("route_unhealthy", "route_recovery_in_progress", "access_timeout_recovery")
             if health.get(k, "").lower() == "true"]
    if health.get("bandwidth", "full").lower() != "full":
        wrong.append(f"bandwidth={health['bandwidth']}")
    if health.get("incorrect_configuration", "none").lower() != "none":
        wrong.append(f"incorrect_configuration={health['incorrect_configuration']}")
    said = f"fabric health {summary or '-'}" + (f" ({', '.join(wrong)})" if wrong else "")
    if summary.lower() == "unhealthy":
        return Finding("fabric", _V.UNHEALTHY, f"{said}: the driver calls this GPU's NVLink fabric unhealthy "
                                               "(multi-GPU traffic through NVSwitch fails or is rerouted)")
    if wrong or summary.lower() not in ("", "healthy"):
        return Finding("fabric", _V.DEGRADED, f"{said}: NVLink through the fabric runs below its full bandwidth "
                                              "or is recovering a route")
    return Finding("fabric", _V.HEALTHY, "fabric registration completed, status Success"
                                         + (f", {said}" if summary else ""))


def _gone(f: GpuFacts) -> Finding | None:
    """A GPU nvidia-smi answers with "GPU is lost" / "GPU requires reset" instead of readings:
    every other check reads nothing from it, so this is what it says."""
    if f.gone is None:
        return None
    check = "gpu_lost" if f.gone.marker is GoneMarker.LOST else "reset_required"
    return Finding(check, _V.UNHEALTHY, f"{f.gone}: {f.gone.meaning}")


def _idle(f: GpuFacts) -> bool:
    """At rest in a power-saving P-state (P3 and lower), where a card may train its link down.

    Data-centre cards stay in P0 at rest and keep their link; GeForce cards run CUDA in P2."""
    state = (f.performance_state or "").upper()
    if not state.startswith("P") or not state[1:].isdigit() or int(state[1:]) <= 2:
        return False
    return (f.utilization_pct or 0) < BUSY_UTILIZATION_PCT


def _platform_reason(f: GpuFacts, allowed: int) -> str:
    """Why the platform stops at Gen`allowed`: a Grace CPU, or the host's slot."""
    grace = (f.c2c_mode or "").lower() == "enabled" or any(
        tag in (f.name or "").upper().split() for tag in ("GH200", "GB200", "GB300"))
    if grace:
        return f"a Grace CPU's PCIe is Gen{allowed} by design (the GPU reaches it over NVLink-C2C)"
    return f"the host's slot or root port is Gen{allowed}"


def _pcie(f: GpuFacts) -> list[Finding]:
    """The link, judged by width first, then by generation against the platform's own limit.

    - Narrower than the card (its datasheet, or the widest the driver reports): degraded, at rest
      too and whether or not the card's generation is known; cards keep their width at rest.
    - Below the generation card and platform allow together (`max_link_gen`): degraded, except in
      a power-saving P-state, where it is information (the benchmark reads it under load).
    - A platform that stops below the card's own generation (a Gen5 Grace with a Gen6 Blackwell,
      a Gen3 host with a Gen4 card): information, with the reason; nothing the provider broke.
    """
    sheet = datasheet_for_variant(variant_for_name(f.name or ""))
    # The card's own generation: what the driver says it is, else its datasheet.
    card_gen = f.pcie_gen_max_device or (sheet.pcie_gen if sheet else None)
    widths = [w for w in (sheet.pcie_width if sheet else None, f.pcie_width_max) if w]
    card_width = max(widths) if widths else None
    gen, width = f.pcie_gen_current, f.pcie_width_current
    # What card and platform allow together. max_host_link_gen alone is not trusted: real
    # GB300 trays say Gen4 there while their link runs at Gen6.
    allowed = f.pcie_gen_max_system
    if allowed is None and f.pcie_gen_max_host is not None and (gen is None or gen <= f.pcie_gen_max_host):
        allowed = f.pcie_gen_max_host
    if allowed is not None and gen is not None and gen > allowed:
        allowed = gen  # a reading that contradicts itself: the link that runs is the fact
    limit = min((g for g in (card_gen, allowed) if g), default=None)
    where = f"Gen{gen or '?'} x{width or '?'}"
    problems: list[str] = []
    notes: list[str] = []
    if width is not None and card_width is not None and width < card_width:
        problems.append(f"trained at x{width} of the card's x{card_width}")
    if gen is not None and limit is not None and gen < limit:
        who = ("card and platform allow" if allowed is not None and card_gen
               else "the card can do" if card_gen else "the platform allows")
        if _idle(f):
            notes.append(f"Gen{gen} at idle ({f.performance_state}) where {who} Gen{limit}: power saving; the "
                         "benchmark reads it under load")
        else:
            problems.append(f"running at Gen{gen} where {who} Gen{limit} ({f.performance_state or 'P-state unknown'})")
    if card_gen is not None and allowed is not None and allowed < card_gen:
        notes.append(f"the platform allows Gen{allowed} of the card's Gen{card_gen}: "
                     f"{_platform_reason(f, allowed)} (information, not a fault)")
    out = []
    if problems:
        out.append(Finding("pcie", _V.DEGRADED, f"link {where}: {'; '.join(problems + notes)}"))
    elif notes:
        out.append(Finding("pcie", _V.INFO, f"link {where}: {'; '.join(notes)}"))
    elif gen is None or limit is None or width is None or card_width is None:
        unknown = [what for what, value in (("current generation", gen), ("current width", width),
                                            ("card's generation", limit), ("card's width", card_width))
                   if value is None]
        out.append(Finding("pcie", _V.INFO, f"link {where} (not reported: {', '.join(unknown)})"))
    else:
        out.append(Finding("pcie", _V.HEALTHY, f"link {where} (the most card and platform allow: "
                                               f"Gen{limit} x{card_width})"))
    if f.pcie_replays is not None:
        bad = f.pcie_replays > PCIE_REPLAYS_DEGRADED
        out.append(Finding("pcie_replays", _V.DEGRADED if bad else _V.HEALTHY if not f.pcie_replays else _V.INFO,
                           f"{f.pcie_replays} PCIe replays"))
    return out


def _power(f: GpuFacts) -> Finding | None:
    if f.power_limit_w is None or not f.power_default_w:
        return None
    if f.power_limit_w < f.power_default_w * POWER_CAP_SHARE:
        share = f.power_limit_w / f.power_default_w
        return Finding("power_limit", _V.DEGRADED, f"capped by the provider at {f.power_limit_w:.0f} of "
                                                   f"{f.power_default_w:.0f} W ({share:.0%} of the default limit)")
    return Finding("power_limit", _V.HEALTHY, f"power limit {f.power_limit_w:.0f} W (default "
                                              f"{f.power_default_w:.0f} W)")


def _throttle(f: GpuFacts) -> Finding:
    cuts = sorted(set(f.throttle_active) & HW_THROTTLES)
    busy = (f.utilization_pct or 0) >= BUSY_UTILIZATION_PCT
    if busy and cuts and not set(cuts) & HW_FAULT_THROTTLES:
        # Thermal slowdown under someone's load says how the room cools, not that the card is bad.
        return Finding("throttle", _V.INFO, f"{', '.join(cuts)} while the GPU is {f.utilization_pct:.0f}% busy "
                                            "(read again at rest, or run the benchmark)")
    if cuts:
        return Finding("throttle", _V.DEGRADED, f"throttling at rest: {', '.join(cuts)}")
    others = [r for r in f.throttle_active if r not in ("gpu_idle",)]
    if others:
        return Finding("throttle", _V.INFO, f"clock event reasons active: {', '.join(others)}")
    if not f.throttle_reported:  # a missing section is never a pass
        return Finding("throttle", _V.INFO, "clock event reasons not reported")
    return Finding("throttle", _V.HEALTHY, "no throttling")


def _persistence(f: GpuFacts) -> Finding | None:
    if f.persistence_mode is None:
        return None
    if f.persistence_mode.lower() == "enabled":
        return Finding("persistence", _V.HEALTHY, "persistence mode enabled")
    return Finding("persistence", _V.INFO, f"persistence mode {f.persistence_mode}: the first CUDA call after "
                                           "idle re-initialises the GPU (slower start)")


def readings_finding(bad: Sequence[BadReading]) -> Finding | None:
    """Readings no working GPU gives (NaN, infinite, negative counts): whatever else the document
    says, it cannot be called healthy."""
    if not bad:
        return None
    shown = "; ".join(str(b) for b in bad[:6]) + (f"; and {len(bad) - 6} more" if len(bad) > 6 else "")
    return Finding("readings", _V.INCONCLUSIVE, f"nvidia-smi gave readings no working GPU gives, so the driver or "
                                               f"the tool is not to be trusted here: {shown}")


def gpu_findings(f: GpuFacts, events: list[XidEvent] | None, nvlink: NvlinkCounters | None,
                 uptime_s: float | None = None) -> GpuHealth:
    """Every per-GPU check of `f`; `events` None means the kernel log could not be read."""
    g = GpuHealth(index=f.index, uuid=f.uuid, serial=f.serial, name=f.name)
    sheet = datasheet_for_variant(variant_for_name(f.name or ""))
    checks: list[Finding | None] = [
        _gone(f), _ecc(f, sheet.ecc if sheet else None, uptime_s), _retired(f), _remap(f), _recovery(f),
    ]
    g.findings.extend(c for c in checks if c is not None)
    if events is not None:
        g.findings.extend(_xids(f, events))
    g.findings.extend(_nvlink(nvlink))
    g.findings.extend(c for c in (_fabric(f),) if c is not None)
    g.findings.extend(_pcie(f))
    g.findings.extend(c for c in (_power(f), _persistence(f)) if c is not None)
    g.findings.append(_throttle(f))
    g.findings.extend(c for c in (readings_finding(f.bad_readings),) if c is not None)
    return g


def _version(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in (text or "").strip().split("."))
    except ValueError:
        return None


def cuda_finding(driver_version: str | None, driver_cuda: str | None, wanted: str) -> Finding:
    """Whether the driver runs CUDA `wanted` ("12.4"), by NVIDIA's minimum-driver table."""
    want = _version(wanted)
    if want is None or len(want) < 2:
        return Finding("cuda", _V.INCONCLUSIVE, f"--cuda {wanted!r} is not a version such as 12.4")
    minimum = CUDA_MIN_DRIVER.get((want[0], want[1]))
    driver = _version(driver_version)
    if driver is None:
        return Finding("cuda", _V.INCONCLUSIVE, "the driver version could not be read")
    if minimum is not None:
        need = _version(minimum)
        assert need is not None
        if driver >= need:
            return Finding("cuda", _V.HEALTHY, f"driver {driver_version} runs CUDA {wanted} (needs >= {minimum})")
        return Finding("cuda", _V.UNHEALTHY, f"driver {driver_version} is older than CUDA {wanted} needs "
                                             f"(>= {minimum}, NVIDIA's CUDA release notes); update the driver or "
                                             "use the CUDA forward-compatibility package")
    supported = _version(driver_cuda)
    if supported is not None and supported[:2] >= want[:2]:
        return Finding("cuda", _V.HEALTHY, f"driver {driver_version} supports CUDA {driver_cuda} >= {wanted}")
    if supported is not None:
        return Finding("cuda", _V.UNHEALTHY, f"driver {driver_version} supports CUDA {driver_cuda}, older than "
                                             f"{wanted}")
    return Finding("cuda", _V.INCONCLUSIVE, f"CUDA {wanted} is not in gpuws's minimum-driver table")


def expectation_findings(doc: SmiDocument, expected: Mapping[str, object]) -> list[Finding]:
    """Count, model and MIG mode against `--expect-gpus` / `--expect-model` / `--expect-mig`."""
    out = []
    count = expected.get("gpu_count")
    if count is not None:
        ok = len(doc.gpus) == count
        out.append(Finding("expect.gpu_count", _V.HEALTHY if ok else _V.UNHEALTHY,
                           f"{len(doc.gpus)} GPUs{'' if ok else f', expected {count}'}"))
    model = expected.get("model")
    if model:
        names = [g.name or "?" for g in doc.gpus]
        variants = [variant_for_name(n) for n in names]
        wrong = [n for n, v in zip(names, variants, strict=True) if v is None or v.name.lower() != str(model).lower()]
        out.append(Finding("expect.model", _V.UNHEALTHY if wrong else _V.HEALTHY,
                           f"expected {model}; found {', '.join(sorted(set(wrong)))}" if wrong
                           else f"every GPU is an {model}"))
    mig = expected.get("mig_mode")
    if mig:
        wrong_mig = [str(g.index) for g in doc.gpus if (g.mig_mode or "N/A").lower() != str(mig).lower()]
        out.append(Finding("expect.mig_mode", _V.UNHEALTHY if wrong_mig else _V.HEALTHY,
                           f"MIG mode not {mig} on GPU {', '.join(wrong_mig)}" if wrong_mig
                           else f"MIG mode {mig} on every GPU"))
    return out
