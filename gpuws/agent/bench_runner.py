#!/usr/bin/env python3
"""gpuws on-host GPU sanity benchmark: measures, never judges.

Standalone on purpose: the standard library plus whatever it finds (PyTorch, CuPy, NumPy, nvcc,
pynvml). gpuws sends it over SSH into a temporary directory and runs it with the host's
`python3`; it also runs as it is on any machine:

    python3 bench_runner.py --json [--quick|--full] [--timeout S] [--expected JSON] [--allow-busy]

Output is one JSON object per line on stdout:
    {"type": "progress", "step": k, "total": n, "check": ..., "message": ...}
    {"type": "log", "level": "info"|"warning"|"error", "message": ...}
    {"type": "result", "check": ..., "gpu": i|null, "value": x|null, "unit": ..., "status":
     "ok"|"inconclusive"|"skipped", "reason": ..., "harness": "gpu"|"cpu"|"simulated",
     "simulated": bool, "facts"/"details": {...}}
    {"type": "summary", ...}   (always last, also after a timeout or an error)

It reports raw figures and facts; gpuws scores them against the card's datasheet. Anything that
could not run is reported "inconclusive" with the reason, never left out (no silent pass).

No false pass, by construction: every element of every GEMM is verified by banded Huang-Abraham
checksums in float64 (see CHECKSUM_ROUNDOFF), and its answers are checked against a float64
product on sampled rows and columns over every output tile (per-format tolerances; a non-finite
element is wrong), on every backend; the stress GEMM's first product gets the same checks and
every later one is compared bit for bit with it (the same product on the same card is
deterministic); every measured copy is checked byte for byte afterwards; a timed check that ran
less than 90% of its asked duration, or (on a GPU) recorded no telemetry, is inconclusive. CUDA
devices are matched to nvidia-smi's GPUs by UUID; a GPU CUDA cannot see is inconclusive with the
reason. Throughput figures are the median of repeated timed windows (each at least 10 ms, after a
warm-up of at least 200 ms), with the sustained (10th percentile) and peak windows beside it.
A GPU already running compute processes is measured only
with --allow-busy. Non-finite numbers are sent as strings with a reason: the output is always JSON.

Backends, in order: PyTorch+CUDA, CuPy, CUDA C via nvcc+cuBLAS (bench_kernels.cu beside this
file). Without a GPU toolchain it says what to install, and where NumPy or CPU PyTorch exists it
runs the same harness on the CPU with small sizes, labelled "cpu" (a test of the harness, not a
GPU measurement). On the gpuws simulated GPU host it produces plausible simulated figures, each
labelled "simulated".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

PROTOCOL = 1
NO_TOOLCHAIN = (
    "no CUDA toolchain: install PyTorch with CUDA (pip install torch) or CuPy, or the CUDA toolkit (nvcc)"
)
CPU_LABEL = "CPU harness check \u2014 not a GPU measurement"
SIM_MARKER = "gpuws-simulated-gpu-host"
SIM_FAULTS_ENV = "GPUWS_SIM_FAULTS"  # faults the gpuws simulated host plays (see gpuws/sim/faults.py)
SIM_JOBS_PAUSED_ENV = "GPUWS_SIM_JOBS_PAUSED"
SIM_FAULT_KINDS = ("bench-nan", "copy-corrupt", "busy", "throttle", "slow-link", "gemm-wrong", "cuda-invisible",
                   "fabric-down", "gemm-element", "gemm-tile")
# A timed check that ran less than this share of the time it asked for proves nothing.
MIN_RUN_SHARE = 0.9
# A GPU at or above this utilisation before the run is in use, processes listed or not (containers
# often cannot see other containers' processes).
BUSY_UTILIZATION_PCT = 20
GEMM_CHECKS = ("gemm_fp32", "gemm_tf32", "gemm_fp16", "gemm_bf16", "gemm_fp8")
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

# Sizes per harness and mode. GPU sizes reach the plateau of a modern card; CPU sizes only
# exercise the code paths quickly.
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "gpu": {
        "quick": {"gemm_n": 8192, "warmup": 3, "repeats": 8, "mem_bytes": 1 << 30, "xfer_bytes": 256 << 20,
                  "p2p_bytes": 256 << 20, "stress_s": 10.0, "stress_n": 8192, "all_pairs": False,
                  "windows": 12, "window_s": 0.05},
        "full": {"gemm_n": 8192, "warmup": 5, "repeats": 30, "mem_bytes": 2 << 30, "xfer_bytes": 1 << 30,
                 "p2p_bytes": 1 << 30, "stress_s": 60.0, "stress_n": 8192, "all_pairs": True,
                 "windows": 30, "window_s": 0.2},
    },
    "cpu": {
        "quick": {"gemm_n": 256, "warmup": 1, "repeats": 3, "mem_bytes": 8 << 20, "xfer_bytes": 8 << 20,
                  "p2p_bytes": 8 << 20, "stress_s": 1.0, "stress_n": 128, "all_pairs": False,
                  "windows": 5, "window_s": 0.01},
        "full": {"gemm_n": 512, "warmup": 2, "repeats": 7, "mem_bytes": 32 << 20, "xfer_bytes": 32 << 20,
                 "p2p_bytes": 32 << 20, "stress_s": 5.0, "stress_n": 256, "all_pairs": True,
                 "windows": 9, "window_s": 0.02},
    },
}
OVERALL_TIMEOUT = {"quick": 90.0, "full": 330.0}
# Every GEMM answer is checked against a float64 product on a grid of sampled rows and columns,
# GEMM_SAMPLES_PER_TILE of each in every GEMM_TILE-wide band, so every output tile holds checked
# elements. An element is wrong when it is off by more than the tolerance times the largest
# reference element of its sampled row; a non-finite element is always wrong.
MIN_WARMUP_S = 0.2  # issue 25: 2-3 warm-up calls left clocks and caches cold
MIN_WINDOW_S = 0.01  # a timed window shorter than this is mostly launch and event overhead
GEMM_TILE = 128
GEMM_SAMPLES_PER_TILE = 2
# Measured on a healthy H200 (gpuws device check, 2026-12-04, n = 8192): fp32 4.5e-6 (PEDANTIC /
# no TF32), tf32 4.7e-4 through PyTorch but 3.3e-3 through cuBLAS CUBLAS_COMPUTE_32F_FAST_TF32,
# fp16 4.5e-4, bf16 3.6e-3, fp8 (fast accumulation, bf16 out) 7.0e-3. A wrong tile is off by O(1).
GEMM_TOLERANCE = {"gemm_fp32": 2e-5, "gemm_tf32": 1e-2, "gemm_fp16": 1e-2, "gemm_bf16": 1e-2, "gemm_fp8": 5e-2}
STRESS_TOLERANCE = {"fp32": 2e-5, "fp16": 1e-2, "bf16": 1e-2}


# Every element of every checked product is also covered by Huang-Abraham checksums (ABFT): per
# CHECKSUM_BAND-row band and column, the band's sum of C = A @ B against (e_band^T A) B, and per row
# and CHECKSUM_BAND-column band, C's sum against A (B e_band), all in float64 (the plain e^T(AB) vs
# (e^T A)B of Huang and Abraham, split into bands so that one wrong element stands out of the
# rounding noise of 32 elements, not 8192). A sum is wrong when it differs by more than
#   CHECKSUM_LAMBDA * sqrt(u_out^2 * sum(C^2) + rho^2 * sum_l(a^2 b^2)),  rho^2 = k u_acc^2 + (2 u_in)^2
#                                                                      + u_out^2 + g64^2,
# over the band's elements: u_out the output format's unit roundoff (each element rounded once; with
# a band of 32 <= CHECKSUM_LAMBDA^2 elements this term bounds even errors that all lean one way, by
# Cauchy-Schwarz), u_acc the accumulator's (k roundings of partial sums whose squares sum to at most
# k sum(a^2 b^2) in expectation), u_in the inputs' conversion (TF32), the u_out^2 once more for a
# split-K reduction rounded in the output format, g64 the float64 reference's own. The error terms
# are rounding errors of random-sign products (the runner's inputs are zero-mean random), so their
# sum is bounded as Hoeffding bounds a sum of independent bounded terms: beyond 8 times the root
# sum of squares with probability under 2 exp(-32) = 2.5e-14 per sum.
CHECKSUM_BAND = 32
CHECKSUM_LAMBDA = 8.0
# Unit roundoff (in, accumulate, out) per format. TF32 keeps 10 mantissa bits (truncating: <= 2^-10),
# but cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32 on the H200 recording erred as bf16 inputs do (3.3e-3 of the
# row's largest element, torch's TF32 4.9e-4): 2^-8. FP8 with fast accumulation keeps about 14 bits
# in the tensor core's accumulator (DeepSeek-V3 technical report, 3.3.2): 2^-13; its output is bf16.
CHECKSUM_ROUNDOFF = {
    "fp32": (0.0, 2.0**-24, 2.0**-24),
    "tf32": (2.0**-8, 2.0**-24, 2.0**-24),
    "fp16": (0.0, 2.0**-24, 2.0**-11),
    "bf16": (0.0, 2.0**-24, 2.0**-8),
    "fp8": (0.0, 2.0**-13, 2.0**-8),
}


class CheckError(Exception):
    """A check could not run; the message is the reason shown to the user."""


class Deadline(Exception):
    """The overall timeout was reached."""


# ----------------------------------------------------------------------------------- output


def jsonable(obj: Any) -> Any:
    """`obj` with every non-finite float replaced by a string saying so, so that
    `json.dumps(allow_nan=False)` never fails and no NaN is read as a number downstream."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return f"{obj!r} (not a finite number)"
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj


class Emitter:
    """Writes JSON lines; a closed stdout (the client went away) ends the run at once."""

    def __init__(self, stream: Any = None) -> None:
        self._stream = stream or sys.stdout
        self._lock = threading.Lock()
        self.results: list[dict[str, Any]] = []

    def emit(self, obj: dict[str, Any]) -> None:
        """Write `obj` as one JSON line (NaN and infinity refused: the client parses strict JSON)."""
        line = json.dumps(jsonable(obj), default=str, allow_nan=False)
        with self._lock:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (BrokenPipeError, OSError):
                # Nobody is listening any more: stop the GPU work now rather than run on unseen.
                os._exit(141)

    def log(self, message: str, level: str = "info") -> None:
        """Emit a log line at `level`."""
        self.emit({"type": "log", "level": level, "message": message})

    def progress(self, step: int, total: int, check: str, message: str) -> None:
        """Emit step `step` of `total` (the check about to run)."""
        self.emit({"type": "progress", "step": step, "total": total, "check": check, "message": message})

    def result(self, check: str, *, gpu: int | None = None, value: float | None = None,
               unit: str | None = None, status: str = "ok", reason: str | None = None,
               harness: str = "gpu", simulated: bool = False, **extra: Any) -> None:
        """Record and emit one check's result; a value that is not finite becomes inconclusive."""
        if value is not None and (math.isnan(value) or math.isinf(value)):
            value, status, reason = None, "inconclusive", reason or "measurement was not a finite number"
        obj: dict[str, Any] = {"type": "result", "check": check, "gpu": gpu, "value": value, "unit": unit,
                               "status": status, "reason": reason, "harness": harness, "simulated": simulated}
        if harness == "cpu":
            obj["label"] = CPU_LABEL
        obj.update(extra)
        self.results.append(obj)
        self.emit(obj)


# ------------------------------------------------------------------------ host facts (nvidia-smi)


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


def list_gpus() -> tuple[list[dict[str, Any]], str | None]:
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


def gpu_activity(gpus: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per GPU index: the compute processes on it (other than this runner) and its utilisation,
    read before anything is measured. A GPU with either is "busy"."""
    by_uuid = {g.get("uuid"): g["index"] for g in gpus if g.get("uuid")}
    activity: dict[int, dict[str, Any]] = {g["index"]: {"processes": 0, "pids": [], "utilization_pct": None,
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


def busy_reason(activity: dict[str, Any]) -> str:
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


# ------------------------------------------------------------------------------ telemetry


class Sampler:
    """Polls temperature, SM clock, power and throttle reasons while a check runs (NVML when it
    works, else nvidia-smi), so the stress check can say how the card held up."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        except Exception:
            self._nvml = None

    def _read(self) -> list[dict[str, Any]]:
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

    def summary(self, gpu: int, since: float | None = None, until: float | None = None) -> dict[str, Any]:
        """Clocks, power, temperature and throttle reasons of `gpu` between two monotonic times."""
        return summarize_samples([s for s in list(self.samples) if s.get("gpu") == gpu
                                  and (since is None or s.get("t", 0) >= since)
                                  and (until is None or s.get("t", 0) <= until)])


def summarize_samples(mine: list[dict[str, Any]]) -> dict[str, Any]:
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


# ------------------------------------------------------------------------------ backends


Verify = Callable[[], tuple[int, int]]  # () -> (bytes checked, bytes wrong)


class Backend:
    """Array operations the harness needs; one subclass per toolchain. `harness` is "gpu" or "cpu".

    Every copy factory returns the timed operation and a `verify` that compares the destination
    with what was sent (bytes checked, bytes wrong), as nvbandwidth does: a fast copy of the
    wrong bytes is a failure, not a figure.
    """

    name = "none"
    harness = "gpu"
    last_gemm: Any = None  # (a, b, {"c": product}) of the last make_gemm, for check_gemm

    def device_ids(self) -> list[int]:
        raise NotImplementedError

    def runtime_version(self) -> str | None:
        return None

    def device_identity(self, dev: int) -> tuple[str | None, str | None]:
        """(UUID, PCI bus id) of CUDA device `dev` as CUDA sees it; None where unknown."""
        return None, None

    def gemm_support(self, dev: int) -> dict[str, tuple[str, str] | None]:
        """For each GEMM check: None when it can run, else (status, reason)."""
        raise NotImplementedError

    def make_gemm(self, dev: int, check: str, n: int) -> Callable[[], object]:
        """The timed GEMM; it keeps its operands in `last_gemm` = (a, b, holder) for `check_gemm`,
        holder["c"] being the last product."""
        raise NotImplementedError

    def grid(self, dev: int, a: Any, b: Any, c: Any, rows: list[int], cols: list[int]) -> tuple[list[Any], list[Any]]:
        """The float64 reference and the answers on a grid of sampled rows and columns."""
        raise NotImplementedError

    def check_gemm(self, dev: int, check: str) -> dict[str, Any] | None:
        """The last timed GEMM's answers against float64 on sampled rows and columns over every
        output tile (None when this backend keeps no product to check)."""
        last = getattr(self, "last_gemm", None)
        if last is None:
            return None
        a, b, holder = last
        c = holder.get("c")
        if c is None:
            raise CheckError("the GEMM left no product to check")
        rows, cols = gemm_samples(int(a.shape[0])), gemm_samples(int(b.shape[1]))
        ref, got = self.grid(dev, a, b, c, rows, cols)
        return answer_check(ref, got, GEMM_TOLERANCE[check], rows, cols)

    def ops(self, dev: int) -> ArrayOps | None:
        """The array operations of this backend's arrays (None: it keeps no arrays here)."""
        return None

    def checksum(self, dev: int, a: Any, b: Any, c: Any, fmt: str) -> dict[str, Any] | None:
        """Every element of c = a @ b checked by `checksum_check`; a checksum that could not be
        computed (out of memory for the float64 copies) says why instead of passing."""
        ops = self.ops(dev)
        if ops is None:
            return None
        self.sync(dev)
        try:
            return checksum_check(ops, a, b, c, fmt)
        except Exception as exc:
            return {"method": "huang-abraham", "error": f"{type(exc).__name__}: {first_line(exc)}"}
        finally:
            self.release()

    def checksum_gemm(self, dev: int, check: str) -> dict[str, Any] | None:
        """The last timed GEMM's product, every element, by checksum (None when none was kept)."""
        last = getattr(self, "last_gemm", None)
        if last is None or last[2].get("c") is None:
            return None
        a, b, holder = last
        return self.checksum(dev, a, b, holder["c"], check[5:])

    def make_copy(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        raise NotImplementedError

    def make_triad(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        raise NotImplementedError

    def make_h2d(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        raise CheckError("host-to-device copies need a GPU")

    def make_d2h(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        raise CheckError("device-to-host copies need a GPU")

    def make_p2p(self, src: int, dst: int, nbytes: int) -> tuple[Callable[[], object], Verify, bool]:
        raise CheckError("peer-to-peer copies need two GPUs")

    def stress_dtype(self, dev: int) -> str:
        """The card's best tensor-core format for the stress GEMM (power reaches the limit)."""
        return "fp32"

    def make_stress(self, dev: int, n: int) -> StressState:
        raise NotImplementedError

    def sync(self, dev: int) -> None:
        """Wait until all work queued on `dev` is done."""

    def timer_start(self, dev: int) -> Any:
        self.sync(dev)
        return [time.perf_counter(), None]

    def timer_end(self, dev: int, token: Any) -> None:
        """Mark the end of the timed work (queued; no wait on a GPU)."""
        self.sync(dev)
        token[1] = time.perf_counter()

    def timer_elapsed(self, dev: int, token: Any) -> float:
        """Seconds between start and end marks, once the work is done."""
        return float(token[1]) - float(token[0])

    def timer_stop(self, dev: int, token: Any) -> float:
        self.timer_end(dev, token)
        return self.timer_elapsed(dev, token)

    def release(self) -> None:
        """Free what the last check allocated."""

    def is_alloc_error(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError)


class StressState:
    """Repeated GEMMs, each compared bit for bit with the first (as gpu-burn does, but exact:
    the same product on the same card is deterministic), non-finite elements counted as wrong."""

    dtype = "fp32"
    flops_per_step = 0.0

    def verify_reference(self) -> dict[str, Any]:
        """The first product against float64 on sampled rows and columns over every output tile
        (a unit that is wrong the same way every time matches itself in the later comparisons)."""
        raise NotImplementedError

    def checksum_reference(self) -> dict[str, Any] | None:
        """Every element of the first product by checksum (`checksum_check`): an element wrong
        the same way in every product matches itself bit for bit, so only this sees it."""
        return None

    def step(self) -> None:
        """One GEMM plus its comparison with the first (counted on the device, no sync)."""
        raise NotImplementedError

    def mismatches(self) -> int:
        raise NotImplementedError


def gemm_samples(n: int, per_tile: int = GEMM_SAMPLES_PER_TILE, tile: int = GEMM_TILE) -> list[int]:
    """Row (or column) indices to check: `per_tile` in every `tile`-wide band of 0..n-1, at
    offsets that differ from band to band (a fault at a fixed offset in every tile is still hit)."""
    picks: list[int] = []
    for start in range(0, n, tile):
        width = min(tile, n - start)
        for k in range(per_tile):
            offset = (start // tile * 37 + k * (width // per_tile + 13)) % width
            if start + offset not in picks:
                picks.append(start + offset)
    return picks


def answer_check(ref: list[list[float]], got: list[list[float]], tolerance: float,
                 rows: list[int] | None = None, cols: list[int] | None = None) -> dict[str, Any]:
    """Compare a sampled grid of a product (`got`) with its float64 reference (`ref`): per row,
    the error relative to the row's largest reference element. Non-finite answers are wrong."""
    wrong = nonfinite = checked = 0
    worst = 0.0
    first: list[int] | None = None
    if len(ref) != len(got) or any(len(a) != len(b) for a, b in zip(ref, got)):  # noqa: B905 - lengths checked here
        raise CheckError("the answer check got grids of different shapes")
    for i, (ref_row, got_row) in enumerate(zip(ref, got)):  # noqa: B905 - equal lengths, checked above
        scale = max((abs(x) for x in ref_row if math.isfinite(x)), default=0.0) or 1.0
        for j, (want, have) in enumerate(zip(ref_row, got_row)):  # noqa: B905
            checked += 1
            if not math.isfinite(have):
                nonfinite += 1
                bad, rel = True, math.inf
            else:
                rel = abs(have - want) / scale
                bad = not rel <= tolerance
            worst = max(worst, rel)
            if bad:
                wrong += 1
                if first is None:
                    first = [rows[i] if rows else i, cols[j] if cols else j]
    return {"checked": checked, "wrong": wrong, "nonfinite": nonfinite, "max_rel_error": worst,
            "tolerance": tolerance, "first_wrong": first, "rows": len(ref), "cols": len(ref[0]) if ref else 0}


class ArrayOps:
    """What the checksum needs of an array module, the same for NumPy and CuPy (`xp`); PyTorch's
    differences are in `TorchOps`. Everything stays on the arrays' device; only counts come back."""

    def __init__(self, xp: Any) -> None:
        self.xp = xp

    def wide(self, x: Any) -> Any:
        """`x` as float64, on its device."""
        return x.astype(self.xp.float64)

    def bands(self, n: int, like: Any) -> Any:
        """The n x ceil(n / CHECKSUM_BAND) float64 matrix whose column b sums band b."""
        xp = self.xp
        count = -(-n // CHECKSUM_BAND)
        return self.wide(xp.arange(n)[:, None] // CHECKSUM_BAND == xp.arange(count)[None, :])

    def count(self, mask: Any) -> int:
        return int(mask.sum())

    def first(self, mask: Any) -> int:
        """The flat index of the first True of `mask` (row-major), -1 when none."""
        return int(self.wide(mask).argmax()) if self.count(mask) else -1

    def largest(self, x: Any) -> float:
        return float(x.max()) if x.size else 0.0


class TorchOps(ArrayOps):
    def wide(self, x: Any) -> Any:
        t = self.xp
        # FP8 converts to float64 only through float32; a bool mask converts directly.
        return x.to(t.float64) if x.dtype in (t.bool, t.float64) else x.to(t.float32).to(t.float64)

    def bands(self, n: int, like: Any) -> Any:
        t = self.xp
        count = -(-n // CHECKSUM_BAND)
        rows = t.arange(n, device=like.device)[:, None] // CHECKSUM_BAND
        return (rows == t.arange(count, device=like.device)[None, :]).to(t.float64)

    def largest(self, x: Any) -> float:
        return float(x.max()) if x.numel() else 0.0


def checksum_check(ops: ArrayOps, a: Any, b: Any, c: Any, fmt: str) -> dict[str, Any]:
    """Every element of c = a @ b verified by banded Huang-Abraham checksums in float64 (see
    CHECKSUM_ROUNDOFF): the sums wrong, the non-finite elements of c, the worst sum's error as a
    share of its tolerance, and where the first wrong sum points (row of the first wrong row sum,
    column of the first wrong column sum: the element itself when one element is wrong)."""
    xp = ops.xp
    u_in, u_acc, u_out = CHECKSUM_ROUNDOFF[fmt]
    n, k = int(a.shape[0]), int(a.shape[1])
    m = int(b.shape[1])
    if int(b.shape[0]) != k or tuple(int(x) for x in c.shape) != (n, m):
        raise CheckError("the checksum got matrices of different shapes")
    g64 = (k + CHECKSUM_BAND) * 2.0**-53 * math.sqrt(CHECKSUM_BAND * k)
    rho2 = k * u_acc**2 + (2 * u_in) ** 2 + u_out**2 + g64**2
    # A NaN or infinity in c makes NaN sums, which is the point: no warning about them.
    quiet = getattr(xp, "errstate", None)
    with quiet(all="ignore") if quiet is not None else contextlib.nullcontext():
        return _checksums(ops, a, b, c, fmt, rho2, u_in, u_acc, u_out)


def _checksums(ops: ArrayOps, a: Any, b: Any, c: Any, fmt: str, rho2: float, u_in: float, u_acc: float,
               u_out: float) -> dict[str, Any]:
    xp = ops.xp
    n, m = int(c.shape[0]), int(c.shape[1])
    a64, b64, c64 = ops.wide(a), ops.wide(b), ops.wide(c)
    nonfinite = n * m - ops.count(xp.isfinite(c64))
    a2, b2, c2 = a64 * a64, b64 * b64, c64 * c64
    row_bands, col_bands = ops.bands(n, a64), ops.bands(m, b64)
    wrong, first, worst = 0, [-1, -1], 0.0
    # Column sums per band of rows: e_b^T C against (e_b^T A) B; then row sums per band of columns.
    sides = ((row_bands.T @ c64, (row_bands.T @ a64) @ b64, row_bands.T @ c2, (row_bands.T @ a2) @ b2),
             (c64 @ col_bands, a64 @ (b64 @ col_bands), c2 @ col_bands, a2 @ (b2 @ col_bands)))
    for side, (got, want, out2, terms2) in enumerate(sides):
        tolerance = CHECKSUM_LAMBDA * xp.sqrt(u_out**2 * out2 + rho2 * terms2)
        error = xp.abs(got - want)
        bad = ~(error <= tolerance)  # a NaN or infinity is never within tolerance
        wrong += ops.count(bad)
        share = error / (tolerance + 1e-300)
        worst = max(worst, ops.largest(xp.where(xp.isfinite(share), share, xp.zeros_like(share))))
        at = ops.first(bad)
        if at >= 0:
            width = int(bad.shape[1])
            # Row sums name the row (side 1), column sums the column (side 0).
            first[1 - side] = at // width if side == 1 else at % width
            if first[side] < 0:
                first[side] = (at % width) * CHECKSUM_BAND if side == 1 else (at // width) * CHECKSUM_BAND
    return {"method": "huang-abraham", "band": CHECKSUM_BAND, "elements": n * m,
            "sums": int(row_bands.shape[1]) * m + n * int(col_bands.shape[1]), "wrong": wrong,
            "nonfinite": nonfinite, "max_share_of_tolerance": round(worst, 6),
            "first_wrong": first if wrong or nonfinite else None, "lambda": CHECKSUM_LAMBDA,
            "unit_roundoff": {"in": u_in, "accumulate": u_acc, "out": u_out}}


def torch_grid(t: Any, a: Any, b: Any, c: Any, rows: list[int], cols: list[int]) -> tuple[list[Any], list[Any]]:
    """The float64 product of rows x cols of a @ b, and the same elements of c (PyTorch)."""
    r = t.tensor(rows, device=a.device)
    k = t.tensor(cols, device=b.device)

    def wide(x: Any) -> Any:  # FP8 converts to float64 only through float32
        return x.to(t.float32).to(t.float64)

    ref = wide(a.index_select(0, r)) @ wide(b.index_select(1, k))
    got = wide(c.index_select(0, r).index_select(1, k))
    return ref.cpu().tolist(), got.cpu().tolist()


def array_grid(xp: Any, a: Any, b: Any, c: Any, rows: list[int], cols: list[int]) -> tuple[list[Any], list[Any]]:
    """The same for NumPy or CuPy arrays (`xp` is the module)."""
    r, k = xp.asarray(rows), xp.asarray(cols)
    ref = a[r].astype(xp.float64) @ b[:, k].astype(xp.float64)
    got = c[r][:, k].astype(xp.float64)
    if hasattr(ref, "get"):
        ref, got = ref.get(), got.get()
    return ref.tolist(), got.tolist()


class TorchBackend(Backend):
    """PyTorch on CUDA (events for timing) or, with cuda=False, on the CPU (the harness check)."""

    def __init__(self, torch: Any, cuda: bool) -> None:
        self.t = torch
        self.cuda = cuda
        self.name = "torch-cuda" if cuda else "torch-cpu"
        self.harness = "gpu" if cuda else "cpu"

    def _dev(self, dev: int) -> Any:
        return self.t.device(f"cuda:{dev}") if self.cuda else self.t.device("cpu")

    def device_ids(self) -> list[int]:
        return list(range(self.t.cuda.device_count())) if self.cuda else [0]

    def runtime_version(self) -> str | None:
        return str(self.t.version.cuda) if self.cuda else None

    def device_identity(self, dev: int) -> tuple[str | None, str | None]:
        if not self.cuda:
            return None, None
        props = self.t.cuda.get_device_properties(dev)
        uuid = getattr(props, "uuid", None)
        bus = None
        if getattr(props, "pci_bus_id", None) is not None:
            bus = f"{int(getattr(props, 'pci_domain_id', 0)):08x}:{int(props.pci_bus_id):02x}:" \
                  f"{int(getattr(props, 'pci_device_id', 0)):02x}.0"
        return (str(uuid) if uuid is not None else None), bus

    def gemm_support(self, dev: int) -> dict[str, tuple[str, str] | None]:
        t = self.t
        support: dict[str, tuple[str, str] | None] = dict.fromkeys(GEMM_CHECKS)
        if not self.cuda:
            support["gemm_tf32"] = ("inconclusive", "TF32 is a GPU tensor-core format")
            support["gemm_fp8"] = ("inconclusive", "FP8 GEMM needs a GPU")
            return support
        major, minor = t.cuda.get_device_capability(dev)
        if major < 8:
            support["gemm_tf32"] = ("skipped", "TF32 needs compute capability 8.0 or newer")
            support["gemm_bf16"] = ("skipped", "BF16 tensor cores need compute capability 8.0 or newer")
        if (major, minor) < (8, 9):
            support["gemm_fp8"] = ("skipped", "FP8 needs compute capability 8.9 or newer (Ada, Hopper)")
        elif not (hasattr(t, "_scaled_mm") and hasattr(t, "float8_e4m3fn")):
            support["gemm_fp8"] = ("inconclusive", f"this PyTorch ({t.__version__}) has no FP8 GEMM (_scaled_mm)")
        return support

    def _randn(self, shape: tuple[int, ...], dtype: Any, dev: int) -> Any:
        return self.t.randn(*shape, dtype=dtype, device=self._dev(dev))

    def make_gemm(self, dev: int, check: str, n: int) -> Callable[[], object]:
        t = self.t
        if check == "gemm_fp8":
            a = self._randn((n, n), t.bfloat16, dev).to(t.float8_e4m3fn)
            # _scaled_mm wants its second operand column-major.
            b = self._randn((n, n), t.bfloat16, dev).to(t.float8_e4m3fn).t().contiguous().t()
            one = t.ones((), dtype=t.float32, device=self._dev(dev))
            holder: dict[str, Any] = {}
            self.last_gemm = (a, b, holder)

            def fp8() -> None:
                # The datasheet's dense FP8 peak is with fast accumulation; without it a healthy
                # Hopper card measures well below and would warn.
                holder["c"] = t._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=t.bfloat16,
                                           use_fast_accum=True)

            return fp8
        dtype = {"gemm_fp32": t.float32, "gemm_tf32": t.float32, "gemm_fp16": t.float16,
                 "gemm_bf16": t.bfloat16}[check]
        a, b = self._randn((n, n), dtype, dev), self._randn((n, n), dtype, dev)
        c = t.empty((n, n), dtype=dtype, device=self._dev(dev))
        tf32 = check == "gemm_tf32"
        self.last_gemm = (a, b, {"c": c})

        def gemm() -> None:
            if self.cuda:
                # Set on every call: fp32 must not silently run on TF32 tensor cores and vice versa.
                t.backends.cuda.matmul.allow_tf32 = tf32
                t.backends.cudnn.allow_tf32 = tf32
            t.matmul(a, b, out=c)

        return gemm

    def grid(self, dev: int, a: Any, b: Any, c: Any, rows: list[int], cols: list[int]) -> tuple[list[Any], list[Any]]:
        self.sync(dev)
        return torch_grid(self.t, a, b, c, rows, cols)

    def ops(self, dev: int) -> ArrayOps | None:
        return TorchOps(self.t)

    def _pattern(self, nbytes: int, dev: int | None) -> Any:
        """A byte pattern no stale buffer holds by chance (0..250 repeating)."""
        device = self.t.device("cpu") if dev is None else self._dev(dev)
        # Built from one 251-byte period: no int32 temporaries four times the buffer (full mode's
        # 2 GiB pattern once took 16 GiB and put 16 GB cards out of memory).
        period = self.t.arange(251, dtype=self.t.uint8, device=device)
        return period.repeat(-(-nbytes // 251))[:nbytes]

    def _verify(self, got: Any, want: Any) -> Verify:
        return lambda: (int(want.numel()), int((got != want).sum()))

    def make_copy(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        src = self._pattern(nbytes, dev)
        dst = self.t.zeros_like(src)
        return (lambda: dst.copy_(src)), self._verify(dst, src)

    def make_triad(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        n = nbytes // 4
        b = self.t.ones(n, dtype=self.t.float32, device=self._dev(dev))
        c = self.t.ones_like(b)
        a = self.t.zeros_like(b)
        # 1 + 3 * 1 is exact in FP32: every element must be 4 (a NaN is != 4, so it counts).
        return (lambda: self.t.add(b, c, alpha=3.0, out=a)), (lambda: (n * 4, 4 * int((a != 4.0).sum())))

    def make_h2d(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        if not self.cuda:
            raise CheckError("host-to-device copies need a GPU")
        host = self._pattern(nbytes, None).pin_memory()
        devbuf = self.t.zeros(nbytes, dtype=self.t.uint8, device=self._dev(dev))
        # Compared on the device with the same pattern made there: no second copy to trust.
        return (lambda: devbuf.copy_(host, non_blocking=True)), \
            (lambda: self._verify(devbuf, self._pattern(nbytes, dev))())

    def make_d2h(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        if not self.cuda:
            raise CheckError("device-to-host copies need a GPU")
        host = self.t.zeros(nbytes, dtype=self.t.uint8).pin_memory()
        devbuf = self._pattern(nbytes, dev)

        def verify() -> tuple[int, int]:
            self.sync(dev)
            return self._verify(host, self._pattern(nbytes, None))()

        return (lambda: host.copy_(devbuf, non_blocking=True)), verify

    def make_p2p(self, src: int, dst: int, nbytes: int) -> tuple[Callable[[], object], Verify, bool]:
        if not self.cuda:
            raise CheckError("peer-to-peer copies need two GPUs")
        peer = bool(self.t.cuda.can_device_access_peer(dst, src))
        a = self._pattern(nbytes, src)
        b = self.t.zeros(nbytes, dtype=self.t.uint8, device=self._dev(dst))
        return (lambda: b.copy_(a, non_blocking=True)), \
            (lambda: self._verify(b, self._pattern(nbytes, dst))()), peer

    def stress_dtype(self, dev: int) -> str:
        if not self.cuda:
            return "fp32"
        major, _ = self.t.cuda.get_device_capability(dev)
        return "bf16" if major >= 8 else "fp16" if major >= 7 else "fp32"

    def make_stress(self, dev: int, n: int) -> StressState:
        return TorchStress(self, dev, n, self.stress_dtype(dev))

    def sync(self, dev: int) -> None:
        if self.cuda:
            self.t.cuda.synchronize(dev)

    def timer_start(self, dev: int) -> Any:
        if not self.cuda:
            return super().timer_start(dev)
        with self.t.cuda.device(dev):
            start = self.t.cuda.Event(enable_timing=True)
            end = self.t.cuda.Event(enable_timing=True)
            start.record()
        return (start, end)

    def timer_end(self, dev: int, token: Any) -> None:
        if not self.cuda:
            return super().timer_end(dev, token)
        with self.t.cuda.device(dev):
            token[1].record()
        return None

    def timer_elapsed(self, dev: int, token: Any) -> float:
        if not self.cuda:
            return super().timer_elapsed(dev, token)
        start, end = token
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0

    def release(self) -> None:
        if self.cuda:
            self.t.cuda.empty_cache()

    def is_alloc_error(self, exc: BaseException) -> bool:
        oom = getattr(self.t.cuda, "OutOfMemoryError", None)
        return isinstance(exc, MemoryError) or (oom is not None and isinstance(exc, oom)) \
            or "out of memory" in str(exc).lower()


class TorchStress(StressState):
    def __init__(self, backend: TorchBackend, dev: int, n: int, dtype: str = "fp32") -> None:
        t = self.t = backend.t
        self.backend = backend
        self.dev = dev
        self.dtype = dtype
        if backend.cuda:
            t.backends.cuda.matmul.allow_tf32 = False  # fp32 stays fp32
        d = backend._dev(dev)
        tdtype = {"fp32": t.float32, "bf16": t.bfloat16, "fp16": t.float16}[dtype]
        self.bits = t.int32 if dtype == "fp32" else t.int16
        self.a = t.randn(n, n, dtype=t.float32, device=d).to(tdtype)
        self.b = t.randn(n, n, dtype=t.float32, device=d).to(tdtype)
        self.ref = t.matmul(self.a, self.b)  # the first iteration: every later one must equal it
        self.c = t.empty_like(self.ref)
        # Non-finite elements of the first product count once; later ones count every time.
        self.bad = (~t.isfinite(self.ref)).sum().to(t.int64)
        self.flops_per_step = 2.0 * n**3

    def verify_reference(self) -> dict[str, Any]:
        rows, cols = gemm_samples(int(self.a.shape[0])), gemm_samples(int(self.b.shape[1]))
        ref, got = torch_grid(self.t, self.a, self.b, self.ref, rows, cols)
        return answer_check(ref, got, STRESS_TOLERANCE[self.dtype], rows, cols)

    def checksum_reference(self) -> dict[str, Any] | None:
        return self.backend.checksum(self.dev, self.a, self.b, self.ref, self.dtype)

    def step(self) -> None:
        t = self.t
        t.matmul(self.a, self.b, out=self.c)
        self.bad += (self.c.view(self.bits) != self.ref.view(self.bits)).sum()
        self.bad += (~t.isfinite(self.c)).sum()

    def mismatches(self) -> int:
        return int(self.bad)


class NumpyBackend(Backend):
    """NumPy on the CPU: only for the harness check on machines without a GPU toolchain."""

    name = "numpy-cpu"
    harness = "cpu"

    def __init__(self, np: Any) -> None:
        self.np = np
        self.rng = np.random.default_rng(0)

    def device_ids(self) -> list[int]:
        return [0]

    def gemm_support(self, dev: int) -> dict[str, tuple[str, str] | None]:
        return {"gemm_fp32": None, "gemm_fp16": None,
                "gemm_tf32": ("inconclusive", "TF32 is a GPU tensor-core format"),
                "gemm_bf16": ("inconclusive", "NumPy has no bfloat16"),
                "gemm_fp8": ("inconclusive", "FP8 GEMM needs a GPU")}

    def make_gemm(self, dev: int, check: str, n: int) -> Callable[[], object]:
        np = self.np
        # NumPy's float16 matmul has no BLAS behind it: keep it small.
        dtype = np.float16 if check == "gemm_fp16" else np.float32
        n = min(n, 128) if check == "gemm_fp16" else n
        a = self.rng.standard_normal((n, n)).astype(dtype)
        b = self.rng.standard_normal((n, n)).astype(dtype)
        c = np.empty((n, n), dtype=dtype)
        self.last_gemm_n = n
        self.last_gemm = (a, b, {"c": c})
        return lambda: np.matmul(a, b, out=c)

    def grid(self, dev: int, a: Any, b: Any, c: Any, rows: list[int], cols: list[int]) -> tuple[list[Any], list[Any]]:
        return array_grid(self.np, a, b, c, rows, cols)

    def ops(self, dev: int) -> ArrayOps | None:
        return ArrayOps(self.np)

    def _pattern(self, nbytes: int) -> Any:
        return self.np.tile(self.np.arange(251, dtype=self.np.uint8), -(-nbytes // 251))[:nbytes]

    def make_copy(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        src = self._pattern(nbytes)
        dst = self.np.zeros_like(src)
        return (lambda: self.np.copyto(dst, src)), (lambda: (nbytes, int(self.np.count_nonzero(dst != src))))

    def make_triad(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        np = self.np
        n = nbytes // 4
        b = np.ones(n, dtype=np.float32)
        c = np.ones_like(b)
        a = np.zeros_like(b)

        def triad() -> None:
            np.multiply(c, 3.0, out=a)
            np.add(a, b, out=a)

        return triad, (lambda: (n * 4, 4 * int(np.count_nonzero(a != 4.0))))

    def make_stress(self, dev: int, n: int) -> StressState:
        return NumpyStress(self, n)


class NumpyStress(StressState):
    def __init__(self, backend: NumpyBackend, n: int) -> None:
        np = self.np = backend.np
        self.backend = backend
        self.a = backend.rng.standard_normal((n, n)).astype(np.float32)
        self.b = backend.rng.standard_normal((n, n)).astype(np.float32)
        self.ref = self.a @ self.b  # the first iteration
        self.c = np.empty_like(self.ref)
        self.bad = int(np.count_nonzero(~np.isfinite(self.ref)))
        self.flops_per_step = 2.0 * n**3

    def verify_reference(self) -> dict[str, Any]:
        rows, cols = gemm_samples(int(self.a.shape[0])), gemm_samples(int(self.b.shape[1]))
        ref, got = array_grid(self.np, self.a, self.b, self.ref, rows, cols)
        return answer_check(ref, got, STRESS_TOLERANCE["fp32"], rows, cols)

    def checksum_reference(self) -> dict[str, Any] | None:
        return self.backend.checksum(0, self.a, self.b, self.ref, "fp32")

    def step(self) -> None:
        np = self.np
        np.matmul(self.a, self.b, out=self.c)
        # Bit for bit: a NaN differs from everything, also from a NaN at the same place.
        self.bad += int(np.count_nonzero(self.c.view(np.uint32) != self.ref.view(np.uint32)))
        self.bad += int(np.count_nonzero(~np.isfinite(self.c)))

    def mismatches(self) -> int:
        return self.bad


class CupyBackend(Backend):
    """CuPy on CUDA: the fallback when PyTorch is missing. No TF32/BF16/FP8 GEMM here."""

    name = "cupy"
    harness = "gpu"

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self._triad = cp.ElementwiseKernel("T b, T c, T s", "T a", "a = b + s * c", "gpuws_triad")

    def device_ids(self) -> list[int]:
        return list(range(self.cp.cuda.runtime.getDeviceCount()))

    def runtime_version(self) -> str | None:
        v = int(self.cp.cuda.runtime.runtimeGetVersion())
        return f"{v // 1000}.{(v % 1000) // 10}"

    def device_identity(self, dev: int) -> tuple[str | None, str | None]:
        props = self.cp.cuda.runtime.getDeviceProperties(dev)
        raw = props.get("uuid")
        uuid = None
        if isinstance(raw, (bytes, bytearray)) and len(raw) == 16:
            h = raw.hex()
            uuid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        bus = None
        if props.get("pciBusID") is not None:
            bus = (f"{int(props.get('pciDomainID', 0)):08x}:{int(props['pciBusID']):02x}:"
                   f"{int(props.get('pciDeviceID', 0)):02x}.0")
        return uuid, bus

    def gemm_support(self, dev: int) -> dict[str, tuple[str, str] | None]:
        why = "not measured with the CuPy backend (install PyTorch with CUDA for it)"
        return {"gemm_fp32": None, "gemm_fp16": None, "gemm_tf32": ("inconclusive", "TF32 " + why),
                "gemm_bf16": ("inconclusive", "BF16 " + why), "gemm_fp8": ("inconclusive", "FP8 " + why)}

    def make_gemm(self, dev: int, check: str, n: int) -> Callable[[], object]:
        cp = self.cp
        dtype = cp.float16 if check == "gemm_fp16" else cp.float32
        with cp.cuda.Device(dev):
            a = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dtype)
            b = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dtype)
            c = cp.empty((n, n), dtype=dtype)
        self.last_gemm = (a, b, {"c": c})

        def gemm() -> None:
            with cp.cuda.Device(dev):
                cp.matmul(a, b, out=c)

        return gemm

    def grid(self, dev: int, a: Any, b: Any, c: Any, rows: list[int], cols: list[int]) -> tuple[list[Any], list[Any]]:
        with self.cp.cuda.Device(dev):
            return array_grid(self.cp, a, b, c, rows, cols)

    def ops(self, dev: int) -> ArrayOps | None:
        return ArrayOps(self.cp)

    def checksum(self, dev: int, a: Any, b: Any, c: Any, fmt: str) -> dict[str, Any] | None:
        with self.cp.cuda.Device(dev):  # CuPy allocates on the current device
            return super().checksum(dev, a, b, c, fmt)

    def _pattern(self, nbytes: int, dev: int) -> Any:
        cp = self.cp
        with cp.cuda.Device(dev):
            return cp.tile(cp.arange(251, dtype=cp.uint8), -(-nbytes // 251))[:nbytes]

    def _count_wrong(self, got: Any, want: Any, dev: int) -> tuple[int, int]:
        with self.cp.cuda.Device(dev):
            return int(want.size), int(self.cp.count_nonzero(got != want))

    def make_copy(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        cp = self.cp
        src = self._pattern(nbytes, dev)
        with cp.cuda.Device(dev):
            dst = cp.zeros_like(src)
        return (lambda: cp.copyto(dst, src)), (lambda: self._count_wrong(dst, src, dev))

    def make_triad(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        cp = self.cp
        with cp.cuda.Device(dev):
            b = cp.ones(nbytes // 4, dtype=cp.float32)
            c = cp.ones_like(b)
            a = cp.zeros_like(b)
        s = cp.float32(3.0)

        def verify() -> tuple[int, int]:
            with cp.cuda.Device(dev):
                return int(a.size) * 4, 4 * int(cp.count_nonzero(a != 4.0))

        return (lambda: self._triad(b, c, s, a)), verify

    def _pinned(self, nbytes: int) -> Any:
        import numpy as np

        mem = self.cp.cuda.alloc_pinned_memory(nbytes)
        return np.frombuffer(mem, dtype=np.uint8, count=nbytes)

    def make_h2d(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        import numpy as np

        host = self._pinned(nbytes)
        host[:] = np.tile(np.arange(251, dtype=np.uint8), -(-nbytes // 251))[:nbytes]
        with self.cp.cuda.Device(dev):
            devbuf = self.cp.zeros(nbytes, dtype=self.cp.uint8)
        return (lambda: devbuf.set(host)), (lambda: self._count_wrong(devbuf, self._pattern(nbytes, dev), dev))

    def make_d2h(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        import numpy as np

        host = self._pinned(nbytes)
        host[:] = 0
        devbuf = self._pattern(nbytes, dev)
        want = np.tile(np.arange(251, dtype=np.uint8), -(-nbytes // 251))[:nbytes]

        def verify() -> tuple[int, int]:
            self.sync(dev)
            return nbytes, int(np.count_nonzero(host != want))

        return (lambda: devbuf.get(out=host)), verify

    def make_p2p(self, src: int, dst: int, nbytes: int) -> tuple[Callable[[], object], Verify, bool]:
        cp = self.cp
        peer = bool(cp.cuda.runtime.deviceCanAccessPeer(dst, src))
        a = self._pattern(nbytes, src)
        with cp.cuda.Device(dst):
            b = cp.zeros(nbytes, dtype=cp.uint8)

        def copy() -> None:
            # Queued on the source device's current stream, so its events time the copy alone.
            with cp.cuda.Device(src):
                cp.cuda.runtime.memcpyPeerAsync(b.data.ptr, dst, a.data.ptr, src, nbytes,
                                                cp.cuda.get_current_stream().ptr)

        return copy, (lambda: self._count_wrong(b, self._pattern(nbytes, dst), dst)), peer

    def stress_dtype(self, dev: int) -> str:
        major = int(self.cp.cuda.Device(dev).compute_capability[:-1] or 0)
        return "fp16" if major >= 7 else "fp32"

    def make_stress(self, dev: int, n: int) -> StressState:
        return CupyStress(self, dev, n, self.stress_dtype(dev))

    def sync(self, dev: int) -> None:
        with self.cp.cuda.Device(dev):
            self.cp.cuda.Device(dev).synchronize()

    def timer_start(self, dev: int) -> Any:
        with self.cp.cuda.Device(dev):
            start, end = self.cp.cuda.Event(), self.cp.cuda.Event()
            start.record()
        return (start, end)

    def timer_end(self, dev: int, token: Any) -> None:
        with self.cp.cuda.Device(dev):
            token[1].record()

    def timer_elapsed(self, dev: int, token: Any) -> float:
        start, end = token
        with self.cp.cuda.Device(dev):
            end.synchronize()
        return float(self.cp.cuda.get_elapsed_time(start, end)) / 1000.0

    def release(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()

    def is_alloc_error(self, exc: BaseException) -> bool:
        return isinstance(exc, (MemoryError, self.cp.cuda.memory.OutOfMemoryError))


class CupyStress(StressState):
    def __init__(self, backend: CupyBackend, dev: int, n: int, dtype: str = "fp32") -> None:
        cp = backend.cp
        self.backend = backend
        self.cp, self.dev, self.dtype = cp, dev, dtype
        ctype = cp.float16 if dtype == "fp16" else cp.float32
        self.bits = cp.uint16 if dtype == "fp16" else cp.uint32
        with cp.cuda.Device(dev):
            self.a = cp.random.standard_normal((n, n), dtype=cp.float32).astype(ctype)
            self.b = cp.random.standard_normal((n, n), dtype=cp.float32).astype(ctype)
            self.ref = self.a @ self.b  # the first iteration
            self.c = cp.empty_like(self.ref)
            self.bad = cp.count_nonzero(~cp.isfinite(self.ref)).astype(cp.int64)
        self.flops_per_step = 2.0 * n**3

    def verify_reference(self) -> dict[str, Any]:
        rows, cols = gemm_samples(int(self.a.shape[0])), gemm_samples(int(self.b.shape[1]))
        with self.cp.cuda.Device(self.dev):
            ref, got = array_grid(self.cp, self.a, self.b, self.ref, rows, cols)
        return answer_check(ref, got, STRESS_TOLERANCE[self.dtype], rows, cols)

    def checksum_reference(self) -> dict[str, Any] | None:
        return self.backend.checksum(self.dev, self.a, self.b, self.ref, self.dtype)

    def step(self) -> None:
        cp = self.cp
        with cp.cuda.Device(self.dev):
            cp.matmul(self.a, self.b, out=self.c)
            self.bad += cp.count_nonzero(self.c.view(self.bits) != self.ref.view(self.bits))
            self.bad += cp.count_nonzero(~cp.isfinite(self.c))

    def mismatches(self) -> int:
        return int(self.bad)


def find_nvcc() -> str | None:
    """nvcc on PATH, else the newest /usr/local/cuda*/bin/nvcc (a non-interactive SSH shell often
    lacks /usr/local/cuda/bin on its PATH)."""
    found = shutil.which("nvcc")
    if found:
        return found
    import glob

    def version(path: str) -> tuple[int, ...]:
        tail = path.split("/usr/local/cuda", 1)[1].split("/")[0].lstrip("-")
        return tuple(int(p) for p in tail.split(".") if p.isdigit()) or (999,)  # /usr/local/cuda: the default

    candidates = [p for p in glob.glob("/usr/local/cuda*/bin/nvcc") if os.access(p, os.X_OK)]
    return max(candidates, key=version) if candidates else None


def build_timeout(left_s: float) -> float:
    """How long nvcc may take: never more than the run has left (minus time to measure)."""
    return max(0.0, min(240.0, left_s - 20.0))


def stderr_tail(text: str, lines: int = 12, limit: int = 1500) -> str:
    """The error lines of a tool's stderr (or its last lines): enough to see what went wrong."""
    all_lines = [line for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in all_lines if "error" in line.lower()]
    keep = (errors or all_lines)[-lines:]
    return " | ".join(keep)[-limit:] if keep else "no message"


class NvccBackend(Backend):
    """CUDA C (bench_kernels.cu beside this file) built with nvcc and cuBLAS.

    The binary measures one thing per invocation and prints the seconds of each timed window and
    what it verified; the medians and figures are computed by the same Python harness as for the
    other backends. It reports errors on stderr (and as JSON on stdout) with exit status 1.
    """

    name = "nvcc-cublas"
    harness = "gpu"

    def __init__(self, binary: str, gpus: list[dict[str, Any]]) -> None:
        self.binary = binary
        self.gpus = gpus
        self.extra: dict[str, Any] = {}
        # CUDA's own numbering and identities (`devices`), matched to nvidia-smi's by UUID.
        self.cuda_devices: list[dict[str, Any]] = [
            {"ordinal": g["index"], "uuid": None, "pci_bus_id": None,
             "compute_capability": g.get("compute_capability")} for g in gpus]
        with contextlib.suppress(Exception):
            proc = subprocess.run([binary, "devices"], capture_output=True, text=True, timeout=30, check=False)
            answer = json.loads(proc.stdout.strip().splitlines()[-1])
            found = answer.get("devices") if proc.returncode == 0 else None
            if isinstance(found, list) and all(isinstance(d, dict) and isinstance(d.get("ordinal"), int)
                                               for d in found):
                self.cuda_devices = found
            elif "no CUDA-capable device" in str(answer.get("error")):
                self.cuda_devices = []  # CUDA sees none of the GPUs nvidia-smi lists

    @classmethod
    def build(cls, workdir: str, gpus: list[dict[str, Any]], emitter: Emitter, timeout: float = 240.0,
              source: str | None = None) -> NvccBackend:
        source = source or os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_kernels.cu")
        if not os.path.exists(source):
            raise CheckError("bench_kernels.cu was not sent with the runner")
        if timeout <= 0:
            raise CheckError("no time left to build the CUDA C benchmark")
        binary = os.path.join(workdir, "gpuws_bench_kernels")
        nvcc = find_nvcc()
        if nvcc is None:
            raise CheckError("nvcc not found on PATH or under /usr/local/cuda*/bin")
        # Real code for each card's compute capability (plus its PTX): no JIT at the first kernel,
        # and a toolkit that cannot target the card fails here, not in the middle of a check.
        arch = sorted({str(g.get("compute_capability") or "").replace(".", "") for g in gpus} - {""})
        gencode = [f"-gencode=arch=compute_{a},code=[sm_{a},compute_{a}]" for a in arch if a.isdigit()]
        emitter.log(f"building the CUDA C benchmark with {nvcc} for sm_{', sm_'.join(arch) or '?'} "
                    f"(at most {timeout:g} s)")
        argv = [nvcc, "-O3", "-std=c++17", *gencode, "-o", binary, source, "-lcublas"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise CheckError(f"nvcc build took longer than {timeout:g} s") from None
        if proc.returncode != 0:
            raise CheckError("nvcc build failed: " + stderr_tail(proc.stderr or proc.stdout))
        return cls(binary, gpus)

    def device_ids(self) -> list[int]:
        return [int(d["ordinal"]) for d in self.cuda_devices]

    def device_identity(self, dev: int) -> tuple[str | None, str | None]:
        found = next((d for d in self.cuda_devices if d.get("ordinal") == dev), {})
        return found.get("uuid"), found.get("pci_bus_id")

    def _cc(self, dev: int) -> float:
        found = next((d for d in self.cuda_devices if d.get("ordinal") == dev), {})
        return to_float(found.get("compute_capability")) or 0.0

    def gemm_support(self, dev: int) -> dict[str, tuple[str, str] | None]:
        cc = self._cc(dev)
        support: dict[str, tuple[str, str] | None] = dict.fromkeys(GEMM_CHECKS)
        support["gemm_fp8"] = ("inconclusive", "FP8 GEMM is measured with the PyTorch backend only")
        if cc and cc < 8.0:
            support["gemm_tf32"] = ("skipped", "TF32 needs compute capability 8.0 or newer")
            support["gemm_bf16"] = ("skipped", "BF16 tensor cores need compute capability 8.0 or newer")
        return support

    def stress_dtype(self, dev: int) -> str:
        cc = self._cc(dev)
        return "bf16" if cc >= 8.0 else "fp16" if cc >= 7.0 else "fp32"

    def measured(self, what: str, dev: int, size: int, repeats: int, per_window: int = 0,
                 peer: int | None = None, timeout: float = 120.0, extra: str | None = None) -> dict[str, Any]:
        """Run one measurement; its JSON (seconds per window, verification, stress counts, answers)."""
        argv = [self.binary, what, str(dev), str(size), str(repeats), str(per_window)]
        if peer is not None:
            argv.append(str(peer))
        elif extra is not None:
            argv.append(extra)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise CheckError(f"{what}: no answer within {timeout:g} s") from None
        if proc.returncode != 0:
            raise CheckError(f"{what}: " + (stderr_tail(proc.stderr) if proc.stderr.strip()
                                            else f"exit status {proc.returncode}"))
        lines = proc.stdout.strip().splitlines()
        try:
            data = json.loads(lines[-1]) if lines else {}
        except ValueError:
            data = {}
        if not isinstance(data, dict) or "error" in data or "seconds" not in data:
            raise CheckError(f"{what}: " + str(data.get("error") if isinstance(data, dict) and "error" in data
                                               else "no result from the CUDA C benchmark"))
        self.extra = data
        return data

    def measured_times(self, dev: int, what: str, size: int, repeats: int) -> list[float]:
        return [float(x) for x in self.measured(what, dev, size, repeats)["seconds"]]


# ------------------------------------------------------------------------------ the harness


def median_or_none(times: list[float]) -> float | None:
    """The median of the positive times; None when there is none."""
    good = [t for t in times if t > 0]
    return statistics.median(good) if good else None


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of `values`, linearly interpolated."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def window_stats(rates: list[float]) -> dict[str, Any]:
    """Median, sustained (10th percentile) and peak of per-window throughputs."""
    return {"windows": len(rates), "median": round(statistics.median(rates), 3),
            "sustained_p10": round(percentile(rates, 10), 3), "peak": round(max(rates), 3),
            "per_window": [round(r, 3) for r in rates]}


def run_share_problem(ran: float, asked: float, what: str = "s") -> str | None:
    """Why a timed check that ran `ran` of `asked` proves nothing, or None when it ran enough."""
    if asked > 0 and ran < MIN_RUN_SHARE * asked:
        return (f"ran {ran:.3g} {what} of the {asked:.3g} {what} asked (under {MIN_RUN_SHARE:.0%}): "
                "cut short by the time limit")
    return None


class Harness:
    """Runs every check through one backend, with warmup, timing and medians done the same way
    whatever the backend, and reports each figure or why it could not be had."""

    def __init__(self, backend: Backend, emitter: Emitter, mode: str, deadline: float,
                 gpus: list[dict[str, Any]], sampler: Sampler | None = None,
                 busy: dict[int, dict[str, Any]] | None = None, smi_of: dict[int, int] | None = None) -> None:
        self.b = backend
        self.smi_of = smi_of or {}  # CUDA ordinal -> nvidia-smi index (results and telemetry use the latter)
        self.out = emitter
        self.mode = mode
        self.deadline = deadline
        self.gpus = gpus
        self.sizes = SIZES[backend.harness][mode]
        self.single_gemm: dict[int, float] = {}
        self.sampler = sampler
        self.busy = busy or {}

    def left(self) -> float:
        """Seconds left before the run's deadline."""
        return self.deadline - time.monotonic()

    def check_time(self) -> None:
        """Raise Deadline once the run's time is spent."""
        if self.left() <= 0:
            raise Deadline()

    def smi(self, dev: int) -> int:
        """The nvidia-smi index of CUDA device `dev`."""
        return self.smi_of.get(dev, dev)

    def _result(self, check: str, **kw: Any) -> None:
        for key in ("gpu", "peer"):
            if isinstance(kw.get(key), int):
                kw[key] = self.smi(kw[key])
        for key in ("src", "dst"):
            details = kw.get("details")
            if isinstance(details, dict) and isinstance(details.get(key), int):
                details[key] = self.smi(details[key])
        gpu = kw.get("gpu")
        if isinstance(gpu, int) and self.busy.get(gpu, {}).get("busy"):
            kw.setdefault("busy", self.busy[gpu])  # measured on a GPU in use (--allow-busy)
        self.out.result(check, harness=self.b.harness, **kw)

    def time_op(self, dev: int, fn: Callable[[], object], warmup: int, repeats: int) -> list[float]:
        """Seconds per call over `repeats` timed windows (each of at least MIN_WINDOW_S, events
        on a GPU), after the warm-up."""
        times, per = self.time_windows(dev, fn, warmup, repeats, 0.0)
        return [t / per for t in times]

    def time_windows(self, dev: int, fn: Callable[[], object], warmup: int, windows: int,
                     window_s: float) -> tuple[list[float], int]:
        """Seconds of each timed window of back-to-back calls, and the calls per window (sized
        from one timed call so that a window lasts about `window_s`, at least MIN_WINDOW_S).
        Warm-up first: at least `warmup` calls and at least MIN_WARMUP_S (clocks ramp up, cuBLAS
        picks its kernels, pinned pages settle)."""
        start, calls = time.perf_counter(), 0
        while calls < warmup or time.perf_counter() - start < MIN_WARMUP_S:
            fn()
            self.b.sync(dev)
            calls += 1
            if self.left() <= 0:
                break
        window_s = max(window_s, MIN_WINDOW_S)
        one = self.b.timer_start(dev)
        fn()
        single = self.b.timer_stop(dev, one)
        per = max(1, min(1000, math.ceil(window_s / single))) if single > 0 else 1
        times = []
        for _ in range(windows):
            if self.left() <= 0:
                break
            token = self.b.timer_start(dev)
            for _ in range(per):
                fn()
            self.b.timer_end(dev, token)
            times.append(self.b.timer_elapsed(dev, token))
        return times, per

    def guarded(self, check: str, gpu: int | None, unit: str, body: Callable[[], dict[str, Any]]) -> None:
        """Run one measurement; turn every way it can fail into an inconclusive result."""
        self.check_time()
        since = time.monotonic()
        try:
            kw = body()
        except Deadline:
            raise
        except CheckError as exc:
            self._result(check, gpu=gpu, unit=unit, status="inconclusive", reason=str(exc))
        except Exception as exc:
            if self.b.is_alloc_error(exc):
                reason = f"allocation failed: {first_line(exc)}"
            else:
                reason = f"{type(exc).__name__}: {first_line(exc)}"
            self._result(check, gpu=gpu, unit=unit, status="inconclusive", reason=reason)
        else:
            if self.sampler is not None and gpu is not None and self.b.harness == "gpu" and "value" in kw:
                details = kw.setdefault("details", {})
                details.setdefault("telemetry", self.sampler.summary(self.smi(gpu), since, time.monotonic()))
            self._result(check, gpu=gpu, unit=unit, **kw)
        finally:
            self.b.release()

    def figure(self, times: list[float], amount: float, scale: float, asked: int | None = None,
               **details: Any) -> dict[str, Any]:
        """A throughput figure: the median of the timed windows (each of `amount` work), with the
        sustained (p10) and peak windows beside it. Too few windows is inconclusive."""
        good = [t for t in times if t > 0 and math.isfinite(t)]
        if not good:
            return {"status": "inconclusive", "reason": "zero iterations completed (timeout)"}
        if asked:
            short = run_share_problem(len(good), asked, "timed windows")
            if short:
                return {"status": "inconclusive", "reason": short}
        rates = [amount / t / scale for t in good]
        stats = window_stats(rates)
        med = statistics.median(good)
        return {"value": stats["median"],
                "details": {**details, **{k: v for k, v in stats.items() if k != "median"},
                            "repeats": len(good), "median_s": med, "min_s": min(good), "max_s": max(good)}}

    @staticmethod
    def verified(fig: dict[str, Any], checked: int, wrong: int) -> dict[str, Any]:
        """Attach the copy verification to a figure (a wrong byte fails the check in gpuws)."""
        if "details" in fig:
            fig["details"]["verify"] = {"checked_bytes": int(checked), "bad_bytes": int(wrong)}
        return fig

    def _verify(self, verify: Verify) -> tuple[int, int]:
        try:
            return verify()
        except Exception as exc:
            raise CheckError(f"the copy could not be verified: {first_line(exc)}") from None

    # --- checks

    def gemm(self, dev: int) -> None:
        support = self.b.gemm_support(dev)
        windows, window_s = self.sizes["windows"], self.sizes["window_s"]
        for check in GEMM_CHECKS:
            blocked = support.get(check)
            if blocked is not None:
                self._result(check, gpu=dev, unit="TFLOP/s", status=blocked[0], reason=blocked[1])
                continue

            def body(check: str = check) -> dict[str, Any]:
                n = self.sizes["gemm_n"]
                if isinstance(self.b, NvccBackend):
                    data = self.b.measured(check, dev, n, windows, max(1, int(window_s * 1000)),
                                           extra=f"{GEMM_TOLERANCE[check]:g}")
                    times, per = [float(x) for x in data["seconds"]], int(data.get("per_window", 1))
                    answers = data.get("answers") if isinstance(data.get("answers"), dict) else None
                    checksum = data.get("checksum") if isinstance(data.get("checksum"), dict) else None
                else:
                    self.b.last_gemm = None
                    fn = self.b.make_gemm(dev, check, n)
                    n = getattr(self.b, "last_gemm_n", n)
                    times, per = self.time_windows(dev, fn, self.sizes["warmup"], windows, window_s)
                    answers = self.b.check_gemm(dev, check)
                    checksum = self.b.checksum_gemm(dev, check)
                fig = self.figure(times, per * 2.0 * n**3, 1e12, asked=windows, n=n, calls_per_window=per)
                if answers is None:
                    # Speed of an unchecked product says nothing: a card can be fast and wrong.
                    return {"status": "inconclusive", "reason": "the GEMM's answers could not be checked",
                            "details": fig.get("details") or {}}
                # A wrong answer fails in gpuws whatever the speed or the number of windows.
                fig.setdefault("details", {})["answers"] = answers
                if checksum is not None:
                    fig["details"]["checksum"] = checksum
                if check == "gemm_bf16" and "value" in fig:
                    self.single_gemm[dev] = fig["value"]
                return fig

            self.guarded(check, dev, "TFLOP/s", body)

    def memory(self, dev: int) -> None:
        nbytes = self.sizes["mem_bytes"]
        self._copies(dev, nbytes, (("mem_copy", "make_copy", 2), ("mem_triad", "make_triad", 3)))

    def transfers(self, dev: int) -> None:
        self._copies(dev, self.sizes["xfer_bytes"], (("h2d", "make_h2d", 1), ("d2h", "make_d2h", 1)))
        if self.b.harness == "gpu":
            self.link_under_load(dev)

    def link_under_load(self, dev: int) -> None:
        """The PCIe link read again right after the host copies: a lower generation at idle is
        power saving, under load it is a link that trained low."""
        rc, out = run_cmd(["nvidia-smi", "-i", str(self.smi(dev)), "--query-gpu=pcie.link.gen.current,"
                           "pcie.link.width.current", "--format=csv,noheader,nounits"])
        cells = [csv_value(c) for c in out.strip().split(",")] if rc == 0 else []
        if len(cells) == 2:
            self._result("env.pcie_load", gpu=dev, status="ok",
                         facts={"gen_current": to_int(cells[0]), "width_current": to_int(cells[1])})

    def _copies(self, dev: int, nbytes: int, checks: tuple[tuple[str, str, int], ...]) -> None:
        windows = self.sizes["windows"]
        for check, factory, traffic in checks:
            def body(factory: str = factory, traffic: int = traffic, check: str = check) -> dict[str, Any]:
                if isinstance(self.b, NvccBackend):
                    data = self.b.measured(check, dev, nbytes, windows)
                    times = [float(x) / max(1, int(data.get("per_window", 1))) for x in data["seconds"]]
                    v = data.get("verify") or {}
                    checked, wrong = int(v.get("checked_bytes", 0)), int(v.get("bad_bytes", 0))
                    if not checked:
                        raise CheckError(f"{check}: the copy was not verified")
                else:
                    fn, verify = getattr(self.b, factory)(dev, nbytes)
                    times = self.time_op(dev, fn, self.sizes["warmup"], windows)
                    self.b.sync(dev)
                    checked, wrong = self._verify(verify)
                fig = self.figure(times, traffic * nbytes, 1e9, asked=windows, buffer_bytes=nbytes,
                                  **({"pinned": True} if check in ("h2d", "d2h") else {}))
                return self.verified(fig, checked, wrong)

            self.guarded(check, dev, "GB/s", body)

    def p2p(self, devs: list[int]) -> None:
        if len(devs) < 2:
            self._result("p2p", unit="GB/s", status="skipped",
                         reason="one GPU: peer-to-peer needs two or more" if self.b.harness == "gpu"
                         else "peer-to-peer copies need two GPUs")
            return
        pairs = [(i, j) for i in devs for j in devs if i != j] if self.sizes["all_pairs"] \
            else [(devs[k], devs[(k + 1) % len(devs)]) for k in range(len(devs))]
        nbytes = self.sizes["p2p_bytes"]
        windows = self.sizes["windows"]
        for src, dst in pairs:
            def body(src: int = src, dst: int = dst) -> dict[str, Any]:
                if isinstance(self.b, NvccBackend):
                    data = self.b.measured("p2p", src, nbytes, windows, 0, dst)
                    times = [float(x) / max(1, int(data.get("per_window", 1))) for x in data["seconds"]]
                    v = data.get("verify") or {}
                    checked, wrong = int(v.get("checked_bytes", 0)), int(v.get("bad_bytes", 0))
                    peer = bool(data.get("peer_access"))
                    if not checked:
                        raise CheckError("p2p: the copy was not verified")
                else:
                    fn, verify, peer = self.b.make_p2p(src, dst, nbytes)
                    self.b.sync(dst)
                    # Events on the source device's stream, where the copy is queued: no launch
                    # overhead or host wake-up in the figure.
                    times = self.time_op(src, fn, self.sizes["warmup"], windows)
                    self.b.sync(src)
                    self.b.sync(dst)
                    checked, wrong = self._verify(verify)
                fig = self.figure(times, nbytes, 1e9, asked=windows, buffer_bytes=nbytes, src=src, dst=dst,
                                  peer_access=peer)
                return self.verified(fig, checked, wrong)

            self.guarded("p2p", src, "GB/s", lambda body=body, dst=dst: {**body(), "peer": dst})  # type: ignore[misc]

    def scaling(self, devs: list[int]) -> None:
        if len(devs) < 2:
            self._result("scaling", unit="efficiency", status="skipped",
                         reason="one GPU: multi-GPU scaling needs two or more")
            return
        if isinstance(self.b, NvccBackend):
            self._result("scaling", unit="efficiency", status="inconclusive",
                         reason="multi-GPU scaling is measured with the PyTorch or CuPy backend only")
            return

        def body() -> dict[str, Any]:
            n = self.sizes["gemm_n"]
            kind = "gemm_bf16" if self.b.gemm_support(devs[0]).get("gemm_bf16") is None else "gemm_fp32"
            fns = {d: self.b.make_gemm(d, kind, n) for d in devs}
            reps = self.sizes["repeats"]

            def wall(use: list[int]) -> float:
                for d in use:
                    fns[d]()
                for d in use:
                    self.b.sync(d)
                t0 = time.perf_counter()
                for _ in range(reps):
                    for d in use:  # launches are asynchronous: all GPUs work at once
                        fns[d]()
                for d in use:
                    self.b.sync(d)
                return time.perf_counter() - t0

            # Three alternating pairs and their medians: one wall-clock pair is noise.
            ones, alls = [], []
            for _ in range(3):
                ones.append(wall(devs[:1]))
                self.check_time()
                alls.append(wall(devs))
            one, everyone = statistics.median(ones), statistics.median(alls)
            speedup = (len(devs) * one) / everyone
            return {"value": round(speedup / len(devs), 3),
                    "details": {"gpus": len(devs), "speedup": round(speedup, 3), "dtype": kind[5:],
                                "single_s": one, "all_s": everyone, "pairs": 3, "flagged_below": 0.8}}

        self.guarded("scaling", None, "efficiency", body)

    def stress(self, devs: list[int], seconds: float, asked: float) -> None:
        """Repeated GEMMs on every GPU at once for `seconds` (of `asked`), each compared bit for
        bit with its first; one result per GPU with its sustained throughput and telemetry."""
        self.check_time()
        since = time.monotonic()
        if isinstance(self.b, NvccBackend):
            per_dev = self._stress_nvcc(devs, seconds)
        else:
            per_dev = self._stress_arrays(devs, seconds)
        until = time.monotonic()
        for dev in devs:
            got = per_dev.get(dev)
            if isinstance(got, str):
                self._result("stress", gpu=dev, unit="mismatches", status="inconclusive", reason=got)
                continue
            assert got is not None
            details = dict(got["details"])
            details["asked_s"] = round(asked, 3)
            gpu_harness = self.b.harness == "gpu"
            if gpu_harness and self.sampler is not None:
                details["telemetry"] = self.sampler.summary(self.smi(dev), since, until)
            bad = int(got["bad"])
            answers = details.get("reference_answers")
            if isinstance(answers, dict) and answers.get("wrong"):
                # The first product is already wrong against float64: a unit wrong the same way
                # every time matches itself in the later comparisons, so count these.
                details["reference_wrong"] = True
                bad = max(bad, int(answers["wrong"]))
            summed = details.get("reference_checksum")
            if isinstance(summed, dict) and (summed.get("wrong") or summed.get("nonfinite")):
                # The same, for every element: its checksums disagree with float64.
                details["reference_wrong"] = True
                bad = max(bad, int(summed.get("wrong") or 0), int(summed.get("nonfinite") or 0))
            short = run_share_problem(float(details.get("seconds") or 0.0), asked)
            if got["iterations"] == 0:
                self._result("stress", gpu=dev, unit="mismatches", status="inconclusive",
                             reason="zero iterations completed", details=details)
            elif bad > 0:
                # A wrong answer is a failure however short the run was.
                self._result("stress", gpu=dev, unit="mismatches", value=bad, details=details)
            elif short:
                self._result("stress", gpu=dev, unit="mismatches", status="inconclusive", reason=short,
                             details=details)
            elif not isinstance(answers, dict):
                self._result("stress", gpu=dev, unit="mismatches", status="inconclusive",
                             reason="the stress product's answers could not be checked against float64",
                             details=details)
            elif isinstance(summed, dict) and summed.get("error"):
                self._result("stress", gpu=dev, unit="mismatches", status="inconclusive",
                             reason=f"the first product's checksum could not be computed ({summed['error']})",
                             details=details)
            elif gpu_harness and not (details.get("telemetry") or {}).get("samples"):
                self._result("stress", gpu=dev, unit="mismatches", status="inconclusive",
                             reason="no telemetry was recorded during the stress run (clocks and "
                                    "throttling unknown)", details=details)
            else:
                self._result("stress", gpu=dev, unit="mismatches", value=bad, details=details)

    def _stress_arrays(self, devs: list[int], seconds: float) -> dict[int, Any]:
        states: dict[int, StressState] = {}
        result: dict[int, Any] = {}
        for dev in devs:
            try:
                states[dev] = self.b.make_stress(dev, self.sizes["stress_n"])
            except Exception as exc:
                result[dev] = ("allocation failed: " if self.b.is_alloc_error(exc) else
                               f"{type(exc).__name__}: ") + first_line(exc)
        answers, checksums = {}, {}
        for dev, state in list(states.items()):
            try:
                answers[dev] = state.verify_reference()
                checksums[dev] = state.checksum_reference()
            except Exception as exc:
                result[dev] = f"{type(exc).__name__}: {first_line(exc)}"
                del states[dev]
        iterations = dict.fromkeys(states, 0)
        rates: dict[int, list[float]] = {d: [] for d in states}
        per = 2
        target = 0.5 if self.b.harness == "gpu" else 0.05
        t0 = time.perf_counter()
        end = t0 + seconds
        try:
            while states and time.perf_counter() < end and self.left() > 0:
                tokens = {d: self.b.timer_start(d) for d in states}
                for _ in range(per):
                    for state in states.values():  # asynchronous launches: all GPUs at once
                        state.step()
                for d in states:
                    self.b.timer_end(d, tokens[d])
                longest = 0.0
                for d, state in states.items():
                    elapsed = self.b.timer_elapsed(d, tokens[d])
                    iterations[d] += per
                    if elapsed > 0:
                        rates[d].append(per * state.flops_per_step / elapsed / 1e12)
                    longest = max(longest, elapsed)
                if longest > 0:  # about `target` seconds per window from here on
                    per = max(1, min(10_000, round(per * target / longest)))
            for d in states:
                self.b.sync(d)
        except Exception as exc:
            for d in states:
                result[d] = f"{type(exc).__name__}: {first_line(exc)}"
            return result
        finally:
            self.b.release()
        elapsed = time.perf_counter() - t0
        for d, state in states.items():
            details: dict[str, Any] = {"iterations": iterations[d], "seconds": round(elapsed, 3),
                                       "dtype": state.dtype, "reference_answers": answers.get(d),
                                       "reference_rel_error": (answers.get(d) or {}).get("max_rel_error"),
                                       "reference_checksum": checksums.get(d), "concurrent_gpus": len(states)}
            if rates[d]:
                details["tflops"] = window_stats(rates[d])
            result[d] = {"iterations": iterations[d], "bad": state.mismatches(), "details": details}
        return result

    def _stress_nvcc(self, devs: list[int], seconds: float) -> dict[int, Any]:
        assert isinstance(self.b, NvccBackend)
        procs = {}
        for dev in devs:  # one process per GPU, all at once
            argv = [self.b.binary, "stress", str(dev), str(self.sizes["stress_n"]), str(max(1, int(seconds))),
                    "1", self.b.stress_dtype(dev)]
            procs[dev] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        result: dict[int, Any] = {}
        for dev, proc in procs.items():
            try:
                out, err = proc.communicate(timeout=max(5.0, seconds + 60.0))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                result[dev] = "stress: no answer from the CUDA C benchmark"
                continue
            lines = out.strip().splitlines()
            try:
                data = json.loads(lines[-1]) if lines else {}
            except ValueError:
                data = {}
            if proc.returncode != 0 or not isinstance(data, dict) or "iterations" not in data:
                result[dev] = "stress: " + (stderr_tail(err) if err.strip() else f"exit status {proc.returncode}")
                continue
            ref_answers = data.get("answers") if isinstance(data.get("answers"), dict) else None
            details = {"iterations": int(data["iterations"]), "seconds": float(sum(data["seconds"])),
                       "dtype": data.get("dtype"), "reference_answers": ref_answers,
                       "reference_checksum": data.get("checksum") if isinstance(data.get("checksum"), dict) else None,
                       "reference_rel_error": (ref_answers or {}).get("max_rel_error"), "concurrent_gpus": len(devs)}
            if data.get("tflops_windows"):
                details["tflops"] = window_stats([float(x) for x in data["tflops_windows"]])
            result[dev] = {"iterations": int(data["iterations"]), "bad": int(data["mismatches"]),
                           "details": details}
        return result


def first_line(exc: BaseException) -> str:
    """The first line of `exc`'s text (its class name when empty), at most 300 characters."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


# ------------------------------------------------------------------------------ environment


def environment_checks(out: Emitter, gpus: list[dict[str, Any]], runtime: str | None,
                       expected: dict[str, Any], simulated: bool,
                       activity: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Facts about the driver and each card; gpuws judges them (see gpuws.core.bench.verdicts).
    `activity` (from `gpu_activity`) says which GPUs were in use when the facts were read."""
    activity = activity or {}
    label = "simulated" if simulated else "gpu"
    info: dict[str, Any] = {"driver_cuda_version": None}
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


def remapped_rows() -> dict[str, dict[str, Any]]:
    """Row remapping (Ampere and newer), keyed by PCI bus id; empty where unsupported."""
    fields = ["gpu_bus_id", "remapped_rows.correctable", "remapped_rows.uncorrectable",
              "remapped_rows.pending", "remapped_rows.failure"]
    rc, out = run_cmd(["nvidia-smi", f"--query-remapped-rows={','.join(fields)}", "--format=csv,noheader"])
    result: dict[str, dict[str, Any]] = {}
    if rc != 0:
        return result
    for line in out.splitlines():
        values = [csv_value(v) for v in line.split(",")]
        if len(values) == len(fields) and values[0]:
            result[values[0]] = {"remapped_correctable": to_int(values[1]),
                                 "remapped_uncorrectable": to_int(values[2]),
                                 "remapped_pending": values[3], "remapped_failure": values[4]}
    return result


def nvlink_status(index: int) -> dict[str, Any]:
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


# ------------------------------------------------------------------------------ simulation

# Peaks of the simulated models (the standalone runner's copy; tests/agent/test_sim_models_registry.py
# fails on any drift from the registry, gpuws/core/gpus): fp32, tf32, fp16, bf16, fp8 TFLOP/s;
# memory GB/s; one-direction PCIe x16 GB/s of the card's generation; NVLink GB/s (total).
SIM_MODELS = {
    "GRID A100": (19.5, 156, 312, 312, None, 1555, 31.5, 600),  # vGPU profiles are cut from the 40 GB A100
    "H200": (67, 494.5, 989.5, 989.5, 1979, 4800, 63.0, 900),
    "H100": (67, 494.5, 989.5, 989.5, 1979, 3350, 63.0, 900),
    "A100": (19.5, 156, 312, 312, None, 2039, 31.5, 600),
    "L40S": (91.6, 183, 362.05, 362.05, 733, 864, 31.5, None),
    "L4": (30.3, 60, 121, 121, 242.5, 300, 31.5, None),
    "A10": (31.2, 62.5, 125, 125, None, 600, 31.5, None),
    "T4": (8.1, None, 65, None, None, 320, 15.75, None),
}
# Healthy pinned host copies reach about 80-85 % of a PCIe link (issue #25; 87 % measured on the
# gpuws H200 recording): the simulator's healthy cards do the same.
SIM_HOST_LINK_SHARE = (0.81, 0.86)


def sim_peaks(name: str) -> tuple[Any, ...]:
    return next((v for k, v in SIM_MODELS.items() if k in name.upper()),
                (20.0, 80.0, 160.0, 160.0, None, 1000.0, 20.0, None))


def sim_faults(text: str | None) -> dict[int, set[str]]:
    """`GPUWS_SIM_FAULTS` ("KIND:GPU,KIND:GPU") as {gpu index: kinds}. gpuws checked the
    spelling before it set the variable (gpuws/sim/faults.py); anything else is ignored here."""
    faults: dict[int, set[str]] = {}
    for item in (text or "").split(","):
        kind, _, gpu = item.strip().partition(":")
        if kind in SIM_FAULT_KINDS and gpu.strip().isdigit():
            faults.setdefault(int(gpu), set()).add(kind)
    return faults


# The simulated host's GEMM answers come from a real product of this size, its inputs and output
# rounded as the format would round them (NumPy), faults put in, and checked as a GPU's are.
SIM_PRODUCT_N = 256


def round_to_format(np: Any, x: Any, fmt: str) -> Any:
    """float32 `x` rounded to the nearest value of `fmt` (round to nearest even on the bits; FP8
    E4M3 with its subnormals below 2^-6 and its largest value 448), still as float32."""
    if fmt == "fp16":
        return x.astype(np.float16).astype(np.float32)
    drop = {"bf16": 16, "tf32": 13, "fp8": 20}.get(fmt)
    if drop is None:
        return x.astype(np.float32)
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    half = (1 << (drop - 1)) - 1
    bits = (bits + half + ((bits >> drop) & 1)) & ~np.uint64((1 << drop) - 1)
    out = bits.astype(np.uint32).view(np.float32)
    if fmt == "fp8":
        tiny = np.abs(out) < 2.0**-6  # subnormal E4M3: multiples of 2^-9
        out = np.where(tiny, np.round(x / 2.0**-9) * 2.0**-9, out).astype(np.float32)
        out = np.clip(out, -448.0, 448.0)
    return out


def sim_product(np: Any, fmt: str, seed: int, n: int = SIM_PRODUCT_N) -> tuple[Any, Any, Any]:
    """(a, b, c): inputs as stored in `fmt` (TF32 inputs are FP32 in memory) and their product as
    the hardware returns it: inputs rounded to the format, float32 accumulation, output rounded
    (bf16 for FP8, as the runner asks for)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    stored = "fp32" if fmt == "tf32" else fmt
    a, b = round_to_format(np, a, stored), round_to_format(np, b, stored)
    c = round_to_format(np, a, fmt) @ round_to_format(np, b, fmt)
    c = round_to_format(np, c, "bf16" if fmt == "fp8" else "fp32" if fmt == "tf32" else fmt)
    return a, b, (c.astype(np.float16) if fmt == "fp16" else c)


def sim_unsampled(n: int, size: int) -> int:
    """The start of a `size`-wide band of 0..n-1 that no sampled row (column) falls in: a fault
    there is one the sampled check misses and only the checksum sees."""
    picked = set(gemm_samples(n))
    return next(s for s in range(n - size, -1, -1) if not picked & set(range(s, s + size)))


def sim_fault_product(np: Any, c: Any, kinds: set[str]) -> Any:
    """`c` with the product faults of `kinds`, in the same places in every product (a unit that is
    wrong is wrong the same way each time): gemm-wrong one tile past row 3 off by 37 %, gemm-tile
    one 32 x 32 tile off by 2 % of the largest element, gemm-element one element off by half the
    largest, bench-nan one NaN; the last three where no sampled row or column falls."""
    c = c.copy()
    n = int(c.shape[0])
    big = float(np.abs(c.astype(np.float32)).max())
    if "gemm-wrong" in kinds:
        c[128:256, 128:256] *= 1.37
    if "gemm-tile" in kinds:
        r, k = sim_unsampled(n, 32), sim_unsampled(n, 32)
        c[r:r + 32, k:k + 32] += c.dtype.type(0.02 * big)
    if "gemm-element" in kinds:
        r, k = sim_unsampled(n, 1), sim_unsampled(n, 1) - 7
        c[r, k] += c.dtype.type(0.5 * big)
    if "bench-nan" in kinds:
        c[sim_unsampled(n, 1) - 3, sim_unsampled(n, 1) - 5] = np.nan
    return c


def sim_checks(fmt: str, kinds: set[str], seed: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The sampled answer check and the checksum of one simulated product (None without NumPy)."""
    try:
        import numpy as np
    except ImportError:
        return None
    a, b, c = sim_product(np, fmt, seed)
    c = sim_fault_product(np, c, kinds)
    rows, cols = gemm_samples(int(a.shape[0])), gemm_samples(int(b.shape[1]))
    ref, got = array_grid(np, a, b, c, rows, cols)
    tolerance = GEMM_TOLERANCE.get(f"gemm_{fmt}", STRESS_TOLERANCE.get(fmt, 1e-2))
    return answer_check(ref, got, tolerance, rows, cols), checksum_check(ArrayOps(np), a, b, c, fmt)


# Simulated throttle: clocks fall to a third after this much load (the `throttle` fault).
SIM_THROTTLE_AFTER_S = 5.0
SIM_MAX_CLOCK = {"H200": 1980, "H100": 1980, "A100": 1410, "L40S": 2520, "L4": 2040, "A10": 1695, "T4": 1590}


def simulated_run(out: Emitter, gpus: list[dict[str, Any]], mode: str, seed: int | None,
                  deadline: float, activity: dict[int, dict[str, Any]] | None = None,
                  allow_busy: bool = False) -> None:
    """Plausible figures (about 80% of peak with noise), each labelled simulated, in the same shape
    as measured ones (timed windows, verified copies, concurrent stress, telemetry). The faults of
    `GPUWS_SIM_FAULTS` play here what they would do on a real card. The gpuws simulated host
    only: never shown as a real measurement."""
    rng = random.Random(seed)
    faults = sim_faults(os.environ.get(SIM_FAULTS_ENV))
    activity = activity or {}
    forced = os.environ.get("GPUWS_SIM_BENCH_DEGRADED")
    degraded = int(forced) if forced is not None and forced.strip().isdigit() else None
    if degraded is not None:
        out.log(f"simulation: GPU {degraded} plays a degraded card this run", "warning")
    for idx, kinds in sorted(faults.items()):
        out.log(f"simulation: GPU {idx} plays these faults: {', '.join(sorted(kinds))}", "warning")
    pause = 0.01 if mode == "quick" else 0.05
    sizes = SIZES["gpu"][mode]
    windows = sizes["windows"]
    window_s = 0.5  # simulated seconds per timed window
    load_s: dict[int, float] = {}  # simulated seconds of load so far, per GPU

    def emit(check: str, gpu: int | None, value: float | None, unit: str, **kw: Any) -> None:
        if time.monotonic() > deadline:
            raise Deadline()
        time.sleep(pause)
        if gpu is not None and activity.get(gpu, {}).get("busy") and allow_busy:
            kw.setdefault("busy", activity[gpu])
        out.result(check, gpu=gpu, value=None if value is None else round(value, 3), unit=unit,
                   harness="simulated", simulated=True, **kw)

    def clock_of(g: dict[str, Any]) -> int:
        return next((v for k, v in SIM_MAX_CLOCK.items() if k in g["name"].upper()), 1800)

    def factor(idx: int, t: float) -> float:
        return 1 / 3 if "throttle" in faults.get(idx, set()) and t >= SIM_THROTTLE_AFTER_S else 1.0

    def windows_under_load(g: dict[str, Any], base: float, count: int,
                           span: float) -> tuple[list[float], dict[str, Any]]:
        """Per-window figures over `count` windows of `span` simulated seconds, and telemetry."""
        idx = g["index"]
        rates, clocks, throttled = [], [], False
        for _ in range(count):
            f = factor(idx, load_s.get(idx, 0.0))
            throttled = throttled or f < 1
            rates.append(base * f * rng.uniform(0.985, 1.015))
            clocks.append(round(clock_of(g) * f))
            load_s[idx] = load_s.get(idx, 0.0) + span
        telemetry = {"samples": max(1, round(count * span / 0.5)), "temp_max_c": rng.randint(58, 72),
                     "sm_clock_min_mhz": min(clocks), "sm_clock_max_mhz": max(clocks),
                     "power_max_w": round(rng.uniform(600, 690) if "H100" in g["name"] else rng.uniform(280, 390)),
                     "throttle_reasons_seen": ["hw_slowdown"] if throttled else []}
        return rates, telemetry

    def figure(rates: list[float], **details: Any) -> tuple[float, dict[str, Any]]:
        stats = window_stats(rates)
        return stats["median"], {**details, **{k: v for k, v in stats.items() if k != "median"}}

    def slice_of(g: dict[str, Any]) -> bool:
        return "GRID" in g["name"].upper() or (g.get("mig_mode") or "").lower() == "enabled"

    def mig_of(g: dict[str, Any]) -> bool:
        return (g.get("mig_mode") or "").lower() == "enabled"

    def checked(fmt: str, kinds: set[str], details: dict[str, Any], prefix: str = "") -> None:
        """The answer check and the checksum of a real simulated product of `fmt` (see sim_checks)."""
        found = sim_checks(fmt, kinds, rng.randrange(1 << 30))
        if found is not None:
            details[f"{prefix}answers"], details[f"{prefix}checksum"] = found
            details["product_n"] = SIM_PRODUCT_N

    measured = []
    perf_checks = (*GEMM_CHECKS, "mem_copy", "mem_triad", "h2d", "d2h")
    for g in gpus:
        idx = g["index"]
        kinds = faults.get(idx, set())
        busy = activity.get(idx, {})
        if "cuda-invisible" in kinds or "fabric-down" in kinds:
            why = (f"CUDA cannot see GPU {idx} ({g.get('uuid')}): nvidia-smi lists it, but no CUDA device has "
                   "its UUID (CUDA_VISIBLE_DEVICES, or it failed CUDA start-up): not measured")
            if "fabric-down" in kinds:  # what CUDA says on an NVSwitch system whose fabric manager is down
                why = (f"CUDA could not start on GPU {idx}: cudaErrorSystemNotReady (802), the fabric manager "
                       "has not registered it: not measured")
            for check in (*perf_checks, "stress"):
                emit(check, idx, None, "mismatches" if check == "stress" else "GB/s" if check in perf_checks[5:]
                     else "TFLOP/s", status="inconclusive", reason=why)
            continue
        if busy.get("busy") and not allow_busy:
            why = busy_reason(busy) + ": not measured (--allow-busy measures it anyway)"
            for check in (*perf_checks, "stress"):
                emit(check, idx, None, "mismatches" if check == "stress" else "GB/s" if check in perf_checks[5:]
                     else "TFLOP/s", status="inconclusive", reason=why, busy=busy)
            continue
        measured.append(g)
        peaks = sim_peaks(g["name"])
        slow = 0.45 if idx == degraded else 1.0
        if busy.get("busy"):
            slow *= 0.5  # someone else's work shares the card
        if mig_of(g):
            slow *= 0.25  # a MIG slice has a part of the card's engines
        # A lone time-sliced vGPU gets the whole card during its slice: full speed.
        for k, check in enumerate(GEMM_CHECKS):
            peak = peaks[k]
            if peak is None:
                emit(check, idx, None, "TFLOP/s", status="skipped", reason="not supported by this GPU")
                continue
            rates, telemetry = windows_under_load(g, peak * rng.uniform(0.74, 0.86) * slow, windows, window_s)
            value, details = figure(rates, n=sizes["gemm_n"], telemetry=telemetry)
            checked(check[5:], kinds, details)
            if "answers" not in details:
                emit(check, idx, None, "TFLOP/s", status="inconclusive", details=details,
                     reason="the simulated host checks its GEMM answers with NumPy, which this python3 lacks")
                continue
            emit(check, idx, value, "TFLOP/s", details=details)
        corrupt = 1 if "copy-corrupt" in kinds else 0
        link = peaks[6] * (4 / 16 if "slow-link" in kinds else 1.0) * (0.25 if mig_of(g) else 1.0)
        for check, base, nbytes in (("mem_copy", peaks[5] * rng.uniform(0.82, 0.92) * slow, sizes["mem_bytes"]),
                                    ("mem_triad", peaks[5] * rng.uniform(0.80, 0.90) * slow, sizes["mem_bytes"]),
                                    ("h2d", link * rng.uniform(*SIM_HOST_LINK_SHARE), sizes["xfer_bytes"]),
                                    ("d2h", link * rng.uniform(*SIM_HOST_LINK_SHARE), sizes["xfer_bytes"])):
            value, details = figure([base * rng.uniform(0.99, 1.01) for _ in range(windows)], buffer_bytes=nbytes)
            # The triad writes computed values; the copies' bytes are compared with what was sent.
            details["verify"] = {"checked_bytes": nbytes, "bad_bytes": corrupt if check != "mem_triad" else 0}
            emit(check, idx, value, "GB/s", details=details)
    whole = [g for g in measured if not slice_of(g)]
    if len(gpus) > 1:
        for k, g in enumerate(gpus):
            peer = gpus[(k + 1) % len(gpus)]
            if slice_of(g) or slice_of(peer):
                emit("p2p", g["index"], None, "GB/s", status="skipped", peer=peer["index"],
                     reason="peer-to-peer copies are not supported between vGPU or MIG slices")
                continue
            if g not in measured or peer not in measured:
                emit("p2p", g["index"], None, "GB/s", status="inconclusive", peer=peer["index"],
                     reason="one GPU of the pair was not measured (in use, or invisible to CUDA)")
                continue
            # The simulated host has no NVLink: peer copies go over PCIe at the slower link's speed.
            kinds = faults.get(g["index"], set()) | faults.get(peer["index"], set())
            link = min(sim_peaks(g["name"])[6], sim_peaks(peer["name"])[6]) * rng.uniform(*SIM_HOST_LINK_SHARE)
            link *= 4 / 16 if "slow-link" in kinds else 1.0
            value, details = figure([link * rng.uniform(0.99, 1.01) for _ in range(windows)],
                                    buffer_bytes=sizes["p2p_bytes"], src=g["index"], dst=peer["index"],
                                    peer_access=True)
            details["verify"] = {"checked_bytes": sizes["p2p_bytes"],
                                 "bad_bytes": 1 if "copy-corrupt" in faults.get(g["index"], set()) else 0}
            emit("p2p", g["index"], value, "GB/s", peer=peer["index"], details=details)
        if len(whole) > 1:
            eff = rng.uniform(0.86, 0.97) * (0.7 if degraded is not None else 1.0)
            emit("scaling", None, eff, "efficiency", details={"gpus": len(whole), "pairs": 3})
        else:
            emit("scaling", None, None, "efficiency", status="skipped",
                 reason="fewer than two whole GPUs to measure: multi-GPU scaling needs two or more")
    else:
        emit("p2p", None, None, "GB/s", status="skipped", reason="one GPU: peer-to-peer needs two or more")
        emit("scaling", None, None, "efficiency", status="skipped",
             reason="one GPU: multi-GPU scaling needs two or more")
    seconds = sizes["stress_s"]
    for g in measured:  # all at once, as on a real host: the same simulated seconds for each
        idx = g["index"]
        kinds = faults.get(idx, set())
        peaks = sim_peaks(g["name"])
        best = peaks[3] or peaks[2] or peaks[0]
        span = 0.5
        rates, telemetry = windows_under_load(g, best * rng.uniform(0.70, 0.82) * (0.25 if mig_of(g) else 1.0),
                                              round(seconds / span), span)
        iterations = rng.randint(400, 600) if mode == "quick" else rng.randint(2400, 3600)
        # bench-nan: five NaN elements in every product, each counted as a mismatch.
        bad = 5 * iterations if "bench-nan" in kinds else 0
        dtype = "bf16" if peaks[3] else "fp16"
        # gemm-wrong, gemm-tile and gemm-element are wrong the same way every time: every later
        # product equals the first bit for bit, and only the first product's checks see them.
        found: dict[str, Any] = {}
        checked(dtype, kinds - {"bench-nan"}, found, "reference_")
        reference, summed = found.get("reference_answers") or {}, found.get("reference_checksum") or {}
        wrong = max(int(reference.get("wrong") or 0), int(summed.get("wrong") or 0))
        bad = max(bad, wrong)
        emit("stress", idx, bad, "mismatches",
             details={"iterations": iterations, "seconds": seconds, "asked_s": seconds,
                      "dtype": dtype, "concurrent_gpus": len(measured), **found,
                      "reference_rel_error": reference.get("max_rel_error"),
                      **({"reference_wrong": True} if wrong else {}),
                      "tflops": window_stats(rates), "telemetry": telemetry,
                      **({"nonfinite": True} if bad else {})})


# ------------------------------------------------------------------------------ main


def select_backend(choice: str, gpus: list[dict[str, Any]], workdir: str | None,
                   out: Emitter, deadline: float | None = None) -> tuple[Backend | None, list[str]]:
    """The first toolchain that works, and what was tried (for the log)."""
    tried: list[str] = []
    if choice in ("auto", "torch", "torch-cpu"):
        try:
            import torch  # type: ignore[import-not-found]

            if choice != "torch-cpu" and torch.cuda.is_available() and torch.cuda.device_count() > 0:
                return TorchBackend(torch, cuda=True), tried
            tried.append(f"PyTorch {torch.__version__}: no CUDA device")
        except Exception as exc:
            tried.append(f"PyTorch: {first_line(exc)}")
    if choice in ("auto", "cupy"):
        try:
            import cupy  # type: ignore[import-not-found]

            if cupy.cuda.runtime.getDeviceCount() > 0:
                return CupyBackend(cupy), tried
        except Exception as exc:
            tried.append(f"CuPy: {first_line(exc)}")
    if choice in ("auto", "nvcc") and gpus:
        if find_nvcc() and workdir:
            try:
                left = 330.0 if deadline is None else deadline - time.monotonic()
                return NvccBackend.build(workdir, gpus, out, timeout=build_timeout(left)), tried
            except Exception as exc:
                tried.append(f"nvcc: {first_line(exc)}")
        else:
            tried.append("nvcc: not found (PATH, /usr/local/cuda*/bin)" if not find_nvcc()
                         else "nvcc: no work directory")
    return None, tried


def cpu_backend(out: Emitter) -> Backend | None:
    """PyTorch's CPU build, else NumPy: the same harness on the CPU with small sizes."""
    try:
        import torch

        torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
        return TorchBackend(torch, cuda=False)
    except Exception:  # noqa: S110
        pass
    try:
        import numpy

        return NumpyBackend(numpy)
    except Exception:
        return None


def run(args: argparse.Namespace, out: Emitter) -> dict[str, Any]:
    started = time.monotonic()
    deadline = started + args.timeout
    summary: dict[str, Any] = {"type": "summary", "protocol": PROTOCOL, "mode": args.mode,
                               "hostname": platform.node(), "python": platform.python_version(),
                               "backend": None, "harness": None, "simulated": False, "gpus": [],
                               "timed_out": False, "error": None}
    expected = json.loads(args.expected) if args.expected else {}
    simulated = host_is_simulated()
    summary["simulated"] = simulated
    if simulated:
        # The demo's own simulated jobs stand aside while the benchmark runs (the simulated
        # nvidia-smi reads this); only the `busy` fault plays another user's process.
        os.environ[SIM_JOBS_PAUSED_ENV] = "1"
    gpus, no_gpu_reason = list_gpus()
    summary["gpus"] = gpus
    summary["started_at_unix"] = round(time.time(), 3)
    summary["allow_busy"] = bool(args.allow_busy)
    # Before anything of ours touches a GPU: who else is using them.
    activity = gpu_activity(gpus) if gpus else {}
    summary["busy_gpus"] = sorted(i for i, a in activity.items() if a["busy"])
    summary["driver_version"] = gpus[0].get("driver_version") if gpus else None
    out.log(f"{len(gpus)} GPU(s): " + ", ".join(f"{g['index']}: {g['name']}" for g in gpus)
            if gpus else (no_gpu_reason or "no GPU"))
    steps = ["environment", "toolchain", "gemm", "memory", "transfers", "p2p", "scaling", "stress"]
    total = len(steps)

    def step(k: int, message: str) -> None:
        out.progress(k, total, steps[k - 1], message)

    try:
        if simulated:
            summary.update(backend="simulated", harness="simulated")
            out.log("SIMULATED GPU host: figures below are simulated, not measured", "warning")
            step(1, "environment")
            # The demo's own simulated jobs stand aside for the benchmark; only the `busy` fault
            # plays another user's process holding a GPU.
            playing = sim_faults(os.environ.get(SIM_FAULTS_ENV))
            activity = {g["index"]: ({"processes": 1, "pids": [], "utilization_pct": 97, "busy": True}
                                     if "busy" in playing.get(g["index"], set()) else
                                     {"processes": 0, "pids": [], "utilization_pct": 0, "busy": False})
                        for g in gpus}
            summary["busy_gpus"] = sorted(i for i, a in activity.items() if a["busy"])
            env = environment_checks(out, gpus, "12.4", expected, True, activity)
            summary["cuda_driver_version"] = env["driver_cuda_version"]
            step(2, "simulated backend")
            out.result("toolchain", status="ok", harness="simulated", simulated=True,
                       facts={"backend": "simulated"})
            step(3, "simulated measurements")
            simulated_run(out, gpus, args.mode, args.seed, deadline, activity, args.allow_busy)
            step(total, "done")
            return summary

        step(1, "environment")
        backend, tried = (None, []) if args.backend == "cpu" else select_backend(
            args.backend, gpus, args.workdir, out, deadline)
        for line in tried:
            out.log(f"backend not usable: {line}")
        env = environment_checks(out, gpus, backend.runtime_version() if backend else None, expected,
                                 False, activity)
        summary["cuda_driver_version"] = env["driver_cuda_version"]
        step(2, "toolchain")
        if backend is None:
            out.result("toolchain", status="inconclusive", reason=NO_TOOLCHAIN, facts={"tried": tried})
            for check in (*GEMM_CHECKS, "mem_copy", "mem_triad", "h2d", "d2h", "p2p", "scaling", "stress"):
                out.result(check, status="inconclusive", reason=NO_TOOLCHAIN if gpus else
                           (no_gpu_reason or "no GPU"))
            backend = cpu_backend(out)
            if backend is None:
                out.log("no NumPy or PyTorch either: the CPU harness check cannot run", "warning")
                summary.update(backend=None, harness=None)
                step(total, "done")
                return summary
            out.log(f"running the harness on the CPU ({backend.name}): {CPU_LABEL}", "warning")
        else:
            out.result("toolchain", status="ok", facts={"backend": backend.name,
                                                         "runtime_cuda_version": backend.runtime_version()})
        summary.update(backend=backend.name, harness=backend.harness,
                       cuda_runtime_version=backend.runtime_version())
        with Sampler() as sampler:
            measure(backend, out, args, deadline, gpus, sampler, activity, step)
    except Deadline:
        summary["timed_out"] = True
        out.result("timeout", status="inconclusive",
                   reason=f"the overall time limit ({args.timeout:g} s) was reached; later checks did not run")
    except Exception as exc:
        summary["error"] = f"{type(exc).__name__}: {first_line(exc)}"
        out.log(f"runner error: {summary['error']}", "error")
    finally:
        summary["duration_s"] = round(time.monotonic() - started, 3)
        summary["finished_at_unix"] = round(time.time(), 3)
    return summary


def _uuid_key(text: object) -> str | None:
    """A GPU UUID compared without its "GPU-" prefix or case."""
    if not text:
        return None
    value = str(text).strip().lower()
    return value[4:] if value.startswith("gpu-") else value


def _bus_key(text: object) -> tuple[int, int, int] | None:
    """A PCI bus id ("00000000:06:00.0", "0000:06:00.0") as (domain, bus, device)."""
    parts = str(text or "").strip().split(".")[0].split(":")
    try:
        return (int(parts[0], 16), int(parts[1], 16), int(parts[2], 16)) if len(parts) == 3 else None
    except ValueError:
        return None


def match_devices(backend: Backend, gpus: list[dict[str, Any]],
                  out: Emitter) -> tuple[dict[int, int], list[dict[str, Any]]]:
    """CUDA ordinal -> nvidia-smi index, matched by UUID (else PCI bus id), and the GPUs nvidia-smi
    lists that no CUDA device matched. CUDA's order is not nvidia-smi's (CUDA_DEVICE_ORDER,
    CUDA_VISIBLE_DEVICES), so figures, the busy guard and telemetry must never go by ordinal."""
    by_uuid = {_uuid_key(g.get("uuid")): g["index"] for g in gpus if g.get("uuid")}
    by_bus = {_bus_key(g.get("pci_bus_id")): g["index"] for g in gpus if _bus_key(g.get("pci_bus_id"))}
    mapping: dict[int, int] = {}
    unknown = []
    for dev in backend.device_ids():
        try:
            uuid, bus = backend.device_identity(dev)
        except Exception:
            uuid, bus = None, None
        index = by_uuid.get(_uuid_key(uuid)) if uuid else None
        if index is None and bus:
            index = by_bus.get(_bus_key(bus))
        if index is None:
            unknown.append(dev)
        else:
            mapping[dev] = index
    if unknown and backend.harness == "gpu":
        if len(backend.device_ids()) == len(gpus) and not os.environ.get("CUDA_VISIBLE_DEVICES") and not mapping:
            out.log("CUDA gives no UUID or bus id for its devices: taken in nvidia-smi's order "
                    "(CUDA_DEVICE_ORDER=PCI_BUS_ID)", "warning")
            mapping.update({dev: gpus[k]["index"] for k, dev in enumerate(backend.device_ids())})
        else:
            out.log(f"CUDA devices {unknown} match no GPU nvidia-smi lists: not measured", "warning")
    elif unknown:  # the CPU harness: device 0 is the CPU
        mapping.update({dev: dev for dev in unknown})
    seen = set(mapping.values())
    missing = [g for g in gpus if g["index"] not in seen] if backend.harness == "gpu" else []
    return mapping, missing


def measure(backend: Backend, out: Emitter, args: argparse.Namespace, deadline: float,
            gpus: list[dict[str, Any]], sampler: Sampler, activity: dict[int, dict[str, Any]],
            step: Callable[[int, str], None]) -> None:
    """Every measured check through `backend`; busy GPUs only with --allow-busy."""
    smi_of, missing = match_devices(backend, gpus, out)
    harness = Harness(backend, out, args.mode, deadline, gpus, sampler,
                      activity if backend.harness == "gpu" else {}, smi_of)
    for g in missing:
        why = (f"CUDA cannot see GPU {g['index']} ({g.get('uuid') or g.get('pci_bus_id')}): nvidia-smi lists it, "
               "but no CUDA device has its UUID (CUDA_VISIBLE_DEVICES="
               f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}, or it failed CUDA start-up): not measured")
        for check in (*GEMM_CHECKS, "mem_copy", "mem_triad", "h2d", "d2h", "stress"):
            out.result(check, gpu=g["index"], status="inconclusive", reason=why)
    devs = []
    for d in backend.device_ids():
        if d not in smi_of:
            continue
        a = activity.get(smi_of[d], {}) if backend.harness == "gpu" else {}
        if a.get("busy") and not args.allow_busy:
            why = busy_reason(a) + ": not measured (--allow-busy measures it anyway)"
            for check in (*GEMM_CHECKS, "mem_copy", "mem_triad", "h2d", "d2h", "stress"):
                out.result(check, gpu=smi_of[d], status="inconclusive", reason=why, busy=a)
            continue
        devs.append(d)
    step(3, f"GEMM throughput on {len(devs)} device(s)")
    for d in devs:
        harness.gemm(d)
    step(4, "device memory bandwidth")
    for d in devs:
        harness.memory(d)
    step(5, "host<->device bandwidth (pinned)")
    for d in devs:
        if backend.harness == "cpu":
            for check in ("h2d", "d2h"):
                out.result(check, gpu=d, unit="GB/s", status="inconclusive",
                           reason="host<->device copies need a GPU", harness="cpu")
        else:
            harness.transfers(d)
    step(6, "peer-to-peer bandwidth")
    harness.p2p(devs)
    step(7, "multi-GPU scaling")
    harness.scaling(devs)
    asked = SIZES[backend.harness][args.mode]["stress_s"]
    step(8, f"stress with correctness check ({asked:g} s, all devices at once)")
    seconds = min(asked, harness.left() - 2.0)  # keep time for the summary
    if devs and seconds <= 0:
        for d in devs:
            harness._result("stress", gpu=d, unit="mismatches", status="inconclusive",
                            reason=f"no time left for the stress run ({asked:g} s asked)")
        raise Deadline()
    if devs:
        harness.stress(devs, seconds, asked)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; the mode defaults to quick and the timeout to that mode's limit."""
    p = argparse.ArgumentParser(description="gpuws GPU sanity benchmark (JSON lines on stdout)")
    p.add_argument("--json", action="store_true", help="JSON lines output (the only format)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="mode", action="store_const", const="quick")
    g.add_argument("--full", dest="mode", action="store_const", const="full")
    p.add_argument("--timeout", type=float, default=None, help="overall time limit in seconds")
    p.add_argument("--expected", default=None, help="expected host profile as JSON (gpu_count, mig_mode, model)")
    p.add_argument("--backend", default="auto", choices=["auto", "torch", "cupy", "nvcc", "cpu", "torch-cpu"])
    p.add_argument("--workdir", default=None, help="scratch directory (for the nvcc build)")
    p.add_argument("--seed", type=int, default=None, help="seed of the simulated backend")
    p.add_argument("--allow-busy", action="store_true",
                   help="measure GPUs that other processes are using (their throughput is then inconclusive)")
    args = p.parse_args(argv)
    args.mode = args.mode or "quick"
    if args.timeout is None:
        args.timeout = OVERALL_TIMEOUT[args.mode]
    return args


def main(argv: list[str] | None = None) -> int:
    # Match nvidia-smi's GPU numbering (PCI order) in CUDA, before any CUDA library loads.
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    args = parse_args(argv)
    out = Emitter()
    if args.expected:
        try:
            json.loads(args.expected)
        except ValueError:
            out.emit({"type": "summary", "protocol": PROTOCOL, "error": "--expected is not valid JSON"})
            return 2

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        """A stop signal ends the run through SystemExit, so `finally` still writes the summary."""
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)

    # A watchdog for work stuck inside a CUDA call, which no Python check can interrupt.
    def watchdog() -> None:
        time.sleep(args.timeout + 30.0)
        out.emit({"type": "summary", "protocol": PROTOCOL, "timed_out": True,
                  "error": "the runner was stuck past its time limit and stopped itself"})
        os._exit(124)

    threading.Thread(target=watchdog, daemon=True).start()
    summary = run(args, out)
    summary["results"] = len(out.results)
    out.emit(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
