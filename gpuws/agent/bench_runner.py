#!/usr/bin/env python3
"""gpuws on-host GPU sanity benchmark: measures, never judges.

Standalone on purpose: the standard library plus whatever it finds (PyTorch, CuPy, NumPy, nvcc,
pynvml). gpuws sends it over SSH into a temporary directory and runs it with the host's
`python3`; it also runs as it is on any machine:

    python3 bench_runner.py --json [--quick|--full] [--timeout S] [--expected JSON]

Output is one JSON object per line on stdout:
    {"type": "progress", "step": k, "total": n, "check": ..., "message": ...}
    {"type": "log", "level": "info"|"warning"|"error", "message": ...}
    {"type": "result", "check": ..., "gpu": i|null, "value": x|null, "unit": ..., "status":
     "ok"|"inconclusive"|"skipped", "reason": ..., "harness": "gpu"|"cpu"|"simulated",
     "simulated": bool, "facts"/"details": {...}}
    {"type": "summary", ...}   (always last, also after a timeout or an error)

It reports raw figures and facts; gpuws scores them against the card's datasheet. Anything that
could not run is reported "inconclusive" with the reason, never left out (no silent pass).

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
from typing import Any

PROTOCOL = 1
NO_TOOLCHAIN = (
    "no CUDA toolchain: install PyTorch with CUDA (pip install torch) or CuPy, or the CUDA toolkit (nvcc)"
)
CPU_LABEL = "CPU harness check \u2014 not a GPU measurement"
SIM_MARKER = "gpuws-simulated-gpu-host"
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
                  "p2p_bytes": 256 << 20, "stress_s": 10.0, "stress_n": 8192, "all_pairs": False},
        "full": {"gemm_n": 8192, "warmup": 5, "repeats": 30, "mem_bytes": 2 << 30, "xfer_bytes": 1 << 30,
                 "p2p_bytes": 1 << 30, "stress_s": 60.0, "stress_n": 8192, "all_pairs": True},
    },
    "cpu": {
        "quick": {"gemm_n": 256, "warmup": 1, "repeats": 3, "mem_bytes": 8 << 20, "xfer_bytes": 8 << 20,
                  "p2p_bytes": 8 << 20, "stress_s": 1.0, "stress_n": 128, "all_pairs": False},
        "full": {"gemm_n": 512, "warmup": 2, "repeats": 7, "mem_bytes": 32 << 20, "xfer_bytes": 32 << 20,
                 "p2p_bytes": 32 << 20, "stress_s": 5.0, "stress_n": 256, "all_pairs": True},
    },
}
OVERALL_TIMEOUT = {"quick": 90.0, "full": 330.0}


class CheckError(Exception):
    """A check could not run; the message is the reason shown to the user."""


class Deadline(Exception):
    """The overall timeout was reached."""


# ----------------------------------------------------------------------------------- output


class Emitter:
    """Writes JSON lines; a closed stdout (the client went away) ends the run at once."""

    def __init__(self, stream: Any = None) -> None:
        self._stream = stream or sys.stdout
        self._lock = threading.Lock()
        self.results: list[dict[str, Any]] = []

    def emit(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, default=str, allow_nan=False)
        with self._lock:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (BrokenPipeError, OSError):
                # Nobody is listening any more: stop the GPU work now rather than run on unseen.
                os._exit(141)

    def log(self, message: str, level: str = "info") -> None:
        self.emit({"type": "log", "level": level, "message": message})

    def progress(self, step: int, total: int, check: str, message: str) -> None:
        self.emit({"type": "progress", "step": step, "total": total, "check": check, "message": message})

    def result(self, check: str, *, gpu: int | None = None, value: float | None = None,
               unit: str | None = None, status: str = "ok", reason: str | None = None,
               harness: str = "gpu", simulated: bool = False, **extra: Any) -> None:
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
    if value is None:
        return None
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(float(value))
    except ValueError:
        return None


def to_float(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def decode_throttle(mask: int | None) -> list[str] | None:
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


# ------------------------------------------------------------------------------ telemetry


class Sampler:
    """Polls temperature, SM clock, power and throttle reasons while a check runs (NVML when it
    works, else nvidia-smi), so the stress check can say how the card held up."""

    def __init__(self, interval: float = 1.0) -> None:
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

    def summary(self, gpu: int) -> dict[str, Any]:
        mine = [s for s in self.samples if s.get("gpu") == gpu]
        temps = [s["temp_c"] for s in mine if s.get("temp_c") is not None]
        clocks = [s["sm_clock_mhz"] for s in mine if s.get("sm_clock_mhz") is not None]
        mask = 0
        for s in mine:
            mask |= s.get("throttle") or 0
        return {
            "samples": len(mine),
            "temp_max_c": max(temps) if temps else None,
            "sm_clock_min_mhz": min(clocks) if clocks else None,
            "sm_clock_max_mhz": max(clocks) if clocks else None,
            "throttle_reasons_seen": decode_throttle(mask) if mine else None,
        }


# ------------------------------------------------------------------------------ backends


class Backend:
    """Array operations the harness needs; one subclass per toolchain. `harness` is "gpu" or "cpu"."""

    name = "none"
    harness = "gpu"

    def device_ids(self) -> list[int]:
        raise NotImplementedError

    def runtime_version(self) -> str | None:
        return None

    def gemm_support(self, dev: int) -> dict[str, tuple[str, str] | None]:
        """For each GEMM check: None when it can run, else (status, reason)."""
        raise NotImplementedError

    def make_gemm(self, dev: int, check: str, n: int) -> Callable[[], Any]:
        raise NotImplementedError

    def make_copy(self, dev: int, nbytes: int) -> Callable[[], Any]:
        raise NotImplementedError

    def make_triad(self, dev: int, nbytes: int) -> Callable[[], Any]:
        raise NotImplementedError

    def make_h2d(self, dev: int, nbytes: int) -> Callable[[], Any]:
        raise CheckError("host-to-device copies need a GPU")

    def make_d2h(self, dev: int, nbytes: int) -> Callable[[], Any]:
        raise CheckError("device-to-host copies need a GPU")

    def make_p2p(self, src: int, dst: int, nbytes: int) -> tuple[Callable[[], Any], bool]:
        raise CheckError("peer-to-peer copies need two GPUs")

    def make_stress(self, dev: int, n: int) -> StressState:
        raise NotImplementedError

    def sync(self, dev: int) -> None:
        """Wait until all work queued on `dev` is done."""

    def timer_start(self, dev: int) -> Any:
        self.sync(dev)
        return time.perf_counter()

    def timer_stop(self, dev: int, token: Any) -> float:
        self.sync(dev)
        return time.perf_counter() - float(token)

    def release(self) -> None:
        """Free what the last check allocated."""

    def is_alloc_error(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError)


class StressState:
    """Repeated GEMMs compared with a reference result, as gpu-burn does."""

    def verify_reference(self) -> float:
        """Largest relative error of a few reference rows against a float64 product."""
        raise NotImplementedError

    def step(self) -> None:
        """One GEMM plus a comparison with the reference (counted on the device, no sync)."""
        raise NotImplementedError

    def mismatches(self) -> int:
        raise NotImplementedError

    flops_per_step = 0.0


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

    def make_gemm(self, dev: int, check: str, n: int) -> Callable[[], Any]:
        t = self.t
        if check == "gemm_fp8":
            a = self._randn((n, n), t.bfloat16, dev).to(t.float8_e4m3fn)
            # _scaled_mm wants its second operand column-major.
            b = self._randn((n, n), t.bfloat16, dev).to(t.float8_e4m3fn).t().contiguous().t()
            one = t.ones((), dtype=t.float32, device=self._dev(dev))

            def fp8() -> None:
                t._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=t.bfloat16)

            return fp8
        dtype = {"gemm_fp32": t.float32, "gemm_tf32": t.float32, "gemm_fp16": t.float16,
                 "gemm_bf16": t.bfloat16}[check]
        a, b = self._randn((n, n), dtype, dev), self._randn((n, n), dtype, dev)
        c = t.empty((n, n), dtype=dtype, device=self._dev(dev))
        tf32 = check == "gemm_tf32"

        def gemm() -> None:
            if self.cuda:
                # Set on every call: fp32 must not silently run on TF32 tensor cores and vice versa.
                t.backends.cuda.matmul.allow_tf32 = tf32
                t.backends.cudnn.allow_tf32 = tf32
            t.matmul(a, b, out=c)

        return gemm

    def make_copy(self, dev: int, nbytes: int) -> Callable[[], Any]:
        n = nbytes // 4
        src = self.t.ones(n, dtype=self.t.float32, device=self._dev(dev))
        dst = self.t.empty_like(src)
        return lambda: dst.copy_(src)

    def make_triad(self, dev: int, nbytes: int) -> Callable[[], Any]:
        n = nbytes // 4
        b = self.t.ones(n, dtype=self.t.float32, device=self._dev(dev))
        c = self.t.ones_like(b)
        a = self.t.empty_like(b)
        return lambda: self.t.add(b, c, alpha=3.0, out=a)

    def make_h2d(self, dev: int, nbytes: int) -> Callable[[], Any]:
        if not self.cuda:
            raise CheckError("host-to-device copies need a GPU")
        host = self.t.empty(nbytes, dtype=self.t.uint8, pin_memory=True)
        devbuf = self.t.empty(nbytes, dtype=self.t.uint8, device=self._dev(dev))
        return lambda: devbuf.copy_(host, non_blocking=True)

    def make_d2h(self, dev: int, nbytes: int) -> Callable[[], Any]:
        if not self.cuda:
            raise CheckError("device-to-host copies need a GPU")
        host = self.t.empty(nbytes, dtype=self.t.uint8, pin_memory=True)
        devbuf = self.t.empty(nbytes, dtype=self.t.uint8, device=self._dev(dev))
        return lambda: host.copy_(devbuf, non_blocking=True)

    def make_p2p(self, src: int, dst: int, nbytes: int) -> tuple[Callable[[], Any], bool]:
        if not self.cuda:
            raise CheckError("peer-to-peer copies need two GPUs")
        peer = bool(self.t.cuda.can_device_access_peer(dst, src))
        a = self.t.empty(nbytes, dtype=self.t.uint8, device=self._dev(src))
        b = self.t.empty(nbytes, dtype=self.t.uint8, device=self._dev(dst))
        return (lambda: b.copy_(a, non_blocking=True)), peer

    def make_stress(self, dev: int, n: int) -> StressState:
        return TorchStress(self, dev, n)

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

    def timer_stop(self, dev: int, token: Any) -> float:
        if not self.cuda:
            return super().timer_stop(dev, token)
        start, end = token
        with self.t.cuda.device(dev):
            end.record()
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
    def __init__(self, backend: TorchBackend, dev: int, n: int) -> None:
        t = self.t = backend.t
        self.backend = backend
        if backend.cuda:
            t.backends.cuda.matmul.allow_tf32 = False  # fp32 GEMMs, deterministic and exact to compare
        d = backend._dev(dev)
        self.a = t.randn(n, n, dtype=t.float32, device=d)
        self.b = t.randn(n, n, dtype=t.float32, device=d)
        self.ref = t.matmul(self.a, self.b)
        self.c = t.empty_like(self.ref)
        self.tol = 1e-3 * float(self.ref.abs().max())
        self.bad = t.zeros((), dtype=t.int64, device=d)
        self.flops_per_step = 2.0 * n**3

    def verify_reference(self) -> float:
        rows = self.a[:4].double() @ self.b.double()
        return float((self.ref[:4].double() - rows).abs().max() / rows.abs().max())

    def step(self) -> None:
        self.backend.t.matmul(self.a, self.b, out=self.c)
        self.bad += ((self.c - self.ref).abs() > self.tol).sum()

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

    def make_gemm(self, dev: int, check: str, n: int) -> Callable[[], Any]:
        np = self.np
        # NumPy's float16 matmul has no BLAS behind it: keep it small.
        dtype = np.float16 if check == "gemm_fp16" else np.float32
        n = min(n, 128) if check == "gemm_fp16" else n
        a = self.rng.standard_normal((n, n)).astype(dtype)
        b = self.rng.standard_normal((n, n)).astype(dtype)
        c = np.empty((n, n), dtype=dtype)
        self.last_gemm_n = n
        return lambda: np.matmul(a, b, out=c)

    def make_copy(self, dev: int, nbytes: int) -> Callable[[], Any]:
        src = self.np.ones(nbytes // 4, dtype=self.np.float32)
        dst = self.np.empty_like(src)
        return lambda: self.np.copyto(dst, src)

    def make_triad(self, dev: int, nbytes: int) -> Callable[[], Any]:
        np = self.np
        b = np.ones(nbytes // 4, dtype=np.float32)
        c = np.ones_like(b)
        a = np.empty_like(b)

        def triad() -> None:
            np.multiply(c, 3.0, out=a)
            np.add(a, b, out=a)

        return triad

    def make_stress(self, dev: int, n: int) -> StressState:
        return NumpyStress(self, n)


class NumpyStress(StressState):
    def __init__(self, backend: NumpyBackend, n: int) -> None:
        np = self.np = backend.np
        self.a = backend.rng.standard_normal((n, n)).astype(np.float32)
        self.b = backend.rng.standard_normal((n, n)).astype(np.float32)
        self.ref = self.a @ self.b
        self.c = np.empty_like(self.ref)
        self.tol = 1e-3 * float(np.abs(self.ref).max())
        self.bad = 0
        self.flops_per_step = 2.0 * n**3

    def verify_reference(self) -> float:
        rows = self.a[:4].astype(self.np.float64) @ self.b.astype(self.np.float64)
        return float(self.np.abs(self.ref[:4] - rows).max() / self.np.abs(rows).max())

    def step(self) -> None:
        self.np.matmul(self.a, self.b, out=self.c)
        self.bad += int(self.np.count_nonzero(self.np.abs(self.c - self.ref) > self.tol))

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

    def gemm_support(self, dev: int) -> dict[str, tuple[str, str] | None]:
        why = "not measured with the CuPy backend (install PyTorch with CUDA for it)"
        return {"gemm_fp32": None, "gemm_fp16": None, "gemm_tf32": ("inconclusive", "TF32 " + why),
                "gemm_bf16": ("inconclusive", "BF16 " + why), "gemm_fp8": ("inconclusive", "FP8 " + why)}

    def make_gemm(self, dev: int, check: str, n: int) -> Callable[[], Any]:
        cp = self.cp
        dtype = cp.float16 if check == "gemm_fp16" else cp.float32
        with cp.cuda.Device(dev):
            a = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dtype)
            b = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dtype)
            c = cp.empty((n, n), dtype=dtype)

        def gemm() -> None:
            with cp.cuda.Device(dev):
                cp.matmul(a, b, out=c)

        return gemm

    def make_copy(self, dev: int, nbytes: int) -> Callable[[], Any]:
        cp = self.cp
        with cp.cuda.Device(dev):
            src = cp.ones(nbytes // 4, dtype=cp.float32)
            dst = cp.empty_like(src)
        return lambda: cp.copyto(dst, src)

    def make_triad(self, dev: int, nbytes: int) -> Callable[[], Any]:
        cp = self.cp
        with cp.cuda.Device(dev):
            b = cp.ones(nbytes // 4, dtype=cp.float32)
            c = cp.ones_like(b)
            a = cp.empty_like(b)
        s = cp.float32(3.0)
        return lambda: self._triad(b, c, s, a)

    def _pinned(self, nbytes: int) -> Any:
        import numpy as np

        mem = self.cp.cuda.alloc_pinned_memory(nbytes)
        return np.frombuffer(mem, dtype=np.uint8, count=nbytes)

    def make_h2d(self, dev: int, nbytes: int) -> Callable[[], Any]:
        host = self._pinned(nbytes)
        with self.cp.cuda.Device(dev):
            devbuf = self.cp.empty(nbytes, dtype=self.cp.uint8)
        return lambda: devbuf.set(host)

    def make_d2h(self, dev: int, nbytes: int) -> Callable[[], Any]:
        host = self._pinned(nbytes)
        with self.cp.cuda.Device(dev):
            devbuf = self.cp.empty(nbytes, dtype=self.cp.uint8)
        return lambda: devbuf.get(out=host)

    def make_p2p(self, src: int, dst: int, nbytes: int) -> tuple[Callable[[], Any], bool]:
        cp = self.cp
        peer = bool(cp.cuda.runtime.deviceCanAccessPeer(dst, src))
        with cp.cuda.Device(src):
            a = cp.empty(nbytes, dtype=cp.uint8)
        with cp.cuda.Device(dst):
            b = cp.empty(nbytes, dtype=cp.uint8)
        return (lambda: cp.cuda.runtime.memcpyPeer(b.data.ptr, dst, a.data.ptr, src, nbytes)), peer

    def make_stress(self, dev: int, n: int) -> StressState:
        return CupyStress(self.cp, dev, n)

    def sync(self, dev: int) -> None:
        with self.cp.cuda.Device(dev):
            self.cp.cuda.Device(dev).synchronize()

    def timer_start(self, dev: int) -> Any:
        with self.cp.cuda.Device(dev):
            start, end = self.cp.cuda.Event(), self.cp.cuda.Event()
            start.record()
        return (start, end)

    def timer_stop(self, dev: int, token: Any) -> float:
        start, end = token
        with self.cp.cuda.Device(dev):
            end.record()
            end.synchronize()
        return float(self.cp.cuda.get_elapsed_time(start, end)) / 1000.0

    def release(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()

    def is_alloc_error(self, exc: BaseException) -> bool:
        return isinstance(exc, (MemoryError, self.cp.cuda.memory.OutOfMemoryError))


class CupyStress(StressState):
    def __init__(self, cp: Any, dev: int, n: int) -> None:
        self.cp, self.dev = cp, dev
        with cp.cuda.Device(dev):
            self.a = cp.random.standard_normal((n, n), dtype=cp.float32)
            self.b = cp.random.standard_normal((n, n), dtype=cp.float32)
            self.ref = self.a @ self.b
            self.c = cp.empty_like(self.ref)
            self.tol = 1e-3 * float(cp.abs(self.ref).max())
            self.bad = cp.zeros((), dtype=cp.int64)
        self.flops_per_step = 2.0 * n**3

    def verify_reference(self) -> float:
        with self.cp.cuda.Device(self.dev):
            rows = self.a[:4].astype(self.cp.float64) @ self.b.astype(self.cp.float64)
            return float(self.cp.abs(self.ref[:4] - rows).max() / self.cp.abs(rows).max())

    def step(self) -> None:
        cp = self.cp
        with cp.cuda.Device(self.dev):
            cp.matmul(self.a, self.b, out=self.c)
            self.bad += cp.count_nonzero(cp.abs(self.c - self.ref) > self.tol)

    def mismatches(self) -> int:
        return int(self.bad)


class NvccBackend(Backend):
    """CUDA C (bench_kernels.cu beside this file) built with nvcc and cuBLAS.

    The binary measures one thing per invocation and prints the seconds of each repeat; the
    medians and figures are computed by the same Python harness as for the other backends.
    """

    name = "nvcc-cublas"
    harness = "gpu"

    def __init__(self, binary: str, gpus: list[dict[str, Any]]) -> None:
        self.binary = binary
        self.gpus = gpus

    @classmethod
    def build(cls, workdir: str, gpus: list[dict[str, Any]], emitter: Emitter) -> NvccBackend:
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_kernels.cu")
        if not os.path.exists(source):
            raise CheckError("bench_kernels.cu was not sent with the runner")
        binary = os.path.join(workdir, "gpuws_bench_kernels")
        emitter.log("building the CUDA C benchmark with nvcc")
        argv = ["nvcc", "-O3", "-std=c++17", "-o", binary, source, "-lcublas"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
        if proc.returncode != 0:
            raise CheckError("nvcc build failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:300])
        return cls(binary, gpus)

    def device_ids(self) -> list[int]:
        return [g["index"] for g in self.gpus]

    def gemm_support(self, dev: int) -> dict[str, tuple[str, str] | None]:
        cc = to_float(next((g.get("compute_capability") for g in self.gpus if g["index"] == dev), None)) or 0.0
        support: dict[str, tuple[str, str] | None] = dict.fromkeys(GEMM_CHECKS)
        support["gemm_fp8"] = ("inconclusive", "FP8 GEMM is measured with the PyTorch backend only")
        if cc and cc < 8.0:
            support["gemm_tf32"] = ("skipped", "TF32 needs compute capability 8.0 or newer")
            support["gemm_bf16"] = ("skipped", "BF16 tensor cores need compute capability 8.0 or newer")
        return support

    def _measure(self, dev: int, what: str, size: int, repeats: int) -> list[float]:
        argv = [self.binary, what, str(dev), str(size), str(repeats)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise CheckError(f"{what}: " + (proc.stderr.strip() or f"exit status {proc.returncode}")[:300])
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        if "error" in data:
            raise CheckError(f"{what}: {data['error']}")
        self.extra = data
        return [float(x) for x in data["seconds"]]

    def measured_times(self, dev: int, what: str, size: int, repeats: int) -> list[float]:
        return self._measure(dev, what, size, repeats)


# ------------------------------------------------------------------------------ the harness


def median_or_none(times: list[float]) -> float | None:
    good = [t for t in times if t > 0]
    return statistics.median(good) if good else None


class Harness:
    """Runs every check through one backend, with warmup, timing and medians done the same way
    whatever the backend, and reports each figure or why it could not be had."""

    def __init__(self, backend: Backend, emitter: Emitter, mode: str, deadline: float,
                 gpus: list[dict[str, Any]]) -> None:
        self.b = backend
        self.out = emitter
        self.mode = mode
        self.deadline = deadline
        self.gpus = gpus
        self.sizes = SIZES[backend.harness][mode]
        self.single_gemm: dict[int, float] = {}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check_time(self) -> None:
        if self.left() <= 0:
            raise Deadline()

    def _result(self, check: str, **kw: Any) -> None:
        self.out.result(check, harness=self.b.harness, **kw)

    def time_op(self, dev: int, fn: Callable[[], Any], warmup: int, repeats: int) -> list[float]:
        """Seconds per call: warmup calls first, then `repeats` timed calls (events on a GPU)."""
        for _ in range(warmup):
            fn()
        self.b.sync(dev)
        times = []
        for _ in range(repeats):
            if self.left() <= 0:
                break
            token = self.b.timer_start(dev)
            fn()
            times.append(self.b.timer_stop(dev, token))
        return times

    def guarded(self, check: str, gpu: int | None, unit: str, body: Callable[[], dict[str, Any]]) -> None:
        """Run one measurement; turn every way it can fail into an inconclusive result."""
        self.check_time()
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
            self._result(check, gpu=gpu, unit=unit, **kw)
        finally:
            self.b.release()

    def figure(self, times: list[float], amount: float, scale: float, **details: Any) -> dict[str, Any]:
        """A throughput figure from the median time; zero completed repeats is inconclusive."""
        med = median_or_none(times)
        if med is None:
            return {"status": "inconclusive", "reason": "zero iterations completed (timeout)"}
        return {"value": round(amount / med / scale, 3),
                "details": {**details, "repeats": len(times), "median_s": med,
                            "min_s": min(times), "max_s": max(times)}}

    # --- checks

    def gemm(self, dev: int) -> None:
        support = self.b.gemm_support(dev)
        for check in GEMM_CHECKS:
            blocked = support.get(check)
            if blocked is not None:
                self._result(check, gpu=dev, unit="TFLOP/s", status=blocked[0], reason=blocked[1])
                continue

            def body(check: str = check) -> dict[str, Any]:
                if isinstance(self.b, NvccBackend):
                    n = self.sizes["gemm_n"]
                    times = self.b.measured_times(dev, check, n, self.sizes["repeats"])
                else:
                    fn = self.b.make_gemm(dev, check, self.sizes["gemm_n"])
                    n = getattr(self.b, "last_gemm_n", self.sizes["gemm_n"])
                    times = self.time_op(dev, fn, self.sizes["warmup"], self.sizes["repeats"])
                fig = self.figure(times, 2.0 * n**3, 1e12, n=n)
                if check == "gemm_bf16" and "value" in fig:
                    self.single_gemm[dev] = fig["value"]
                return fig

            self.guarded(check, dev, "TFLOP/s", body)

    def memory(self, dev: int) -> None:
        nbytes = self.sizes["mem_bytes"]
        for check, factory, traffic in (("mem_copy", "make_copy", 2), ("mem_triad", "make_triad", 3)):
            def body(factory: str = factory, traffic: int = traffic, check: str = check) -> dict[str, Any]:
                if isinstance(self.b, NvccBackend):
                    times = self.b.measured_times(dev, check, nbytes, self.sizes["repeats"])
                else:
                    fn = getattr(self.b, factory)(dev, nbytes)
                    times = self.time_op(dev, fn, self.sizes["warmup"], self.sizes["repeats"])
                return self.figure(times, traffic * nbytes, 1e9, buffer_bytes=nbytes)

            self.guarded(check, dev, "GB/s", body)

    def transfers(self, dev: int) -> None:
        nbytes = self.sizes["xfer_bytes"]
        for check, factory in (("h2d", "make_h2d"), ("d2h", "make_d2h")):
            def body(factory: str = factory, check: str = check) -> dict[str, Any]:
                if isinstance(self.b, NvccBackend):
                    times = self.b.measured_times(dev, check, nbytes, self.sizes["repeats"])
                else:
                    fn = getattr(self.b, factory)(dev, nbytes)
                    times = self.time_op(dev, fn, self.sizes["warmup"], self.sizes["repeats"])
                return self.figure(times, nbytes, 1e9, buffer_bytes=nbytes, pinned=True)

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
        for src, dst in pairs:
            def body(src: int = src, dst: int = dst) -> dict[str, Any]:
                fn, peer = self.b.make_p2p(src, dst, nbytes)
                for _ in range(self.sizes["warmup"]):
                    fn()
                times = []
                for _ in range(self.sizes["repeats"]):
                    if self.left() <= 0:
                        break
                    self.b.sync(src)
                    self.b.sync(dst)
                    t0 = time.perf_counter()
                    fn()
                    self.b.sync(src)
                    self.b.sync(dst)
                    times.append(time.perf_counter() - t0)
                fig = self.figure(times, nbytes, 1e9, buffer_bytes=nbytes, src=src, dst=dst, peer_access=peer)
                return fig

            self.guarded("p2p", src, "GB/s", lambda body=body, dst=dst: {**body(), "peer": dst})

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

            one = wall(devs[:1])
            self.check_time()
            everyone = wall(devs)
            speedup = (len(devs) * one) / everyone
            return {"value": round(speedup / len(devs), 3),
                    "details": {"gpus": len(devs), "speedup": round(speedup, 3), "dtype": kind[5:],
                                "single_s": one, "all_s": everyone, "flagged_below": 0.8}}

        self.guarded("scaling", None, "efficiency", body)

    def stress(self, dev: int, seconds: float) -> None:
        def body() -> dict[str, Any]:
            with Sampler() as sampler:
                if isinstance(self.b, NvccBackend):
                    self.b.measured_times(dev, "stress", self.sizes["stress_n"], max(1, int(seconds)))
                    extra = self.b.extra
                    iterations, bad, ref_err = int(extra["iterations"]), int(extra["mismatches"]), None
                    elapsed = float(sum(extra["seconds"]))
                else:
                    state = self.b.make_stress(dev, self.sizes["stress_n"])
                    ref_err = state.verify_reference()
                    iterations, t0 = 0, time.perf_counter()
                    end = t0 + seconds
                    while time.perf_counter() < end and self.left() > 0:
                        state.step()
                        iterations += 1
                        if iterations % 8 == 0:
                            self.b.sync(dev)  # keep the queue short so the time limit holds
                    self.b.sync(dev)
                    elapsed = time.perf_counter() - t0
                    bad = state.mismatches()
            if iterations == 0:
                return {"status": "inconclusive", "reason": "zero iterations completed"}
            details: dict[str, Any] = {"iterations": iterations, "seconds": round(elapsed, 3),
                                       "reference_rel_error": ref_err,
                                       "telemetry": sampler.summary(dev) if self.b.harness == "gpu" else None}
            if ref_err is not None and ref_err > 1e-2:
                # The very first product is already wrong: count it, whatever the repeats say.
                details["reference_wrong"] = True
                bad = max(bad, 1)
            return {"value": bad, "details": details}

        self.guarded("stress", dev, "mismatches", body)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


# ------------------------------------------------------------------------------ environment


def environment_checks(out: Emitter, gpus: list[dict[str, Any]], runtime: str | None,
                       expected: dict[str, Any], simulated: bool) -> dict[str, Any]:
    """Facts about the driver and each card; gpuws judges them (see gpuws.core.bench.verdicts)."""
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
                                  "power_w": to_float(r.get("power.draw"))},
            "env.nvlink": nvlink_status(g["index"]),
        }
        for check, f in facts.items():
            out.result(check, gpu=g["index"], status="ok", harness=label, simulated=simulated, facts=f)
    out.result("env.topology", status="ok", harness=label, simulated=simulated,
               facts={"gpu_count": len(gpus), "mig_modes": [g.get("mig_mode") for g in gpus],
                      "names": [g.get("name") for g in gpus], "expected": expected or None})
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

# Plausible peaks for the simulated models only (the datasheet catalog lives in gpuws, not here):
# fp32, tf32, fp16, bf16, fp8 TFLOP/s; memory GB/s; host link GB/s; NVLink GB/s.
SIM_MODELS = {
    "H200": (67, 494, 989, 989, 1979, 4800, 55, 900),
    "H100": (67, 494, 989, 989, 1979, 3350, 55, 900),
    "A100": (19.5, 156, 312, 312, None, 2039, 25, 600),
    "L40S": (91.6, 183, 362, 362, 733, 864, 25, None),
    "L4": (30.3, 60, 121, 121, 242, 300, 25, None),
    "A10": (31.2, 62.5, 125, 125, None, 600, 25, None),
    "T4": (8.1, None, 65, None, None, 320, 12, None),
}


def sim_peaks(name: str) -> tuple[Any, ...]:
    return next((v for k, v in SIM_MODELS.items() if k in name.upper()),
                (20.0, 80.0, 160.0, 160.0, None, 1000.0, 20.0, None))


def simulated_run(out: Emitter, gpus: list[dict[str, Any]], mode: str, seed: int | None,
                  deadline: float) -> None:
    """Plausible figures (about 80% of peak with noise; now and then one degraded GPU), each
    labelled simulated. The gpuws simulated host only: never shown as a real measurement."""
    rng = random.Random(seed)
    degraded = rng.choice([g["index"] for g in gpus]) if gpus and rng.random() < 0.25 else None
    forced = os.environ.get("GPUWS_SIM_BENCH_DEGRADED")
    if forced is not None and forced.strip().lstrip("-").isdigit():
        degraded = int(forced) if int(forced) >= 0 else None
    if degraded is not None:
        out.log(f"simulation: GPU {degraded} plays a degraded card this run", "warning")
    pause = 0.02 if mode == "quick" else 0.1

    def emit(check: str, gpu: int | None, value: float | None, unit: str, **kw: Any) -> None:
        if time.monotonic() > deadline:
            raise Deadline()
        time.sleep(pause)
        out.result(check, gpu=gpu, value=None if value is None else round(value, 3), unit=unit,
                   harness="simulated", simulated=True, **kw)

    for g in gpus:
        idx = g["index"]
        peaks = sim_peaks(g["name"])
        slow = 0.45 if idx == degraded else 1.0
        if "GRID" in g["name"].upper() or (g.get("mig_mode") or "").lower() == "enabled":
            slow *= 0.25  # a slice of the card
        for k, check in enumerate(GEMM_CHECKS):
            peak = peaks[k]
            if peak is None:
                emit(check, idx, None, "TFLOP/s", status="skipped", reason="not supported by this GPU")
                continue
            emit(check, idx, peak * rng.uniform(0.72, 0.88) * slow, "TFLOP/s")
        emit("mem_copy", idx, peaks[5] * rng.uniform(0.82, 0.92) * slow, "GB/s")
        emit("mem_triad", idx, peaks[5] * rng.uniform(0.80, 0.90) * slow, "GB/s")
        emit("h2d", idx, peaks[6] * rng.uniform(0.80, 0.92), "GB/s")
        emit("d2h", idx, peaks[6] * rng.uniform(0.80, 0.92), "GB/s")
    if len(gpus) > 1:
        for k, g in enumerate(gpus):
            peer = gpus[(k + 1) % len(gpus)]
            # The simulated host has no NVLink: peer copies go over PCIe at the slower card's speed.
            link = min(sim_peaks(g["name"])[6], sim_peaks(peer["name"])[6]) * rng.uniform(0.75, 0.88)
            emit("p2p", g["index"], link, "GB/s", peer=peer["index"])
        eff = rng.uniform(0.86, 0.97) * (0.7 if degraded is not None else 1.0)
        emit("scaling", None, eff, "efficiency", details={"gpus": len(gpus)})
    else:
        emit("p2p", None, None, "GB/s", status="skipped", reason="one GPU: peer-to-peer needs two or more")
        emit("scaling", None, None, "efficiency", status="skipped",
             reason="one GPU: multi-GPU scaling needs two or more")
    for g in gpus:
        hot = g["index"] == degraded
        emit("stress", g["index"], 0, "mismatches",
             details={"iterations": rng.randint(400, 600) if mode == "quick" else rng.randint(2400, 3600),
                      "seconds": 10.0 if mode == "quick" else 60.0,
                      "telemetry": {"temp_max_c": rng.randint(86, 91) if hot else rng.randint(58, 72),
                                    "sm_clock_min_mhz": 1200 if hot else 1755, "sm_clock_max_mhz": 1980,
                                    "throttle_reasons_seen": ["hw_thermal_slowdown"] if hot else []}})


# ------------------------------------------------------------------------------ main


def select_backend(choice: str, gpus: list[dict[str, Any]], workdir: str | None,
                   out: Emitter) -> tuple[Backend | None, list[str]]:
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
        if shutil.which("nvcc") and workdir:
            try:
                return NvccBackend.build(workdir, gpus, out), tried
            except Exception as exc:
                tried.append(f"nvcc: {first_line(exc)}")
        else:
            tried.append("nvcc: not found" if not shutil.which("nvcc") else "nvcc: no work directory")
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
    gpus, no_gpu_reason = list_gpus()
    summary["gpus"] = gpus
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
            env = environment_checks(out, gpus, "12.4", expected, True)
            summary["cuda_driver_version"] = env["driver_cuda_version"]
            step(2, "simulated backend")
            out.result("toolchain", status="ok", harness="simulated", simulated=True,
                       facts={"backend": "simulated"})
            step(3, "simulated measurements")
            simulated_run(out, gpus, args.mode, args.seed, deadline)
            step(total, "done")
            return summary

        step(1, "environment")
        backend, tried = (None, []) if args.backend == "cpu" else select_backend(
            args.backend, gpus, args.workdir, out)
        for line in tried:
            out.log(f"backend not usable: {line}")
        env = environment_checks(out, gpus, backend.runtime_version() if backend else None, expected,
                                 False)
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
        harness = Harness(backend, out, args.mode, deadline, gpus)
        devs = backend.device_ids()
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
        stress_s = SIZES[backend.harness][args.mode]["stress_s"]
        step(8, f"stress with correctness check ({stress_s:g} s per device)")
        for d in devs:
            seconds = min(stress_s, harness.left() - 2.0)  # keep time for the summary
            if seconds <= 0:
                raise Deadline()
            harness.stress(d, seconds)
    except Deadline:
        summary["timed_out"] = True
        out.result("timeout", status="inconclusive",
                   reason=f"the overall time limit ({args.timeout:g} s) was reached; later checks did not run")
    except Exception as exc:
        summary["error"] = f"{type(exc).__name__}: {first_line(exc)}"
        out.log(f"runner error: {summary['error']}", "error")
    finally:
        summary["duration_s"] = round(time.monotonic() - started, 3)
    return summary


def parse_args(argv: list[str] | None) -> argparse.Namespace:
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

    def on_signal(signum: int, _frame: Any) -> None:
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
