"""gpuws telemetry agent: streams NVML readings of every GPU as JSON lines.

Sent over SSH and run by the host's python3 as `python3 - --hz 10` with this file on stdin;
nothing is installed or left on the host. Standalone on purpose: stdlib plus `pynvml`
(nvidia-ml-py) if the host has it. No gpuws imports (an import-linter contract checks this).

Output, one JSON object per line, flushed at once:
  {"type": "hello", "protocol": 1, "source": "nvml", "simulated": false, "driver": "...", "hz": 10}
  {"type": "batch", "t": <host unix time>, "gpus": [<device record>, ...]}     (once per period)
  {"type": "unavailable", "reason": "..."}    then exit status 3: the client falls back to nvidia-smi
A device record carries the gpuws sample field names (see gpuws.core.telemetry.sample) plus the raw
`throttle_mask`; a value NVML cannot give is null.

Written for any python3 >= 3.6 (old distributions' system python), hence no annotations and no
newer syntax. Stops on SIGTERM/SIGHUP/SIGINT, when stdout is closed (EPIPE), or when its parent -- the SSH
session -- goes away. (Its stdin carried the script, so stdin is already at EOF when it runs.)
"""

import argparse
import contextlib
import json
import os
import signal
import sys
import time

PROTOCOL = 1
EXIT_NO_NVML = 3
MIN_HZ = 0.2
MAX_HZ = 20.0
_NVML_PSTATE_UNKNOWN = 32


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="gpuws-telemetry-agent")
    parser.add_argument("--hz", type=float, default=1.0, help="samples per second (0.2-20)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many batches (0: run until stopped)")
    parser.add_argument("--no-processes", action="store_true", help="skip per-process GPU memory")
    args = parser.parse_args(argv)
    if not MIN_HZ <= args.hz <= MAX_HZ:
        parser.error(f"--hz must be between {MIN_HZ:g} and {MAX_HZ:g}")
    return args


def _emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class _Stop(Exception):
    pass


def _on_signal(signum, frame):
    raise _Stop()


class NvmlReader:
    """Reads every GPU (and MIG device) through pynvml; each query that fails is None."""

    def __init__(self, nvml, processes=True):
        self.nvml = nvml
        self.processes = processes
        self.error = nvml.NVMLError
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        self.static = [self._static(h) for h in self.handles]

    def _try(self, fn, *args):
        try:
            return fn(*args)
        except self.error:
            return None
        except (AttributeError, TypeError, ValueError, OSError):
            return None  # an old nvidia-ml-py without this call, or an odd return value

    def _static(self, h):
        n = self.nvml
        clock_max = getattr(n, "nvmlDeviceGetMaxClockInfo", None)
        return {
            "uuid": _text(self._try(n.nvmlDeviceGetUUID, h)),
            "sm_clock_max_mhz": self._try(clock_max, h, n.NVML_CLOCK_SM) if clock_max else None,
            "mem_clock_max_mhz": self._try(clock_max, h, n.NVML_CLOCK_MEM) if clock_max else None,
            "pcie_gen_max": self._try(n.nvmlDeviceGetMaxPcieLinkGeneration, h),
            "pcie_width_max": self._try(n.nvmlDeviceGetMaxPcieLinkWidth, h),
        }

    def read(self):
        out = []
        for index, h in enumerate(self.handles):
            rec = self._device(h, index, self.static[index])
            out.append(rec)
            out.extend(self._mig_devices(h, index))
        return out

    def _device(self, h, index, static):
        n = self.nvml
        t = self._try
        rec = {"gpu": index}
        rec.update(static)
        util = t(n.nvmlDeviceGetUtilizationRates, h)
        rec["util_gpu_pct"] = getattr(util, "gpu", None)
        rec["util_mem_pct"] = getattr(util, "memory", None)
        mem = t(n.nvmlDeviceGetMemoryInfo, h)
        rec["mem_used_mib"] = _mib(getattr(mem, "used", None))
        rec["mem_total_mib"] = _mib(getattr(mem, "total", None))
        rec["temp_c"] = t(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU)
        rec["power_w"] = _watts(t(n.nvmlDeviceGetPowerUsage, h))
        rec["power_limit_w"] = _watts(t(n.nvmlDeviceGetEnforcedPowerLimit, h))
        rec["sm_clock_mhz"] = t(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM)
        rec["mem_clock_mhz"] = t(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM)
        rec["pcie_rx_kib_s"] = t(n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_RX_BYTES)
        rec["pcie_tx_kib_s"] = t(n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_TX_BYTES)
        rec["pcie_gen_current"] = t(n.nvmlDeviceGetCurrPcieLinkGeneration, h)
        rec["pcie_width_current"] = t(n.nvmlDeviceGetCurrPcieLinkWidth, h)
        rec["fan_pct"] = t(n.nvmlDeviceGetFanSpeed, h)
        pstate = t(n.nvmlDeviceGetPerformanceState, h)
        rec["pstate"] = f"P{pstate}" if isinstance(pstate, int) and pstate != _NVML_PSTATE_UNKNOWN else None
        reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            n, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        rec["throttle_mask"] = t(reasons, h) if reasons else None
        rec["ecc_errors_corrected"] = t(
            n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_VOLATILE_ECC
        )
        rec["ecc_errors_uncorrected"] = t(
            n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC
        )
        enc = t(n.nvmlDeviceGetEncoderUtilization, h)
        dec = t(n.nvmlDeviceGetDecoderUtilization, h)
        rec["enc_util_pct"] = enc[0] if isinstance(enc, (list, tuple)) and enc else None
        rec["dec_util_pct"] = dec[0] if isinstance(dec, (list, tuple)) and dec else None
        rec["processes"] = self._processes(h) if self.processes else None
        return rec

    def _processes(self, h):
        procs = self._try(self.nvml.nvmlDeviceGetComputeRunningProcesses, h)
        if procs is None:
            return None
        out = []
        for p in procs:
            pid = getattr(p, "pid", None)
            if not isinstance(pid, int):
                continue
            out.append({"pid": pid, "name": _process_name(self.nvml, pid, self._try), "used_mib": _mib(
                getattr(p, "usedGpuMemory", None))})
        return out

    def _mig_devices(self, h, index):
        n = self.nvml
        mode = self._try(n.nvmlDeviceGetMigMode, h)
        if not mode or mode[0] != getattr(n, "NVML_DEVICE_MIG_ENABLE", 1):
            return []
        out = []
        for device in range(self._try(n.nvmlDeviceGetMaxMigDeviceCount, h) or 0):
            mh = self._try(n.nvmlDeviceGetMigDeviceHandleByIndex, h, device)
            if mh is None:
                continue  # a free slot: NVML reports NOT_FOUND
            rec = self._device(mh, index, {
                "uuid": _text(self._try(n.nvmlDeviceGetUUID, mh)),
                "sm_clock_max_mhz": None, "mem_clock_max_mhz": None, "pcie_gen_max": None, "pcie_width_max": None,
            })
            rec["mig"] = {
                "parent_gpu": index,
                "device": device,
                "gi": self._try(n.nvmlDeviceGetGpuInstanceId, mh),
                "ci": self._try(n.nvmlDeviceGetComputeInstanceId, mh),
            }
            out.append(rec)
        return out


def _text(value):
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def _mib(nbytes):
    return round(nbytes / 1048576, 1) if isinstance(nbytes, int) else None


def _watts(milliwatts):
    return milliwatts / 1000.0 if isinstance(milliwatts, (int, float)) else None


def _process_name(nvml, pid, attempt):
    get_name = getattr(nvml, "nvmlSystemGetProcessName", None)
    name = _text(attempt(get_name, pid)) if get_name else None
    if name:
        return name[:256]
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()[:256] or None
    except OSError:
        return None


def _load_nvml():
    """(pynvml module, None) or (None, why NVML cannot be used)."""
    try:
        import pynvml  # optional: only on hosts with nvidia-ml-py
    except ImportError:
        return None, "python module pynvml (nvidia-ml-py) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML did not initialise: {type(exc).__name__}: {str(exc)[:200]}"
    return pynvml, None


def main(argv=None):
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _on_signal)
    parent = os.getppid()
    try:
        nvml, why = _load_nvml()
        if nvml is None:
            _emit({"type": "unavailable", "reason": why})
            return EXIT_NO_NVML
        try:
            reader = NvmlReader(nvml, processes=not args.no_processes)
            driver = _text(_safe(nvml.nvmlSystemGetDriverVersion))
        except nvml.NVMLError as exc:
            _emit({"type": "unavailable", "reason": f"NVML failed listing GPUs: {str(exc)[:200]}"})
            return EXIT_NO_NVML
        _emit({
            "type": "hello",
            "protocol": PROTOCOL,
            "source": "nvml",
            "simulated": getattr(nvml, "GPUWS_SIMULATED", False) is True,
            "driver": driver,
            "hz": args.hz,
            "gpu_count": len(reader.handles),
        })
        period = 1.0 / args.hz
        deadline = time.monotonic()
        sent = 0
        while True:
            started = time.time()
            gpus = reader.read()
            # Stamped mid-read: reading many GPUs takes a moment, and the values span it.
            _emit({"type": "batch", "t": (started + time.time()) / 2, "gpus": gpus})
            sent += 1
            if args.count and sent >= args.count:
                return 0
            if os.getppid() != parent:
                return 0  # the SSH session that started us is gone
            deadline += period
            delay = deadline - time.monotonic()
            if delay < 0:  # fell behind (slow NVML): skip, never burst
                deadline = time.monotonic()
                delay = 0
            time.sleep(delay)
    except (_Stop, BrokenPipeError, KeyboardInterrupt):
        return 0
    finally:
        _quiet_stdout()


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None


def _quiet_stdout():
    # After EPIPE, Python's own flush at exit would print a traceback; point stdout at devnull.
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
