"""The checks themselves, run the same way through every backend (the harness), and CUDA-to-nvidia-smi matching."""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

from .backends import Backend, NvccBackend, StressState, Verify, stderr_tail
from .host import Sampler, busy_reason, csv_value, run_cmd, to_int
from .output import GEMM_CHECKS, CheckError, Deadline, Emitter, Record, first_line
from .timing import MIN_WARMUP_S, MIN_WINDOW_S, SIZES, run_share_problem, window_stats
from .verify import GEMM_TOLERANCE


class Harness:
    """Runs every check through one backend, with warmup, timing and medians done the same way
    whatever the backend, and reports each figure or why it could not be had."""

    def __init__(self, backend: Backend, emitter: Emitter, mode: str, deadline: float,
                 gpus: list[Record], sampler: Sampler | None = None,
                 busy: dict[int, Record] | None = None, smi_of: dict[int, int] | None = None) -> None:
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

    def guarded(self, check: str, gpu: int | None, unit: str, body: Callable[[], Record]) -> None:
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
               **details: Any) -> Record:
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
    def verified(fig: Record, checked: int, wrong: int) -> Record:
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
        """Every GEMM format on device `dev`: throughput, answers on a sampled grid, checksums."""
        support = self.b.gemm_support(dev)
        windows, window_s = self.sizes["windows"], self.sizes["window_s"]
        for check in GEMM_CHECKS:
            blocked = support.get(check)
            if blocked is not None:
                self._result(check, gpu=dev, unit="TFLOP/s", status=blocked[0], reason=blocked[1])
                continue

            def body(check: str = check) -> Record:
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
        """Device memory bandwidth: copy and triad, both verified."""
        nbytes = self.sizes["mem_bytes"]
        self._copies(dev, nbytes, (("mem_copy", "make_copy", 2), ("mem_triad", "make_triad", 3)))

    def transfers(self, dev: int) -> None:
        """Pinned host<->device copies, verified, then the link read under load."""
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
            def body(factory: str = factory, traffic: int = traffic, check: str = check) -> Record:
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
        """Peer-to-peer copies between pairs of `devs`, verified."""
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
            def body(src: int = src, dst: int = dst) -> Record:
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
        """Multi-GPU scaling: one GEMM stream on one device against all at once."""
        if len(devs) < 2:
            self._result("scaling", unit="efficiency", status="skipped",
                         reason="one GPU: multi-GPU scaling needs two or more")
            return
        if isinstance(self.b, NvccBackend):
            self._result("scaling", unit="efficiency", status="inconclusive",
                         reason="multi-GPU scaling is measured with the PyTorch or CuPy backend only")
            return

        def body() -> Record:
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
            details: Record = {"iterations": iterations[d], "seconds": round(elapsed, 3),
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


def match_devices(backend: Backend, gpus: list[Record],
                  out: Emitter) -> tuple[dict[int, int], list[Record]]:
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
            gpus: list[Record], sampler: Sampler, activity: dict[int, Record],
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
