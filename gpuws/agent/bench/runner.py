"""The run from start to summary, and the command line."""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import threading
import time
from types import FrameType

from .backends import cpu_backend, select_backend
from .checks import measure
from .host import Sampler, environment_checks, gpu_activity, host_is_simulated, list_gpus
from .output import CPU_LABEL, GEMM_CHECKS, NO_TOOLCHAIN, PROTOCOL, Deadline, Emitter, Record, first_line
from .sim import SIM_FAULTS_ENV, SIM_JOBS_PAUSED_ENV, sim_faults, simulated_run
from .timing import OVERALL_TIMEOUT


def run(args: argparse.Namespace, out: Emitter) -> Record:
    """The whole run: environment, toolchain, every check; the summary (also after a timeout or error)."""
    started = time.monotonic()
    deadline = started + args.timeout
    summary: Record = {"type": "summary", "protocol": PROTOCOL, "mode": args.mode,
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
    """The command line: JSON lines on stdout, the summary last; exit status 0 (2 for a bad --expected)."""
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
