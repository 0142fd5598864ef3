"""Facts about the host from nvidia-smi (and NVML while a check runs): GPUs, who uses them, links, ECC."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from typing import Any

from .output import Emitter, Record

SIM_MARKER = "gpuws-simulated-gpu-host"


# A GPU at or above this utilisation before the run is in use, processes listed or not (containers
# often cannot see other containers' processes).
BUSY_UTILIZATION_PCT = 20


# nvidia-smi clocks event (throttle) reason bits, as in nvml.h. A standalone copy of the GPU
# registry's table (gpuws.core.gpus.throttle): a test fails when the two drift.
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}


def run_cmd(argv: list[str], timeout: float = 20.0) -> tuple[int, str]:
    """Run a host command; (127, "") when it is missing, (124, "") when it hangs."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return 127, ""
    except subprocess.TimeoutExpired:
        return 124, ""
    except OSError as exc:
        return 126, str(exc)
    return proc.returncode, proc.stdout


def csv_value(raw: str) -> str | None:
    """One nvidia-smi CSV field; None for its words for no value (N/A, Not Supported, ...)."""
    value = raw.strip()
    if not value or value.strip("[]") in ("N/A", "Not Supported", "Unknown Error", "Insufficient Permissions") \
            or value.startswith("[Requested functionality"):
        return None
    return value


def query_gpus(fields: list[str]) -> list[dict[str, str | None]] | None:
    """`nvidia-smi --query-gpu` for `fields`; None without nvidia-smi. A field this driver does
    not know is retried alone and comes back as None, instead of failing the whole query."""
    rc, out = run_cmd(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
    if rc in (124, 126, 127):
        return None
    if rc == 0:
        rows = [[csv_value(v) for v in line.split(",")] for line in out.splitlines() if line.strip()]
        if all(len(r) == len(fields) for r in rows):
            return [dict(zip(fields, r, strict=True)) for r in rows]
    columns: dict[str, list[str | None]] = {}
    count = 0
    for name in fields:
        rc, out = run_cmd(["nvidia-smi", f"--query-gpu={name}", "--format=csv,noheader,nounits"])
        values = [csv_value(line) for line in out.splitlines() if line.strip()] if rc == 0 else []
        columns[name] = values
        count = max(count, len(values))
    return [{name: (vals[i] if i < len(vals) else None) for name, vals in columns.items()} for i in range(count)]


def to_int(value: str | None) -> int | None:
    """An nvidia-smi number (decimal, float or 0x hex) as int; None when it is not one."""
    if value is None:
        return None
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(float(value))
    except ValueError:
        return None


def to_float(value: str | None) -> float | None:
    """An nvidia-smi number as float; None when it is not one."""
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def decode_throttle(mask: int | None) -> list[str] | None:
    """The names of the throttle reasons set in `mask`; unknown bits as `unknown_0x..`."""
    if mask is None:
        return None
    names = [name for bit, name in THROTTLE_BITS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_BITS)
    return names + ([f"unknown_0x{unknown:x}"] if unknown else [])


GPU_FIELDS = ["index", "name", "uuid", "pci.bus_id", "memory.total", "driver_version", "compute_cap",
              "mig.mode.current"]


ENV_FIELDS = [
    "index", "ecc.mode.current", "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total", "retired_pages.pending", "retired_pages.single_bit_ecc.count",
    "retired_pages.double_bit.count", "persistence_mode", "pcie.link.gen.current", "pcie.link.gen.max",
    "pcie.link.width.current", "pcie.link.width.max", "clocks_throttle_reasons.active",
    "temperature.gpu", "clocks.sm", "clocks.max.sm", "power.draw",
]


SAMPLE_FIELDS = ["index", "temperature.gpu", "clocks.sm", "power.draw", "clocks_throttle_reasons.active"]


def driver_cuda_version() -> str | None:
    """The newest CUDA version the installed driver supports (the 'CUDA Version' nvidia-smi shows)."""
    rc, out = run_cmd(["nvidia-smi"])
    if rc == 0:
        marker = "CUDA Version:"
        for line in out.splitlines():
            if marker in line:
                return line.split(marker, 1)[1].strip(" |").split()[0]
    return None


def host_is_simulated() -> bool:
    """The gpuws simulated GPU host says so in three places; any one is enough."""
    if os.environ.get("GPUWS_SIMULATED", "").strip().lower() in ("1", "true", "yes"):
        return True
    try:
        import pynvml  # type: ignore[import-not-found]

        if getattr(pynvml, "GPUWS_SIMULATED", False):
            return True
    except Exception:  # noqa: S110 - no NVML module is the normal case
        pass
    if shutil.which("nvidia-smi"):
        rc, out = run_cmd(["nvidia-smi", "-q", "-x"])
        return rc == 0 and SIM_MARKER in out
    return False


def list_gpus() -> tuple[list[Record], str | None]:
    """GPUs as nvidia-smi reports them, and why none could be listed."""
    rows = query_gpus(GPU_FIELDS)
    if rows is None:
        return [], "no NVIDIA driver found (nvidia-smi is not installed or not on PATH)"
    gpus = []
    for row in rows:
        index = to_int(row.get("index"))
        if index is None:
            continue
        gpus.append({
            "index": index, "name": row.get("name") or "unknown", "uuid": row.get("uuid"),
            "pci_bus_id": row.get("pci.bus_id"), "memory_total_mib": to_int(row.get("memory.total")),
            "driver_version": row.get("driver_version"), "compute_capability": row.get("compute_cap"),
            "mig_mode": row.get("mig.mode.current"),
        })
    if not gpus:
        return [], "nvidia-smi found no GPU (driver not loaded, or no device visible)"
    return gpus, None


def gpu_activity(gpus: list[Record]) -> dict[int, Record]:
    """Per GPU index: the compute processes on it (other than this runner) and its utilisation,
    read before anything is measured. A GPU with either is "busy"."""
    by_uuid = {g.get("uuid"): g["index"] for g in gpus if g.get("uuid")}
    activity: dict[int, Record] = {g["index"]: {"processes": 0, "pids": [], "utilization_pct": None,
                                                         "busy": False} for g in gpus}
    rc, out = run_cmd(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"])
    if rc == 0:
        for line in out.splitlines():
            cells = [c.strip() for c in line.split(",")]
            index = by_uuid.get(cells[0]) if len(cells) == 2 else None
            pid = to_int(cells[1]) if len(cells) == 2 else None
            if index is not None and pid is not None and pid != os.getpid():
                activity[index]["processes"] += 1
                activity[index]["pids"].append(pid)
    for row in query_gpus(["index", "utilization.gpu"]) or []:
        index = to_int(row.get("index"))
        if index in activity:
            activity[index]["utilization_pct"] = to_int(row.get("utilization.gpu"))
    for a in activity.values():
        a["busy"] = a["processes"] > 0 or (a["utilization_pct"] or 0) >= BUSY_UTILIZATION_PCT
    return activity


def busy_reason(activity: Record) -> str:
    """"GPU in use by N processes (U% utilisation)" for a busy GPU."""
    util = activity.get("utilization_pct")
    return f"GPU in use by {activity.get('processes', 0)} processes" + (
        f" ({util}% utilisation)" if util is not None else "")


def topology_links() -> dict[str, str]:
    """`nvidia-smi topo -m` as {"0-1": "NV12", ...} for each GPU pair (NV# is NVLink); empty when
    the driver cannot tell."""
    rc, out = run_cmd(["nvidia-smi", "topo", "-m"])
    if rc != 0:
        return {}
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header = next((cells for cells in lines if cells and cells[0].startswith("GPU")), None)
    if not header:
        return {}
    columns = [c for c in header if c.startswith("GPU") and c[3:].isdigit()]
    links: dict[str, str] = {}
    for cells in lines:
        if not cells or not cells[0].startswith("GPU") or not cells[0][3:].isdigit() or "X" not in cells:
            continue  # the header line, the legend, NIC rows
        row = int(cells[0][3:])
        for k, col in enumerate(columns):
            if k + 1 < len(cells) and cells[k + 1] != "X":
                links[f"{row}-{int(col[3:])}"] = cells[k + 1]
    return links


class Sampler:
    """Polls temperature, SM clock, power and throttle reasons while a check runs (NVML when it
    works, else nvidia-smi), so the stress check can say how the card held up."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.samples: list[Record] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        except Exception:
            self._nvml = None

    def _read(self) -> list[Record]:
        if self._nvml is not None:
            try:
                nv = self._nvml
                out = []
                for i in range(nv.nvmlDeviceGetCount()):
                    h = nv.nvmlDeviceGetHandleByIndex(i)
                    out.append({
                        "gpu": i,
                        "temp_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                        "sm_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                        "power_w": nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
                        "throttle": nv.nvmlDeviceGetCurrentClocksThrottleReasons(h),
                    })
                return out
            except Exception:
                self._nvml = None
        rows = query_gpus(SAMPLE_FIELDS) or []
        return [{"gpu": to_int(r.get("index")), "temp_c": to_float(r.get("temperature.gpu")),
                 "sm_clock_mhz": to_float(r.get("clocks.sm")), "power_w": to_float(r.get("power.draw")),
                 "throttle": to_int(r.get("clocks_throttle_reasons.active"))} for r in rows]

    def _loop(self) -> None:
        while not self._stop.is_set():
            t = time.monotonic()
            for s in self._read():
                s["t"] = t
                self.samples.append(s)
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        if shutil.which("nvidia-smi") or self._nvml is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def summary(self, gpu: int, since: float | None = None, until: float | None = None) -> Record:
        """Clocks, power, temperature and throttle reasons of `gpu` between two monotonic times."""
        return summarize_samples([s for s in list(self.samples) if s.get("gpu") == gpu
                                  and (since is None or s.get("t", 0) >= since)
                                  and (until is None or s.get("t", 0) <= until)])


def summarize_samples(mine: list[Record]) -> Record:
    """The telemetry summary of one GPU's samples during a check."""
    temps = [s["temp_c"] for s in mine if s.get("temp_c") is not None]
    clocks = [s["sm_clock_mhz"] for s in mine if s.get("sm_clock_mhz") is not None]
    power = [s["power_w"] for s in mine if s.get("power_w") is not None]
    mask = 0
    for s in mine:
        mask |= s.get("throttle") or 0
    return {
        "samples": len(mine),
        "temp_max_c": max(temps) if temps else None,
        "sm_clock_min_mhz": min(clocks) if clocks else None,
        "sm_clock_max_mhz": max(clocks) if clocks else None,
        "power_max_w": max(power) if power else None,
        "throttle_reasons_seen": decode_throttle(mask) if mine else None,
    }


def environment_checks(out: Emitter, gpus: list[Record], runtime: str | None,
                       expected: Record, simulated: bool,
                       activity: dict[int, Record] | None = None) -> Record:
    """Facts about the driver and each card; gpuws judges them (see gpuws.core.bench.verdicts).
    `activity` (from `gpu_activity`) says which GPUs were in use when the facts were read."""
    activity = activity or {}
    label = "simulated" if simulated else "gpu"
    info: Record = {"driver_cuda_version": None}
    if not gpus:
        out.result("env.driver", status="inconclusive", reason="no NVIDIA driver found", harness=label,
                   simulated=simulated)
        return info
    driver_cuda = driver_cuda_version()
    info["driver_cuda_version"] = driver_cuda
    out.result("env.driver", status="ok", harness=label, simulated=simulated,
               facts={"driver_version": gpus[0].get("driver_version"), "driver_cuda_version": driver_cuda,
                      "runtime_cuda_version": runtime})
    rows = {to_int(r.get("index")): r for r in (query_gpus(ENV_FIELDS) or [])}
    if all(r.get("clocks_throttle_reasons.active") is None for r in rows.values()):
        # Newer drivers name it "clocks_event_reasons"; the old name is an alias that may go away.
        for r in query_gpus(["index", "clocks_event_reasons.active"]) or []:
            if to_int(r.get("index")) in rows:
                rows[to_int(r.get("index"))]["clocks_throttle_reasons.active"] = r.get("clocks_event_reasons.active")
    remapped = remapped_rows()
    for g in gpus:
        r = rows.get(g["index"], {})
        throttle = to_int(r.get("clocks_throttle_reasons.active"))
        facts = {
            "env.ecc": {"ecc_mode": r.get("ecc.mode.current"),
                        "corrected_volatile": to_int(r.get("ecc.errors.corrected.volatile.total")),
                        "uncorrected_volatile": to_int(r.get("ecc.errors.uncorrected.volatile.total")),
                        "uncorrected_aggregate": to_int(r.get("ecc.errors.uncorrected.aggregate.total"))},
            "env.retired_pages": {"pending": r.get("retired_pages.pending"),
                                  "single_bit": to_int(r.get("retired_pages.single_bit_ecc.count")),
                                  "double_bit": to_int(r.get("retired_pages.double_bit.count")),
                                  **remapped.get(g.get("pci_bus_id") or "", {})},
            "env.persistence": {"persistence_mode": r.get("persistence_mode")},
            "env.pcie": {"gen_current": to_int(r.get("pcie.link.gen.current")),
                         "gen_max": to_int(r.get("pcie.link.gen.max")),
                         "width_current": to_int(r.get("pcie.link.width.current")),
                         "width_max": to_int(r.get("pcie.link.width.max"))},
            "env.throttle_idle": {"mask": throttle, "reasons": decode_throttle(throttle),
                                  "temp_c": to_float(r.get("temperature.gpu")),
                                  "power_w": to_float(r.get("power.draw")),
                                  # Read under someone else's load it says nothing about idle.
                                  "busy": bool(activity.get(g["index"], {}).get("busy"))},
            "env.busy": activity.get(g["index"], {"processes": None, "utilization_pct": None, "busy": False}),
            "env.nvlink": nvlink_status(g["index"]),
        }
        for check, f in facts.items():
            out.result(check, gpu=g["index"], status="ok", harness=label, simulated=simulated, facts=f)
    out.result("env.topology", status="ok", harness=label, simulated=simulated,
               facts={"gpu_count": len(gpus), "mig_modes": [g.get("mig_mode") for g in gpus],
                      "names": [g.get("name") for g in gpus], "expected": expected or None,
                      "links": topology_links()})
    return info


def remapped_rows() -> dict[str, Record]:
    """Row remapping (Ampere and newer), keyed by PCI bus id; empty where unsupported."""
    fields = ["gpu_bus_id", "remapped_rows.correctable", "remapped_rows.uncorrectable",
              "remapped_rows.pending", "remapped_rows.failure"]
    rc, out = run_cmd(["nvidia-smi", f"--query-remapped-rows={','.join(fields)}", "--format=csv,noheader"])
    result: dict[str, Record] = {}
    if rc != 0:
        return result
    for line in out.splitlines():
        values = [csv_value(v) for v in line.split(",")]
        if len(values) == len(fields) and values[0]:
            result[values[0]] = {"remapped_correctable": to_int(values[1]),
                                 "remapped_uncorrectable": to_int(values[2]),
                                 "remapped_pending": values[3], "remapped_failure": values[4]}
    return result


def nvlink_status(index: int) -> Record:
    """Links up and their speed from `nvidia-smi nvlink -s`; none on PCIe-only cards."""
    rc, out = run_cmd(["nvidia-smi", "nvlink", "-s", "-i", str(index)])
    links = [line.strip() for line in out.splitlines() if line.strip().startswith("Link ")] if rc == 0 else []
    active = [line for line in links if "GB/s" in line]
    speeds = []
    for line in active:
        with contextlib.suppress(ValueError, IndexError):
            speeds.append(float(line.split(":", 1)[1].split("GB/s")[0].strip()))
    return {"links_total": len(links), "links_active": len(active),
            "total_gb_s": round(sum(speeds), 3) if speeds else None}
