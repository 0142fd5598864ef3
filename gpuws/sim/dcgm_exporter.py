"""SIMULATED dcgm-exporter: `/metrics` in NVIDIA dcgm-exporter's exact text format, on loopback.

Names, HELP/TYPE lines, label names and their order, and value formatting follow real
dcgm-exporter output kept in tests/fixtures/dcgm_exporter/ (with their origins): the HELP texts
are dcgm-exporter's etc/default-counters.csv, rendered by its internal/pkg/rendermetrics template
(`gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, [`GPU_I_PROFILE`, `GPU_I_ID`], `Hostname`,
then label fields such as `DCGM_FI_DRIVER_VERSION`). Every value also carries `simulated="true"`
so a simulated GPU can never be taken for a real one in Prometheus, in gpuws or anywhere else.

GPU facts (framebuffer, reserved memory, power limit, clocks, MIG instance sizes) are the
simulated host's (`gpuws.sim.models`, built on the registry `gpuws.core.gpus`): one table each.

Faults a real exporter shows: `gpu-lost` (XID 79, the GPU fell off the bus: the exporter stops
publishing it), `xid` (an XID error; `DCGM_EXP_XID_ERRORS_COUNT` counts it by kind), and per host
which throttle metric it publishes (`DCGM_FI_DEV_CLOCKS_EVENT_REASONS`, the retired
`DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`, or none: dcgm-exporter's default counters have neither) and
whether it runs with `--use-old-namespace` (label `uuid` instead of `UUID`).

`SimFleet` starts one exporter per simulated host (`gpuws demo-fleet`, the tests, the benchmark).
"""

from __future__ import annotations

import math
import random
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

from gpuws.sim.models import GPU_MODELS, GpuModel

SIM_LABEL: Final = 'simulated="true"'
DRIVER_VERSION: Final = "580.105.08"
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

#: DCGM's current name of the clock-event (throttle) mask, and the name it had before DCGM 3.2.
CLOCKS_EVENT_REASONS: Final = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
CLOCK_THROTTLE_REASONS: Final = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
#: dcgm-exporter's own XID counter: one series per XID seen in its window (label `xid`).
XID_COUNT: Final = "DCGM_EXP_XID_ERRORS_COUNT"
XID_WINDOW_MS: Final = 300000  # dcgm-exporter's --xid-count-window-size default (5 minutes)

# (metric, Prometheus type, HELP text, value is a float) in dcgm-exporter's order: its
# etc/default-counters.csv as dcgm-exporter prints it, then what a counters CSV adds (the
# throttle masks, the power limit: DCGM field name, gauge, a help text).
METRICS: Final[tuple[tuple[str, str, str, bool], ...]] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", False),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", False),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", False),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", False),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", True),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", False),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", False),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", False),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", False),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", False),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", False),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", False),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", False),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", False),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", False),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes.",
     False),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors",
     False),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors", False),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", False),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", False),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", True),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.", True),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
     "Ratio of cycles the device memory interface is active sending or receiving data.", True),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus - including both "
     "protocol headers and data payloads - in bytes per second.", False),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus - including both "
     "protocol headers and data payloads - in bytes per second.", False),
    (CLOCKS_EVENT_REASONS, "gauge", "Current clock event reasons.", False),
    (CLOCK_THROTTLE_REASONS, "gauge", "Current clock throttle reasons.", False),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W).", True),
)
# What DCGM publishes per MIG GPU instance (the rest only for the whole GPU).
MIG_METRICS: Final = frozenset({"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED",
                                "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                                "DCGM_FI_PROF_DRAM_ACTIVE"})
# NVML cannot read utilisation of a GPU in MIG mode: the exporter publishes no value then.
NOT_IN_MIG_MODE: Final = frozenset({"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
                                    "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL"})

#: The simulated nodes' models in turn (node 0 H100, node 1 A100, node 2 L40S, ...).
MODEL_KEYS: Final = ("h100", "a100", "l40s")
#: The MIG profile a simulated MIG-mode GPU is split into (two instances of it).
SIM_MIG_PROFILE: Final = "3g.40gb"


class ThrottleMetric(StrEnum):
    """Which clock-event mask a simulated exporter publishes."""

    CURRENT = CLOCKS_EVENT_REASONS
    RETIRED = CLOCK_THROTTLE_REASONS
    NONE = "none"  # dcgm-exporter's default counters: neither


class ExporterFault(StrEnum):
    """What a simulated exporter plays on one GPU (`gpuws demo-fleet --fault KIND:HOST/GPU`)."""

    GPU_LOST = "gpu-lost"  # XID 79: the GPU fell off the bus and the exporter stops publishing it
    XID_APP = "xid-app"  # XID 13 (graphics engine exception): an application's fault, not the GPU's


@dataclass
class SimMig:
    """One MIG GPU instance of a simulated GPU."""

    gi: int
    profile: str
    fb_total_mib: int
    fb_used_mib: int
    gr_active: float


@dataclass
class SimDcgmGpu:
    """The values one simulated GPU publishes (what a real exporter would read from DCGM)."""

    index: int
    uuid: str
    model: str
    pci_bus_id: str
    fb_total_mib: int
    fb_reserved_mib: int
    fb_used_mib: int
    util_pct: int
    temp_c: int
    power_w: float
    power_limit_w: float
    sm_clock_mhz: int
    mem_clock_mhz: int
    throttle_mask: int = 0
    xid: int = 0
    mig: list[SimMig] = field(default_factory=list)
    nvlink: bool = False  # NVLink-connected boards (SXM) publish DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL
    lost: bool = False  # fell off the bus: the exporter no longer publishes this GPU

    def values(self) -> dict[str, float]:
        """Whole-GPU metric values (a missing key: not published)."""
        free = self.fb_total_mib - self.fb_reserved_mib - self.fb_used_mib
        busy = self.util_pct / 100.0
        out: dict[str, float] = {
            "DCGM_FI_DEV_SM_CLOCK": self.sm_clock_mhz,
            "DCGM_FI_DEV_MEM_CLOCK": self.mem_clock_mhz,
            "DCGM_FI_DEV_MEMORY_TEMP": self.temp_c + 4,
            "DCGM_FI_DEV_GPU_TEMP": self.temp_c,
            "DCGM_FI_DEV_POWER_USAGE": self.power_w,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 4742776 + self.index * 1000,
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
            "DCGM_FI_DEV_GPU_UTIL": self.util_pct,
            "DCGM_FI_DEV_MEM_COPY_UTIL": round(self.util_pct * 0.6),
            "DCGM_FI_DEV_ENC_UTIL": 0,
            "DCGM_FI_DEV_DEC_UTIL": 0,
            "DCGM_FI_DEV_XID_ERRORS": self.xid,
            "DCGM_FI_DEV_FB_FREE": free,
            "DCGM_FI_DEV_FB_USED": self.fb_used_mib,
            "DCGM_FI_DEV_FB_RESERVED": self.fb_reserved_mib,
            # DCGM field 449 reads as MB/s across all links now (dcgm-exporter types it a counter).
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": self.util_pct * 3_000 + self.index,
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": busy * 0.98,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": busy * 0.6,
            "DCGM_FI_PROF_DRAM_ACTIVE": busy * 0.5,
            "DCGM_FI_PROF_PCIE_TX_BYTES": 112603 + self.util_pct * 1000,
            "DCGM_FI_PROF_PCIE_RX_BYTES": 17544 + self.util_pct * 3000,
            CLOCKS_EVENT_REASONS: self.throttle_mask,
            CLOCK_THROTTLE_REASONS: self.throttle_mask,
            "DCGM_FI_DEV_POWER_MGMT_LIMIT": self.power_limit_w,
        }
        if self.mig:
            for name in NOT_IN_MIG_MODE:
                out.pop(name, None)
        if not self.nvlink:
            del out["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"]
        return out

    @staticmethod
    def mig_values(mig: SimMig) -> dict[str, float]:
        return {
            "DCGM_FI_DEV_XID_ERRORS": 0,
            "DCGM_FI_DEV_FB_FREE": mig.fb_total_mib - mig.fb_used_mib,
            "DCGM_FI_DEV_FB_USED": mig.fb_used_mib,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": mig.gr_active,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": mig.gr_active * 0.6,
            "DCGM_FI_PROF_DRAM_ACTIVE": mig.gr_active * 0.5,
        }


def format_value(value: float, is_float: bool) -> str:
    """As dcgm-exporter prints it: `%f` for DCGM double fields ("16.365000"), plain integers otherwise."""
    return f"{value:f}" if is_float else str(int(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class SimExporterHost:
    """One simulated node: its hostname and GPUs."""

    hostname: str
    gpus: list[SimDcgmGpu]
    driver_version: str = DRIVER_VERSION
    dynamic: bool = False  # demo: utilisation and power drift slowly; tests: values stay put
    throttle_metric: ThrottleMetric = ThrottleMetric.CURRENT
    old_namespace: bool = False  # dcgm-exporter --use-old-namespace: label `uuid`, not `UUID`
    xid_count: bool = True  # publish DCGM_EXP_XID_ERRORS_COUNT (a counters CSV line enables it)
    # Kubernetes with a GPU shared by pods (time-slicing): dcgm-exporter publishes each GPU once
    # per pod using it, every series with the whole GPU's values. 0: no pod labels.
    shared_pods: int = 0

    def fault(self, kind: ExporterFault, gpu: int, on: bool = True) -> None:
        """Play (or stop playing) `kind` on GPU index `gpu` of this node."""
        target = next((g for g in self.gpus if g.index == gpu), None)
        if target is None:
            raise ValueError(f"{self.hostname} has no GPU {gpu}")
        if kind is ExporterFault.GPU_LOST:
            target.lost, target.xid = on, 79 if on else 0
        else:
            target.xid = 13 if on else 0

    def render(self, now: float | None = None) -> str:
        """The `/metrics` body, exactly as dcgm-exporter lays it out, plus `simulated="true"`."""
        if self.dynamic:
            self._drift(time.time() if now is None else now)
        lines: list[str] = []
        per_gpu = [(g, g.values()) for g in self.gpus if not g.lost]
        uuid_label = "uuid" if self.old_namespace else "UUID"
        for metric, kind, help_text, is_float in METRICS:
            if metric in (CLOCKS_EVENT_REASONS, CLOCK_THROTTLE_REASONS) and metric != self.throttle_metric:
                continue
            rows: list[str] = []
            for gpu, values in per_gpu:
                base = (f'gpu="{gpu.index}",{uuid_label}="{gpu.uuid}",pci_bus_id="{gpu.pci_bus_id}",'
                        f'device="nvidia{gpu.index}",modelName="{_escape(gpu.model)}"')
                tails = [f'Hostname="{_escape(self.hostname)}",DCGM_FI_DRIVER_VERSION="{self.driver_version}",'
                         f"{pod}{SIM_LABEL}" for pod in self._pods()]
                tail = tails[0]
                if metric in values:
                    rows += [f"{metric}{{{base},{t}}} {format_value(values[metric], is_float)}" for t in tails]
                if metric in MIG_METRICS:
                    for mig in gpu.mig:
                        mig_labels = f'GPU_I_PROFILE="{mig.profile}",GPU_I_ID="{mig.gi}"'
                        value = SimDcgmGpu.mig_values(mig)[metric]
                        rows.append(f"{metric}{{{base},{mig_labels},{tail}}} {format_value(value, is_float)}")
            if rows:  # like dcgm-exporter, no HELP/TYPE for a family without samples
                lines.append(f"# HELP {metric} {help_text}")
                lines.append(f"# TYPE {metric} {kind}")
                lines.extend(rows)
        if self.xid_count:
            lines += self._xid_count_lines(per_gpu, uuid_label)
        return "\n".join(lines) + "\n"

    def _pods(self) -> list[str]:
        if not self.shared_pods:
            return [""]
        return [f'container="train",namespace="ml",pod="job-{n}",' for n in range(self.shared_pods)]

    def _xid_count_lines(self, per_gpu: list[tuple[SimDcgmGpu, dict[str, float]]], uuid_label: str) -> list[str]:
        # dcgm-exporter's XID collector: one series per (GPU, XID) seen in the window, label `xid`
        # and `window_size_in_ms`; a GPU without XIDs has no series.
        rows = [f'{XID_COUNT}{{gpu="{g.index}",{uuid_label}="{g.uuid}",pci_bus_id="{g.pci_bus_id}",'
                f'device="nvidia{g.index}",modelName="{_escape(g.model)}",Hostname="{_escape(self.hostname)}",'
                f'window_size_in_ms="{XID_WINDOW_MS}",xid="{g.xid}",{SIM_LABEL}}} 1'
                for g, _ in per_gpu if g.xid]
        if not rows:
            return []
        return [f"# HELP {XID_COUNT} Count of XID Errors within user-specified time window "
                "(see xid-count-window-size param).", f"# TYPE {XID_COUNT} gauge", *rows]

    def _drift(self, now: float) -> None:
        for gpu in self.gpus:
            if gpu.mig or gpu.util_pct < 5 or gpu.xid:
                continue  # idle and broken GPUs stay so: the demo's attention list is stable
            phase = int(gpu.uuid[4:12], 16) % 1000 / 1000.0 * 2 * math.pi  # stable across runs
            gpu.util_pct = int(70 + 25 * math.sin(now / 60.0 + phase))
            gpu.power_w = round(gpu.power_limit_w * (0.35 + 0.6 * gpu.util_pct / 100.0), 3)


def make_hosts(hosts: int, gpus_per_host: int, *, seed: int = 15, dynamic: bool = False,
               mig_every: int = 8) -> list[SimExporterHost]:
    """`hosts` simulated nodes of `gpus_per_host` GPUs, with a mix that needs attention.

    Deterministic for a seed: per GPU, mostly busy; some idle (burning money), some near OOM,
    some thermally throttled, some with an XID error; GPU 0 of every `mig_every`-th host is in
    MIG mode with two instances.
    """
    if not 1 <= hosts <= 4096 or not 1 <= gpus_per_host <= 16:
        raise ValueError("hosts must be 1-4096 and GPUs per host 1-16")
    rng = random.Random(seed)
    out: list[SimExporterHost] = []
    for h in range(hosts):
        facts = GPU_MODELS[MODEL_KEYS[h % len(MODEL_KEYS)]]
        model, fb_total, reserved = facts.name, facts.memory_total_mib, facts.memory_reserved_mib
        limit, sm_max = facts.power_limit_w, facts.max_sm_clock_mhz
        gpus: list[SimDcgmGpu] = []
        for i in range(gpus_per_host):
            n = h * gpus_per_host + i
            kind = n % 16
            usable = fb_total - reserved
            util = rng.randint(55, 99)
            used = int(usable * rng.uniform(0.3, 0.75))
            mask, xid, temp = 0, 0, rng.randint(45, 70)
            if kind in (3, 11):  # idle, clocks down
                util, used, mask, temp = 0, 1, 0x1, rng.randint(28, 36)
            elif kind == 5:  # near OOM
                used = int(usable * 0.96)
            elif kind == 7:  # too hot
                mask, temp = 0x40 | 0x20, 88
            elif kind == 13:  # an XID error (79: GPU has fallen off the bus)
                xid = 79
            uuid = "GPU-%08x-%04x-%04x-%04x-%012x" % (  # noqa: UP031 (the NVML UUID layout)
                rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(16),
                rng.getrandbits(48))
            gpu = SimDcgmGpu(
                index=i, uuid=uuid, model=model, pci_bus_id=f"00000000:{0x18 + i * 0x10 & 0xFF:02X}:00.0",
                fb_total_mib=fb_total, fb_reserved_mib=reserved, fb_used_mib=used, util_pct=util, temp_c=temp,
                power_w=round(limit * (0.12 if util == 0 else 0.35 + 0.6 * util / 100.0), 3),
                power_limit_w=limit,
                sm_clock_mhz=facts.idle_sm_clock_mhz if util == 0 else sm_max - (600 if mask & 0x40 else 0),
                mem_clock_mhz=facts.idle_mem_clock_mhz if util == 0 else facts.max_mem_clock_mhz,
                throttle_mask=mask, xid=xid, nvlink=_has_nvlink(facts),
            )
            mig_profile = facts.mig_profile(SIM_MIG_PROFILE)
            if i == 0 and mig_every and h % mig_every == 0 and mig_profile is not None:
                size = mig_profile.memory_mib
                gpu.mig = [SimMig(1, SIM_MIG_PROFILE, size, 20480, 0.91), SimMig(2, SIM_MIG_PROFILE, size, 512, 0.0)]
                gpu.fb_used_mib = 20480 + 512
            gpus.append(gpu)
        out.append(SimExporterHost(f"sim-gpu-node-{h:03d}", gpus, dynamic=dynamic))
    return out


def _has_nvlink(facts: GpuModel) -> bool:
    """NVLink boards per the registry's datasheet (SXM parts); PCIe cards such as the L40S have none."""
    from gpuws.core.gpus.models import datasheet_for_variant, variant_for_name

    sheet = datasheet_for_variant(variant_for_name(facts.name))
    return sheet is not None and sheet.nvlink_gb_s is not None


class _Handler(BaseHTTPRequestHandler):
    server: _ExporterServer

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404)
            return
        body = self.server.host.render().encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # a scrape a second per host must not flood stderr


class _ExporterServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: SimExporterHost, port: int) -> None:
        self.host = host
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            return  # the scraper gave up (scrape timeout on a busy machine): nothing to report
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class SimFleet:
    """N simulated dcgm-exporters on loopback ports; `targets` is what Prometheus scrapes."""

    def __init__(self, hosts: Sequence[SimExporterHost]) -> None:
        self.hosts = list(hosts)
        self._servers: list[_ExporterServer] = []
        self._threads: list[threading.Thread] = []

    @property
    def targets(self) -> list[str]:
        return [f"127.0.0.1:{s.server_address[1]}" for s in self._servers]

    def start(self) -> SimFleet:
        for host in self.hosts:
            server = _ExporterServer(host, 0)
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5},
                                      name=f"sim-dcgm-{host.hostname}", daemon=True)
            thread.start()
            self._servers.append(server)
            self._threads.append(thread)
        return self

    def stop_host(self, index: int) -> None:
        """Stop one node's exporter (the node or its exporter died): its target stops answering."""
        server = self._servers[index]
        server.shutdown()
        server.server_close()

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers.clear()
        self._threads.clear()

    def __enter__(self) -> SimFleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
