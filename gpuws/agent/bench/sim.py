"""The gpuws simulated GPU host's figures, labelled simulated, with the faults it plays."""

from __future__ import annotations

import os
import random
import time
from typing import Any

from .host import busy_reason
from .output import GEMM_CHECKS, Deadline, Emitter, Record
from .timing import SIZES, window_stats
from .verify import GEMM_TOLERANCE, STRESS_TOLERANCE, ArrayOps, answer_check, array_grid, checksum_check, gemm_samples

SIM_FAULTS_ENV = "GPUWS_SIM_FAULTS"  # faults the gpuws simulated host plays (see gpuws/sim/faults.py)


SIM_JOBS_PAUSED_ENV = "GPUWS_SIM_JOBS_PAUSED"


SIM_FAULT_KINDS = ("bench-nan", "copy-corrupt", "busy", "throttle", "slow-link", "gemm-wrong", "cuda-invisible",
                   "fabric-down", "gemm-element", "gemm-tile")


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
    """The simulated model's peaks (SIM_MODELS' columns) for a GPU name."""
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


def sim_checks(fmt: str, kinds: set[str], seed: int) -> tuple[Record, Record] | None:
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


def simulated_run(out: Emitter, gpus: list[Record], mode: str, seed: int | None,
                  deadline: float, activity: dict[int, Record] | None = None,
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

    def clock_of(g: Record) -> int:
        return next((v for k, v in SIM_MAX_CLOCK.items() if k in g["name"].upper()), 1800)

    def factor(idx: int, t: float) -> float:
        return 1 / 3 if "throttle" in faults.get(idx, set()) and t >= SIM_THROTTLE_AFTER_S else 1.0

    def windows_under_load(g: Record, base: float, count: int,
                           span: float) -> tuple[list[float], Record]:
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

    def figure(rates: list[float], **details: Any) -> tuple[float, Record]:
        stats = window_stats(rates)
        return stats["median"], {**details, **{k: v for k, v in stats.items() if k != "median"}}

    def slice_of(g: Record) -> bool:
        return "GRID" in g["name"].upper() or (g.get("mig_mode") or "").lower() == "enabled"

    def mig_of(g: Record) -> bool:
        return (g.get("mig_mode") or "").lower() == "enabled"

    def checked(fmt: str, kinds: set[str], details: Record, prefix: str = "") -> None:
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
        found: Record = {}
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
