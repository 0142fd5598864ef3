"""From dcgm-exporter series in Prometheus to one record per GPU (and per MIG instance).

Prometheus answers one instant query per metric for the whole fleet; `assemble` joins those
vectors on (host, gpu, GPU instance) into `FleetGpu` records whose field names are those of
`gpuws watch --json`. A metric the exporter does not publish stays `None` (JSON null), never 0.

dcgm-exporter labels (see tests/fixtures/dcgm_exporter/): `gpu`, `UUID` (`uuid` with its
`--use-old-namespace`), `pci_bus_id`, `device`,
`modelName`, `Hostname` (`hostname` since dcgm-exporter 4.5), `GPU_I_PROFILE`/`GPU_I_ID` on MIG
instances (which keep their parent's `UUID`), `DCGM_FI_DRIVER_VERSION`, and `pod`/`namespace`/
`container` on Kubernetes. Prometheus adds `instance` and `job`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final

from gpuws.core.models import AlertThresholds
from gpuws.core.telemetry.sample import GpuSample, MigRef, gpu_key, iso8601
from gpuws.core.telemetry.throttle import POWER_REASONS, THERMAL_REASONS, decode_mask
from gpuws.core.xid import XidClass, xid_info

SOURCE_PROMETHEUS: Final = "prometheus"

#: Prometheus refuses a range query with more than this many points per series.
MAX_POINTS_PER_SERIES: Final = 11_000
MAX_WINDOW_S: Final = 30 * 86_400.0

# Field of `gpuws watch --json` <- dcgm-exporter metric, with the factor that converts its unit.
FIELD_METRICS: Final[dict[str, tuple[str, float]]] = {
    "util_gpu_pct": ("DCGM_FI_DEV_GPU_UTIL", 1.0),
    "util_mem_pct": ("DCGM_FI_DEV_MEM_COPY_UTIL", 1.0),
    "mem_used_mib": ("DCGM_FI_DEV_FB_USED", 1.0),
    "temp_c": ("DCGM_FI_DEV_GPU_TEMP", 1.0),
    "power_w": ("DCGM_FI_DEV_POWER_USAGE", 1.0),
    "power_limit_w": ("DCGM_FI_DEV_POWER_MGMT_LIMIT", 1.0),
    "sm_clock_mhz": ("DCGM_FI_DEV_SM_CLOCK", 1.0),
    "mem_clock_mhz": ("DCGM_FI_DEV_MEM_CLOCK", 1.0),
    "pcie_rx_kib_s": ("DCGM_FI_PROF_PCIE_RX_BYTES", 1 / 1024),  # bytes/s -> KiB/s
    "pcie_tx_kib_s": ("DCGM_FI_PROF_PCIE_TX_BYTES", 1 / 1024),
    "fan_pct": ("DCGM_FI_DEV_FAN_SPEED", 1.0),
    "enc_util_pct": ("DCGM_FI_DEV_ENC_UTIL", 1.0),
    "dec_util_pct": ("DCGM_FI_DEV_DEC_UTIL", 1.0),
    # Fleet-only fields (DCGM's profiling ratios as percentages, the last XID).
    "gr_engine_active_pct": ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 100.0),
    "tensor_active_pct": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 100.0),
    "xid_errors": ("DCGM_FI_DEV_XID_ERRORS", 1.0),
    # DCGM field 449 as exported: MB/s over all links (dcgm-exporter's CSV types it a counter).
    "nvlink_bandwidth_total": ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 1.0),
}
FB_FREE: Final = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED: Final = "DCGM_FI_DEV_FB_RESERVED"
#: The clock-event (throttle) mask under DCGM's current name, and the name retired in DCGM 3.2
#: that older exporters and counters CSVs still use. dcgm-exporter's default counters have neither.
THROTTLE: Final = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
THROTTLE_RETIRED: Final = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
NOT_EXPORTED: Final = "not exported"
#: dcgm-exporter's XID counter (a counters CSV line enables it): one series per XID seen in its
#: window, label `xid`. Better than DCGM_FI_DEV_XID_ERRORS, which is the last XID and stays set.
XID_COUNT: Final = "DCGM_EXP_XID_ERRORS_COUNT"
#: Every metric a snapshot reads: one instant query each, for the whole fleet.
SNAPSHOT_METRICS: Final = (*(m for m, _ in FIELD_METRICS.values()), FB_FREE, FB_RESERVED, THROTTLE,
                           THROTTLE_RETIRED, XID_COUNT)
#: The metric whose series carry every label of a device (the others are read by `KEY_LABELS` only).
IDENTITY_METRIC: Final = "DCGM_FI_DEV_FB_USED"
#: Labels that identify a device across metrics (see `series_key`).
KEY_LABELS: Final = ("Hostname", "hostname", "instance", "gpu", "GPU_I_ID")
#: The peak utilisation over the idle window (a derived query: the idle rule needs a duration).
IDLE_PEAK: Final = "idle_peak"
#: Derived per-device queries: the newest sample's time, and the samples in the last 10 s, minute
#: and 5 minutes (how often the device is scraped), for the age of the instant values.
SAMPLE_TIME: Final = "sample_time"
SAMPLE_COUNT: Final = "sample_count"
SAMPLE_COUNT_RECENT: Final = "sample_count_recent"
SAMPLE_COUNT_SHORT: Final = "sample_count_short"
SAMPLE_COUNT_WINDOW_S: Final = 300.0
#: Each count and its window. The short ones give the interval from a fleet's first seconds on: the
#: 5-minute count of a young series is small, which read as a slow scrape and kept staleness off.
SAMPLE_COUNTS: Final = ((SAMPLE_COUNT_SHORT, 10.0), (SAMPLE_COUNT_RECENT, 60.0), (SAMPLE_COUNT, SAMPLE_COUNT_WINDOW_S))
#: Answers that may hold devices reporting nothing now: over a time window, and `timestamp()`
#: (VictoriaMetrics answers it for a series past its staleness marker).
_OVER_TIME: Final = frozenset({IDLE_PEAK, SAMPLE_TIME, *(name for name, _ in SAMPLE_COUNTS)})
#: How far back a snapshot remembers the GPUs each host reported (a GPU seen then and not now is
#: "not reporting").
REMEMBER_S: Final = 3600.0

# Field order of a fleet record (the `watch --json` fields first, then the fleet-only ones).
WATCH_FIELDS: Final = ("util_gpu_pct", "util_mem_pct", "mem_used_mib", "mem_total_mib", "temp_c", "power_w",
                       "power_limit_w", "sm_clock_mhz", "mem_clock_mhz", "pcie_rx_kib_s", "pcie_tx_kib_s",
                       "fan_pct", "enc_util_pct", "dec_util_pct")
FLEET_FIELDS: Final = ("gr_engine_active_pct", "tensor_active_pct", "xid_errors", "util_gpu_peak_pct",
                       "nvlink_bandwidth_total")
INT_VALUED: Final = frozenset({"xid_errors"})
KUBE_LABELS: Final = ("pod", "namespace", "container")


class Attention(IntEnum):
    """What a GPU needs a look for, most urgent first (the order of the fleet overview)."""

    NOT_REPORTING = -1  # seen in the last hour, absent now (XID 79 takes a GPU off the bus)
    OOM_RISK = 0
    XID = 1  # a hardware XID (core/xid.py)
    THROTTLING = 2
    IDLE = 3
    XID_INFO = 4  # an application or unclassified XID: information, not urgent
    NONE = 9

    @property
    def label(self) -> str:
        return {-1: "not reporting", 0: "OOM risk", 1: "XID error", 2: "throttling", 3: "idle",
                4: "application XID", 9: "ok"}[int(self)]

    @property
    def urgent(self) -> bool:
        """Needs a look now (not information)."""
        return self not in (Attention.XID_INFO, Attention.NONE)


@dataclass(frozen=True, slots=True)
class SeriesKey:
    """Identifies one device across metrics: host, GPU index, MIG GPU-instance id (None: whole GPU)."""

    host: str
    gpu: int
    gi: int | None = None


@dataclass(slots=True)
class FleetGpu:
    """One GPU or MIG instance of a fleet, at one instant."""

    host: str
    gpu: int
    uuid: str | None
    model: str | None
    gi: int | None = None
    mig_profile: str | None = None
    pci_bus_id: str | None = None
    instance: str | None = None  # Prometheus' scrape target, host:port
    values: dict[str, float | None] = field(default_factory=dict)
    throttle_reasons: list[str] | None = None
    throttle_source: str | None = None  # the metric the mask came from; None: neither is exported
    idle: bool | None = None
    kube: dict[str, str] = field(default_factory=dict)
    simulated: bool = False
    xids: dict[int, float] = field(default_factory=dict)  # XID -> count in the exporter's window
    xid_counted: bool = False  # its host publishes DCGM_EXP_XID_ERRORS_COUNT
    util_source: str | None = None  # the metric util_gpu_pct came from
    sample_t: float | None = None  # time of the newest sample behind the instant values
    scrape_interval_s: float | None = None  # estimated from the samples of the last minute (or 5)
    exporter_up: bool | None = None  # its exporter's `up` at the store's newest scrape (None: unknown)

    @property
    def age_s(self) -> float | None:
        """How old the instant values are at `t` of the snapshot (set by `FleetAssembler.result`)."""
        return self.values.get("age_s")

    @property
    def stale(self) -> bool:
        """Its exporter is down, or its values are older than two scrape intervals.

        The age is counted on the store's own clock (its newest sample, see `FleetAssembler.result`),
        never the wall clock: VictoriaMetrics answers 30 s behind by default, and every GPU would look
        stale while a dead exporter hid among them."""
        if self.exporter_up is False:
            return True
        age, every = self.values.get("age_s"), self.scrape_interval_s
        return age is not None and every is not None and age > 2 * every

    @property
    def xid_kind(self) -> XidClass | None:
        """The worst class of the XIDs this GPU reports now (None: no XID)."""
        codes = [x for x, n in self.xids.items() if n > 0] if self.xid_counted else (
            [int(v)] if (v := self.values.get("xid_errors")) else [])
        if not codes:
            return None
        order = (XidClass.HARDWARE_FAIL, XidClass.HARDWARE_DEGRADE, XidClass.UNCLASSIFIED, XidClass.APPLICATION)
        return min((xid_info(c).xid_class for c in codes), key=order.index)

    @property
    def key(self) -> SeriesKey:
        return SeriesKey(self.host, self.gpu, self.gi)

    @property
    def device_key(self) -> str:
        """`gpuws watch`'s device key within the host: "0", or "0/mig7" for GPU instance 7."""
        return gpu_key(self.gpu, self.gi)

    def value(self, name: str) -> float | None:
        return self.values.get(name)

    @property
    def mem_used_pct(self) -> float | None:
        used, total = self.values.get("mem_used_mib"), self.values.get("mem_total_mib")
        if used is None or not total:
            return None
        return 100.0 * used / total

    def to_dict(self, t: float) -> dict[str, Any]:
        """The JSON object of `gpuws fleet snapshot/watch --json`."""
        out: dict[str, Any] = {"t": iso8601(t), "host": self.host, "gpu": self.gpu, "uuid": self.uuid,
                               "model": self.model}
        for name in (*WATCH_FIELDS, *FLEET_FIELDS):
            value = self.values.get(name)
            out[name] = int(value) if value is not None and name in INT_VALUED else value
        out["throttle_reasons"] = None if self.throttle_reasons is None else list(self.throttle_reasons)
        # Per GPU (a MIG instance has its parent's clocks): which metric, or that neither is exported.
        out["throttle_source"] = None if self.gi is not None else self.throttle_source or NOT_EXPORTED
        out["idle"] = self.idle
        out["util_source"] = self.util_source
        out["xids"] = [{"xid": x, "count": int(n), "class": xid_info(x).xid_class.value, "name": xid_info(x).name}
                       for x, n in sorted(self.xids.items())]
        kind = self.xid_kind
        out["xid_class"] = None if kind is None else kind.value
        out["age_s"] = self.values.get("age_s")
        out["scrape_interval_s"] = self.scrape_interval_s
        out["exporter_up"] = self.exporter_up
        out["stale"] = self.stale
        out["mig"] = None if self.gi is None else {"parent_gpu": self.gpu, "gi": self.gi, "profile": self.mig_profile}
        out["pci_bus_id"] = self.pci_bus_id
        out["instance"] = self.instance
        for label in KUBE_LABELS:
            out[label] = self.kube.get(label)
        out["source"] = SOURCE_PROMETHEUS
        out["simulated"] = self.simulated
        return out

    def to_sample(self, t: float) -> GpuSample:
        """A `GpuSample` of this device, so the host alert engine applies to fleet data unchanged."""
        v = self.values
        return GpuSample(
            t=t, gpu=self.gpu, uuid=self.uuid, util_gpu_pct=v.get("util_gpu_pct"),
            util_mem_pct=v.get("util_mem_pct"), mem_used_mib=v.get("mem_used_mib"),
            mem_total_mib=v.get("mem_total_mib"), temp_c=v.get("temp_c"), power_w=v.get("power_w"),
            power_limit_w=v.get("power_limit_w"), sm_clock_mhz=v.get("sm_clock_mhz"),
            mem_clock_mhz=v.get("mem_clock_mhz"), throttle_reasons=self.throttle_reasons, idle=self.idle,
            mig=None if self.gi is None else MigRef(parent_gpu=self.gpu, device=self.gi, gi=self.gi, ci=None),
            source=SOURCE_PROMETHEUS, simulated=self.simulated,
        )


def uuid_of(labels: Mapping[str, str]) -> str | None:
    """The GPU UUID: label `UUID`, or `uuid` from an exporter run with --use-old-namespace."""
    return labels.get("UUID") or labels.get("uuid") or None


def host_of(labels: Mapping[str, str]) -> str:
    """The node a series is from: dcgm-exporter's Hostname/hostname label, else Prometheus' instance."""
    return labels.get("Hostname") or labels.get("hostname") or labels.get("instance") or "?"


def series_key(labels: Mapping[str, str]) -> SeriesKey | None:
    """The device a series belongs to; None for a series without a usable `gpu` label."""
    try:
        gpu = int(labels.get("gpu", ""))
    except ValueError:
        return None
    gi_text = labels.get("GPU_I_ID")
    gi: int | None = None
    if gi_text:
        try:
            gi = int(gi_text)
        except ValueError:
            return None
    return SeriesKey(host_of(labels), gpu, gi)


def number_of(value: Any) -> float | None:
    """A Prometheus sample value ("123.4", "NaN", "+Inf") as a float; None when not finite."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


# One vector as the HTTP API returns it: [{"metric": {labels}, "value": [t, "v"]}, ...].
Vector = Sequence[Mapping[str, Any]]


_BY_METRIC: Final = {metric: (name, factor) for name, (metric, factor) in FIELD_METRICS.items()}
_FIELD_SOURCE: Final = {name: metric for name, (metric, _) in FIELD_METRICS.items()}


class FleetAssembler:
    """Joins per-metric instant vectors into device records, one vector at a time.

    Fed as each query answers, so only one parsed answer needs to be alive at a time (the
    app's memory high-water mark). Any order works: a device first seen in a key-only answer
    gets its UUID, model, MIG profile, Kubernetes labels when the identity metric's answer comes.
    """

    def __init__(self) -> None:
        self._devices: dict[SeriesKey, FleetGpu] = {}
        self._extra: dict[SeriesKey, dict[str, float]] = {}
        self._present: set[SeriesKey] = set()  # devices with an instant value now
        self.store_t: float | None = None  # the store's own clock, set by `result`

    def _device(self, labels: Mapping[str, str]) -> FleetGpu | None:
        key = series_key(labels)
        if key is None:
            return None
        rec = self._devices.get(key)
        if rec is None:
            rec = self._devices[key] = FleetGpu(host=key.host, gpu=key.gpu, uuid=None, model=None, gi=key.gi)
        uuid = uuid_of(labels)
        if rec.uuid is None and uuid:
            rec.uuid = uuid
            rec.model = labels.get("modelName") or None
            rec.mig_profile = labels.get("GPU_I_PROFILE") or None
            rec.pci_bus_id = labels.get("pci_bus_id") or None
            rec.kube = {k: labels[k] for k in KUBE_LABELS if labels.get(k)}
            rec.simulated = labels.get("simulated") == "true"
        elif rec.kube and labels.get("pod"):
            # A GPU shared by pods has a series per pod: name the first pod by name, whatever order
            # the store answers in (Prometheus and VictoriaMetrics differ).
            kube = {k: labels[k] for k in KUBE_LABELS if labels.get(k)}
            if tuple(kube.get(k, "") for k in KUBE_LABELS) < tuple(rec.kube.get(k, "") for k in KUBE_LABELS):
                rec.kube = kube
        if rec.instance is None and labels.get("instance"):
            rec.instance = labels["instance"]
        return rec

    def add(self, metric: str, vector: Vector) -> None:
        """Take in one metric's vector (a metric name, or IDLE_PEAK)."""
        for item in vector:
            rec = self._device(item.get("metric") or {})
            value = item.get("value")
            if rec is None or not isinstance(value, list | tuple) or len(value) != 2:
                continue
            number = number_of(value[1])
            if metric not in _OVER_TIME:
                self._present.add(rec.key)
            if metric in _BY_METRIC:
                name, factor = _BY_METRIC[metric]
                rec.values[name] = None if number is None else number * factor
            elif metric in (THROTTLE, THROTTLE_RETIRED):
                # The current name wins over the retired one whatever order the answers come in.
                if number is not None and number >= 0 and rec.throttle_source != THROTTLE:
                    decoded = decode_mask(int(number))
                    rec.throttle_reasons, rec.idle = list(decoded.reasons), decoded.idle
                    rec.throttle_source = metric
            elif metric == XID_COUNT:
                try:
                    code = int((item.get("metric") or {}).get("xid", ""))
                except ValueError:
                    continue
                if number is not None:
                    rec.xids[code] = rec.xids.get(code, 0.0) + number
            elif metric == IDLE_PEAK:
                rec.values["util_gpu_peak_pct"] = number
            elif metric == SAMPLE_TIME:
                rec.sample_t = number
            elif number is not None:  # the sample counts too (read in `result`)
                self._extra.setdefault(rec.key, {})[metric] = number

    def result(self, t: float | None = None, *, newest_up: float | None = None) -> list[FleetGpu]:
        """The devices, sorted by host, GPU and GPU instance; derived fields filled in.

        Ages count from the store's own clock (`store_clock`: its newest `up`, or the newest sample of
        these devices); from `t` only when the store gave neither."""
        counted_hosts = {r.host for r in self._devices.values() if r.xids}
        # A device known only from answers over a window (the idle peak, the sample count) has
        # stopped reporting: it is not part of the snapshot (`FleetSource` lists it as missing).
        self._devices = {k: d for k, d in self._devices.items() if k in self._present}
        self.store_t = store_clock(newest_up, list(self._devices.values()))
        now = self.store_t if self.store_t is not None else t
        for key, rec in self._devices.items():
            rec.xid_counted = rec.host in counted_hosts
            if rec.values.get("util_gpu_pct") is not None:
                rec.util_source = _FIELD_SOURCE["util_gpu_pct"]
            elif rec.gi is None and (engine := rec.values.get("gr_engine_active_pct")) is not None:
                # A whole GPU without GPU_UTIL: in MIG mode (NVML has none) or a profiling-only
                # counters CSV. DCGM still measures its graphics engine.
                rec.values["util_gpu_pct"], rec.util_source = engine, _FIELD_SOURCE["gr_engine_active_pct"]
            if now is not None and rec.sample_t is not None:
                rec.values["age_s"] = max(0.0, now - rec.sample_t)
            used = rec.values.get("mem_used_mib")
            more = self._extra.get(key, {})
            rec.scrape_interval_s = scrape_interval({window: more.get(name) for name, window in SAMPLE_COUNTS})
            free = more.get(FB_FREE)
            # nvidia-smi's total is used + free + reserved; older exporters have no FB_RESERVED.
            rec.values["mem_total_mib"] = (None if used is None or free is None
                                           else used + free + more.get(FB_RESERVED, 0.0))
        return sorted(self._devices.values(), key=lambda d: (d.host, d.gpu, -1 if d.gi is None else d.gi))


def scrape_interval(counts: Mapping[float, float | None]) -> float | None:
    """How often a device is scraped, from its sample counts per window (seconds -> samples).

    n samples a window of W seconds holds are at most W / (n - 1) apart, so the smallest such bound
    over the windows is the estimate: it errs late, never early (no false "stale"), and is tight from
    a series' first seconds (the 10 s window) to a scrape every minute or two (the 5 minutes). A
    series with one sample in 5 minutes is read as scraped every 5 minutes."""
    bounds = [window / (n - 1) for window, n in counts.items() if n is not None and n >= 2]
    if bounds:
        return min(bounds)
    longest = max(counts, default=None)
    return longest if longest is not None and counts[longest] == 1 else None


def store_clock(newest_up: float | None, gpus: Sequence[FleetGpu]) -> float | None:
    """The store's own "now": its newest `up` sample (written at every scrape, failed ones too), or
    else the newest sample of the fleet's devices. None when the store gave neither."""
    times = [g.sample_t for g in gpus if g.sample_t is not None]
    if newest_up is not None:
        times.append(newest_up)
    return max(times) if times else None


def assemble(vectors: Mapping[str, Vector], t: float | None = None) -> list[FleetGpu]:
    """Join per-metric instant vectors (keyed by metric name, or IDLE_PEAK) into device records."""
    assembler = FleetAssembler()
    for metric, vector in vectors.items():
        assembler.add(metric, vector)
    return assembler.result(t)


# --- attention and summary ------------------------------------------------------------------


def attention_of(gpu: FleetGpu, thresholds: AlertThresholds | None = None) -> Attention:
    """The most urgent thing about this GPU, with the host alerts' thresholds."""
    th = thresholds or AlertThresholds()
    pct = gpu.mem_used_pct
    if pct is not None and pct > th.mem_used_pct:
        return Attention.OOM_RISK
    xid_kind = gpu.xid_kind
    if xid_kind in (XidClass.HARDWARE_FAIL, XidClass.HARDWARE_DEGRADE):
        return Attention.XID
    if gpu.throttle_reasons and set(gpu.throttle_reasons) & (THERMAL_REASONS | POWER_REASONS):
        return Attention.THROTTLING
    if th.temp_c is not None:
        temp = gpu.values.get("temp_c")
        if temp is not None and temp >= th.temp_c:
            return Attention.THROTTLING
    if is_idle(gpu, th):
        return Attention.IDLE
    if xid_kind is not None:
        return Attention.XID_INFO
    return Attention.NONE


def is_idle(gpu: FleetGpu, thresholds: AlertThresholds | None = None) -> bool:
    """Busy under the idle threshold for the whole idle window (its peak, read from Prometheus)."""
    th = thresholds or AlertThresholds()
    peak = gpu.values.get("util_gpu_peak_pct")
    if peak is None:
        peak = gpu.values.get("util_gpu_pct")  # no history yet: the instant value
    return peak is not None and peak < th.idle_util_pct


def rank(gpus: Iterable[FleetGpu], thresholds: AlertThresholds | None = None) -> list[tuple[Attention, FleetGpu]]:
    """GPUs with their attention, most urgent first (then fullest memory, then host and index)."""
    ranked = [(attention_of(g, thresholds), g) for g in gpus]
    ranked.sort(key=lambda ag: (ag[0], -(ag[1].mem_used_pct or 0.0), ag[1].host, ag[1].gpu, ag[1].gi or -1))
    return ranked


@dataclass(frozen=True, slots=True)
class MissingGpu:
    """A GPU (or MIG instance) seen in the last `REMEMBER_S` that reports nothing now."""

    host: str
    gpu: int
    gi: int | None
    uuid: str | None
    model: str | None
    instance: str | None
    since: float | None  # its newest sample; None when the store could not say
    exporter_up: bool | None  # its exporter's `up` now (False: the whole exporter is down)

    @property
    def device_key(self) -> str:
        """`gpuws watch`'s device key within the host."""
        return gpu_key(self.gpu, self.gi)

    def describe(self) -> str:
        """"not reporting since 12:03:04Z" (or "exporter down since ...")."""
        what = "exporter down" if self.exporter_up is False else "not reporting"
        return what if self.since is None else f"{what} since {iso8601(self.since)}"

    def to_dict(self) -> dict[str, object]:
        """The JSON object in `not_reporting` of `gpuws fleet snapshot --json`."""
        return {"host": self.host, "gpu": self.gpu, "mig": None if self.gi is None else {"gi": self.gi},
                "uuid": self.uuid, "model": self.model, "instance": self.instance,
                "since": None if self.since is None else iso8601(self.since), "exporter_up": self.exporter_up,
                "attention": Attention.NOT_REPORTING.label, "message": self.describe()}


def device_identity(gpu: FleetGpu | MissingGpu) -> tuple[str, ...]:
    """One physical device: its UUID (and GPU instance), else host and index (Kubernetes shares a
    GPU between pods, and two jobs may scrape one node: each is still one GPU in every total)."""
    gi = "" if gpu.gi is None else str(gpu.gi)
    return ("uuid", gpu.uuid, gi) if gpu.uuid else ("host", gpu.host, str(gpu.gpu), gi)


@dataclass(frozen=True)
class FleetSummary:
    """Fleet-wide totals of one snapshot (None where no GPU publishes the metric).

    `gpus` counts whole GPUs and `mig_instances` MIG GPU instances, apart (a MIG-mode GPU is one
    GPU); `not_reporting` the devices seen in the last hour that report nothing now.
    """

    gpus: int
    hosts: int
    util_avg_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    attention: dict[str, int]
    idle_cost_per_hour: float | None
    mig_instances: int = 0
    not_reporting: int = 0
    currency: str | None = None
    nvlink_mb_s: float | None = None  # DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL summed over whole GPUs

    def to_dict(self) -> dict[str, Any]:
        """The `summary` object of the JSON outputs."""
        return {"gpus": self.gpus, "mig_instances": self.mig_instances, "not_reporting": self.not_reporting,
                "hosts": self.hosts, "util_avg_pct": self.util_avg_pct,
                "mem_used_mib": self.mem_used_mib, "mem_total_mib": self.mem_total_mib, "power_w": self.power_w,
                "attention": dict(self.attention), "idle_cost_per_hour": self.idle_cost_per_hour,
                "currency": self.currency, "nvlink_mb_s": self.nvlink_mb_s}

    def counted(self) -> str:
        """"16 GPUs (4 MIG instances) on 4 hosts": the same words in the CLI and the window."""
        mig = f" ({self.mig_instances} MIG instance{'s' * (self.mig_instances != 1)})" if self.mig_instances else ""
        gone = f", {self.not_reporting} not reporting" if self.not_reporting else ""
        return f"{self.gpus} GPU{'s' * (self.gpus != 1)}{mig} on {self.hosts} host{'s' * (self.hosts != 1)}{gone}"


def _total(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def summarize(gpus: Sequence[FleetGpu], thresholds: AlertThresholds | None = None,
              price_per_gpu_hour: float | None = None, *, missing: Sequence[MissingGpu] = (),
              currency: str | None = None) -> FleetSummary:
    """Totals over whole GPUs, each counted once (MIG instances are part of their GPU's memory and power)."""
    unique: dict[tuple[str, ...], FleetGpu] = {}
    for g in gpus:
        unique.setdefault(device_identity(g), g)
    gpus = list(unique.values())
    whole = [g for g in gpus if g.gi is None]
    utils = [u for g in whole if (u := g.values.get("util_gpu_pct")) is not None]
    counts: dict[str, int] = {}
    idle_whole = 0
    for g in gpus:
        kind = attention_of(g, thresholds)
        if kind is not Attention.NONE:
            counts[kind.name.lower()] = counts.get(kind.name.lower(), 0) + 1
        if kind is Attention.IDLE and g.gi is None:
            idle_whole += 1
    if missing:
        counts[Attention.NOT_REPORTING.name.lower()] = len(missing)
    return FleetSummary(
        gpus=len(whole), mig_instances=len(gpus) - len(whole), not_reporting=len(missing),
        hosts=len({g.host for g in gpus} | {m.host for m in missing}), currency=currency,
        util_avg_pct=sum(utils) / len(utils) if utils else None,
        mem_used_mib=_total(g.values.get("mem_used_mib") for g in whole),
        mem_total_mib=_total(g.values.get("mem_total_mib") for g in whole),
        power_w=_total(g.values.get("power_w") for g in whole),
        nvlink_mb_s=_total(g.values.get("nvlink_bandwidth_total") for g in whole),
        attention=counts,
        idle_cost_per_hour=None if price_per_gpu_hour is None else idle_whole * price_per_gpu_hour,
    )


# --- time windows ---------------------------------------------------------------------------


def range_step(window_s: float, points: int = 600) -> float:
    """The step (s) of a range query over `window_s` giving about `points` points per series.

    Never under 1 s, and always under Prometheus' 11,000 points per series (window/step + 1).
    """
    if not 0 < window_s <= MAX_WINDOW_S:
        raise ValueError(f"window must be from 1 s to 30 days, not {window_s:g} s")
    points = max(2, min(points, MAX_POINTS_PER_SERIES - 2))
    step = max(1.0, math.ceil(window_s / points))
    while window_s / step + 1 >= MAX_POINTS_PER_SERIES:
        step += 1.0
    return step


def series_values(item: Mapping[str, Any] | None, times: Any, dtype: Any = None) -> Any:
    """A range-matrix row's values on the common time grid `times` (NaN where Prometheus has no point).

    `item` is one row of a `query_range` answer ({"metric": {...}, "values": [[t, "v"], ...]});
    "NaN", "+Inf" and anything that is not a number read as NaN. float32 by default (history
    kept for drawing), float64 for computing.
    """
    import numpy as np

    out = np.full(times.shape, np.nan, dtype=dtype or np.float32)
    values = (item or {}).get("values") or []
    if not values:
        return out
    start, step = float(times[0]), float(times[1] - times[0]) if len(times) > 1 else 1.0
    try:  # the whole row at once: a fleet's answers are 1,000s of rows of 100s of points
        pairs = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        pairs = None
    if pairs is not None and pairs.ndim == 2 and pairs.shape[1] == 2:
        index = np.rint((pairs[:, 0] - start) / step).astype(np.int64)
        inside = (index >= 0) & (index < len(out))
        out[index[inside]] = pairs[inside, 1]
        out[np.isinf(out)] = np.nan  # as `number_of`: a value that is not finite is no value
        return out
    for t, v in values:  # something odd in the row: value by value, skipping what is not a number
        try:
            index_one = round((float(t) - start) / step)
            if 0 <= index_one < len(out) and math.isfinite(number := float(v)):
                out[index_one] = number
        except (TypeError, ValueError):
            continue
    return out


def promql_duration(seconds: float) -> str:
    """`[90s]`-style PromQL duration of whole seconds."""
    return f"{max(1, round(seconds))}s"


def match_profile(profiles: Iterable[Any], host: str, uuid: str | None,
                  uuids: Mapping[str, Iterable[str]] | None = None) -> str | None:
    """The host profile a fleet GPU belongs to: by GPU UUID (known from its inventory), else by name.

    `profiles` are `HostProfile`s; `uuids` maps profile names to the GPU UUIDs seen on them. A
    name matches the profile's name or address, whole or as the short host name (before the first dot).
    """
    listed = list(profiles)
    if uuid and uuids:
        for name, known in uuids.items():
            if uuid in set(known):
                return name
    wanted = host.casefold()
    short = wanted.split(".", 1)[0]
    for profile in listed:
        for candidate in (profile.name.casefold(), str(profile.host).casefold()):
            if candidate in (wanted, short) or candidate.split(".", 1)[0] == short:
                return str(profile.name)
    return None
