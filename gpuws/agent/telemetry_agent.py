"""gpuws telemetry agent: streams NVML readings of every GPU, compactly, as JSON lines.

Sent over SSH and run by the host's python3 as `python3 - --hz 10` with this file on stdin;
nothing is installed or left on the host. Standalone on purpose: stdlib plus `pynvml`
(nvidia-ml-py) if the host has it. No gpuws imports (an import-linter contract checks this).

Protocol 2, one JSON value per line, written in as few writes as possible:
  {"type": "hello", "protocol": 2, "source": "nvml", "simulated": false, "driver": "...", "hz": 10,
   "gpu_count": 4, "fields": ["util_gpu_pct", ...]}        the dynamic fields, by position
  {"type": "devices", "devices": [{"gpu": 0, "uuid": ..., "name": ..., "sm_clock_max_mhz": ...,
   "mig": null}, ...]}      static facts; at start and again only when a fact or the device list changes
  [t, [d, f, v, f, v, ...], ...]     one sample: host time `t`, then for each device `d` (position in
                                     the devices list) whose values changed, field positions `f` and
                                     new values `v`; an unchanged value is not sent, so [t] is a sample
                                     in which nothing changed
  {"type": "procs", "d": {"0": [[pid, used_mib, sm_util_pct], ...]}, "who": {"<pid>": [user, command, name]}}
                                     a device's processes (read once a second) when the set changed,
                                     or every 5 s when only their memory or SM use did; null when
                                     NVML cannot tell; "who" names each pid once a stream. Sent
                                     before the sample line of its tick: that sample carries it
  {"type": "host", "cpu_pct": .., "ram_used_mib": .., "ram_total_mib": .., "load": [1m, 5m, 15m]}
                                     the host's CPU, memory and load average from /proc, at most 1 Hz
  {"type": "unavailable", "reason": "..."}    then exit status 3: the client falls back to nvidia-smi
A value NVML cannot give is null. `pstate` is the P-state number, `throttle_mask` NVML's raw mask.
SLOW_FIELDS (PCIe throughput and link state, fan, ECC counters, codec use) and processes are read
once a second.
On a MIG device, where NVML's utilisation rates are not supported, `util_gpu_pct` (share of time a
kernel ran on the slice) and `sm_active_pct` (share of the slice's SMs busy) come from GPM (Hopper
and later: nvmlGpmMigSampleGet on the parent GPU, rates between two samples a second apart); null
where GPM is not supported or not in this nvidia-ml-py. A field the client does not know is skipped
by it, so new fields need no new protocol number.

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

PROTOCOL = 2
EXIT_NO_NVML = 3
MIN_HZ = 0.2
MAX_HZ = 20.0
_NVML_PSTATE_UNKNOWN = 32
STATIC_EVERY_S = 2.0  # how often static facts and the device list (MIG changes) are read again
SLOW_EVERY_S = 1.0  # host figures and process memory/utilisation: at most this often
PROC_VALUES_EVERY_S = 5.0  # a process's memory and SM use are sent this often; a new or gone process at once
COMMAND_LIMIT = 512  # characters of a process's command line sent (the client shortens it further)

# The dynamic fields of a sample, by position (sent once, in hello).
FIELDS = (
    "util_gpu_pct", "util_mem_pct", "mem_used_mib", "temp_c", "power_w", "sm_clock_mhz", "mem_clock_mhz",
    "pcie_rx_kib_s", "pcie_tx_kib_s", "pcie_gen_current", "pcie_width_current", "fan_pct", "pstate",
    "throttle_mask", "ecc_errors_corrected", "ecc_errors_uncorrected", "enc_util_pct", "dec_util_pct",
    "sm_active_pct",
)
# Read at most once a second (SLOW_EVERY_S), whatever the sample rate: they rarely change.
# PCIe throughput too: NVML measures it over its own 20 ms window (and each call waits for that
# window), so reading it faster only costs host time and adds noise.
SLOW_FIELDS = ("pcie_rx_kib_s", "pcie_tx_kib_s", "pcie_gen_current", "pcie_width_current", "fan_pct",
               "ecc_errors_corrected", "ecc_errors_uncorrected", "enc_util_pct", "dec_util_pct", "sm_active_pct")
_SLOW_POSITIONS = tuple(FIELDS.index(name) for name in SLOW_FIELDS)
_UTIL_GPU = FIELDS.index("util_gpu_pct")
_SM_ACTIVE = FIELDS.index("sm_active_pct")
STATIC_FIELDS = (
    "uuid", "name", "sm_clock_max_mhz", "mem_clock_max_mhz", "pcie_gen_max", "pcie_width_max", "power_limit_w",
    "mem_total_mib",
)


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="gpuws-telemetry-agent")
    parser.add_argument("--hz", type=float, default=1.0, help="samples per second (0.2-20)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many samples (0: run until stopped)")
    parser.add_argument("--no-processes", action="store_true", help="skip per-process GPU memory")
    parser.add_argument("--no-host", action="store_true", help="skip the host's CPU, memory and load")
    args = parser.parse_args(argv)
    if not MIN_HZ <= args.hz <= MAX_HZ:
        parser.error(f"--hz must be between {MIN_HZ:g} and {MAX_HZ:g}")
    return args


_dumps = json.JSONEncoder(separators=(",", ":")).encode


class Out:
    """Lines are gathered and written with one write and one flush per period: fewer, larger packets."""

    def __init__(self, stream):
        self.stream = stream
        self.parts = []

    def add(self, obj):
        self.parts.append(_dumps(obj))

    def flush(self):
        if self.parts:
            self.parts.append("")
            self.stream.write("\n".join(self.parts))
            self.stream.flush()
            self.parts = []


class _Stop(Exception):
    pass


def _on_signal(signum, frame):
    raise _Stop()


class GpmReader:
    """Per-slice engine activity of MIG devices through GPM (GPU Performance Monitoring).

    GPM exists on Hopper and later, in nvidia-ml-py >= 12.535; each call here may fail, and then
    the values are None ("not supported"), never 0. A metric is a rate between two samples: each
    read takes a new sample of the slice and measures against the one taken at the previous read.
    """

    NAMES = ("nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleFree", "nvmlGpmMigSampleGet",
             "nvmlGpmMetricsGet", "c_nvmlGpmMetricsGet_t", "NVML_GPM_METRICS_GET_VERSION",
             "NVML_GPM_METRIC_GRAPHICS_UTIL", "NVML_GPM_METRIC_SM_UTIL")

    def __init__(self, nvml, try_):
        self.nvml = nvml
        self.t = try_
        self.available = all(hasattr(nvml, name) for name in self.NAMES)
        self.supported = {}  # parent GPU index -> GPM supported
        self.last = {}  # (parent GPU index, GPU instance id) -> the sample of the previous read
        self.request = None  # one c_nvmlGpmMetricsGet_t, reused (it holds hundreds of metric slots)

    def device_supported(self, parent, index):
        if not self.available:
            return False
        if index not in self.supported:
            support = self.t(self.nvml.nvmlGpmQueryDeviceSupport, parent)
            self.supported[index] = bool(getattr(support, "isSupportedDevice", 0))
        return self.supported[index]

    def read(self, parent, index, gi):
        """(graphics/compute activity %, SM activity %) of GPU instance `gi` since the previous read;
        None at the first read of a slice or where GPM cannot tell."""
        n = self.nvml
        if gi is None or not self.device_supported(parent, index):
            return None
        sample = self.t(n.nvmlGpmSampleAlloc)
        if sample is None:
            return None
        if self.t(n.nvmlGpmMigSampleGet, parent, gi, sample) is None:
            self.t(n.nvmlGpmSampleFree, sample)
            return None
        previous = self.last.pop((index, gi), None)
        self.last[(index, gi)] = sample
        if previous is None:
            return None
        request = self.request
        if request is None:
            request = self.request = n.c_nvmlGpmMetricsGet_t()
        request.version = n.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 2
        request.sample1 = previous
        request.sample2 = sample
        request.metrics[0].metricId = n.NVML_GPM_METRIC_GRAPHICS_UTIL
        request.metrics[1].metricId = n.NVML_GPM_METRIC_SM_UTIL
        done = self.t(n.nvmlGpmMetricsGet, request)
        self.t(n.nvmlGpmSampleFree, previous)
        if done is None:
            return None
        return [_percent(m.value) if m.nvmlReturn == 0 else None for m in (request.metrics[0], request.metrics[1])]

    def keep(self, slices):
        """Forget (and free) the samples of slices not in `slices` ({(index, gi)}): the layout changed."""
        for key in [k for k in self.last if k not in slices]:
            self.t(self.nvml.nvmlGpmSampleFree, self.last.pop(key))
        self.supported.clear()


class NvmlReader:
    """Reads every GPU (and MIG device) through pynvml; each query that fails is None."""

    def __init__(self, nvml, processes=True):
        self.nvml = nvml
        self.processes = processes
        self.error = nvml.NVMLError
        n = nvml
        self.clock_max = getattr(n, "nvmlDeviceGetMaxClockInfo", None)
        self.reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            n, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        self.proc_util = getattr(n, "nvmlDeviceGetProcessUtilization", None)
        self.proc_util_seen = {}  # handle position -> last timestamp NVML reported (µs)
        self.users = {}  # uid -> name
        self.commands = {}  # pid -> (user, command, name): a pid's identity does not change while it runs
        self.handles = []  # (handle, gpu index, mig dict or None), in device order
        self.statics = []
        self.gpm = GpmReader(nvml, self._try)
        self.slices = {}  # id(MIG device handle) -> (parent handle, parent index, GPU instance id)
        self.refresh()

    def _try(self, fn, *args):
        try:
            return fn(*args)
        except self.error:
            return None
        except (AttributeError, TypeError, ValueError, OSError, KeyError, IndexError):
            return None  # an old nvidia-ml-py without this call, or an odd return value

    def refresh(self):
        """Read the device list and static facts again; True when anything changed."""
        n = self.nvml
        handles = []
        slices = {}
        count = self._try(n.nvmlDeviceGetCount) or 0
        for index in range(count):
            h = self._try(n.nvmlDeviceGetHandleByIndex, index)
            if h is None:
                continue
            handles.append((h, index, None))
            for mig_device in self._mig_devices(h, index):
                handles.append(mig_device)
                slices[id(mig_device[0])] = (h, index, mig_device[2]["gi"])
        self.slices = slices
        statics = [self._static(h, index, mig) for h, index, mig in handles]
        changed = statics != self.statics
        self.handles = handles
        self.statics = statics
        if changed:
            self.gpm.keep({(s[1], s[2]) for s in self.slices.values()})
        return changed

    def _static(self, h, index, mig):
        n = self.nvml
        t = self._try
        mem = t(n.nvmlDeviceGetMemoryInfo, h)
        whole = mig is None
        rec = {
            "gpu": index,
            "uuid": _text(t(n.nvmlDeviceGetUUID, h)),
            "name": _text(t(n.nvmlDeviceGetName, h)),
            "sm_clock_max_mhz": t(self.clock_max, h, n.NVML_CLOCK_SM) if self.clock_max and whole else None,
            "mem_clock_max_mhz": t(self.clock_max, h, n.NVML_CLOCK_MEM) if self.clock_max and whole else None,
            "pcie_gen_max": t(n.nvmlDeviceGetMaxPcieLinkGeneration, h) if whole else None,
            "pcie_width_max": t(n.nvmlDeviceGetMaxPcieLinkWidth, h) if whole else None,
            "power_limit_w": _watts(t(n.nvmlDeviceGetEnforcedPowerLimit, h)),
            "mem_total_mib": _mib(getattr(mem, "total", None)),
            "mig": mig,
        }
        return rec

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
            out.append((mh, index, {
                "parent_gpu": index,
                "device": device,
                "gi": self._try(n.nvmlDeviceGetGpuInstanceId, mh),
                "ci": self._try(n.nvmlDeviceGetComputeInstanceId, mh),
            }))
        return out

    def values(self, h, previous=None):
        """The dynamic fields of one device, in FIELDS order. Given `previous` (its last values),
        the slowly changing fields (SLOW_FIELDS: PCIe, fan, ECC counters, codec use) are kept from
        it instead of read: 8 NVML calls instead of 18, on all but one sample a second."""
        n = self.nvml
        t = self._try
        util = t(n.nvmlDeviceGetUtilizationRates, h)
        mem = t(n.nvmlDeviceGetMemoryInfo, h)
        pstate = t(n.nvmlDeviceGetPerformanceState, h)
        out = [
            getattr(util, "gpu", None),
            getattr(util, "memory", None),
            _mib(getattr(mem, "used", None)),
            t(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
            _watts(t(n.nvmlDeviceGetPowerUsage, h)),
            t(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
            t(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
            None,  # pcie_rx_kib_s: slow
            None,  # pcie_tx_kib_s: slow
            None,  # pcie_gen_current: slow
            None,  # pcie_width_current: slow
            None,  # fan_pct: slow
            pstate if isinstance(pstate, int) and pstate != _NVML_PSTATE_UNKNOWN else None,
            t(self.reasons, h) if self.reasons else None,
            None, None, None, None,  # ECC counters, encoder, decoder: slow
            None,  # sm_active_pct: slow, MIG devices only (GPM)
        ]
        mig_slice = self.slices.get(id(h)) if self.slices else None
        if previous is not None:
            for i in _SLOW_POSITIONS:
                out[i] = previous[i]
            if mig_slice is not None and out[_UTIL_GPU] is None:
                out[_UTIL_GPU] = previous[_UTIL_GPU]  # from GPM, once a second
            return out
        if mig_slice is not None and out[_UTIL_GPU] is None:
            activity = self.gpm.read(*mig_slice)
            if activity is not None:
                out[_UTIL_GPU], out[_SM_ACTIVE] = activity
        enc = t(n.nvmlDeviceGetEncoderUtilization, h)
        dec = t(n.nvmlDeviceGetDecoderUtilization, h)
        out[7] = t(n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_RX_BYTES)
        out[8] = t(n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_TX_BYTES)
        out[9] = t(n.nvmlDeviceGetCurrPcieLinkGeneration, h)
        out[10] = t(n.nvmlDeviceGetCurrPcieLinkWidth, h)
        out[11] = t(n.nvmlDeviceGetFanSpeed, h)
        out[14] = t(n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_VOLATILE_ECC)
        out[15] = t(n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC)
        out[16] = enc[0] if isinstance(enc, (list, tuple)) and enc else None
        out[17] = dec[0] if isinstance(dec, (list, tuple)) and dec else None
        return out

    def processes_of(self, position, h):
        """The device's compute processes (pid, user, command, memory, SM utilisation); None: cannot tell."""
        if not self.processes:
            return None
        procs = self._try(self.nvml.nvmlDeviceGetComputeRunningProcesses, h)
        if procs is None:
            return None
        util = self._sm_util(position, h)
        out = []
        for p in procs:
            pid = getattr(p, "pid", None)
            if not isinstance(pid, int):
                continue
            out.append([pid, _mib(getattr(p, "usedGpuMemory", None)), util.get(pid)])
        out.sort()
        return out

    def identity(self, pid):
        """[user, command, name] of a process (read once per pid)."""
        return list(self._identity(pid))

    def _sm_util(self, position, h):
        """pid -> SM utilisation % over the last samples NVML kept (empty where NVML cannot tell)."""
        if self.proc_util is None:
            return {}
        samples = self._try(self.proc_util, h, self.proc_util_seen.get(position, 0))
        if not samples:
            return {}
        out: dict = {}  # pid -> SM utilisation %
        newest = 0
        for sample in samples:
            pid = getattr(sample, "pid", None)
            sm = getattr(sample, "smUtil", None)
            stamp = getattr(sample, "timeStamp", 0) or 0
            if isinstance(pid, int) and isinstance(sm, int) and 0 <= sm <= 100:
                out[pid] = max(out.get(pid, 0), sm)
            newest = max(newest, stamp)
        if newest:
            self.proc_util_seen[position] = newest
        return out

    def _identity(self, pid):
        known = self.commands.get(pid)
        if known is not None:
            return known
        name = None
        get_name = getattr(self.nvml, "nvmlSystemGetProcessName", None)
        if get_name is not None:
            name = _text(self._try(get_name, pid))
        details = getattr(self.nvml, "gpuwsSimProcessDetails", None)  # the simulated host's own processes
        found = self._try(details, pid) if details is not None else None
        if found:
            user, command = found
        else:
            user, command = self._proc_identity(pid)
        if not name and command:
            name = command.split(" ", 1)[0]
        identity = (user, command[:COMMAND_LIMIT] if command else None, name[:256] if name else None)
        if len(self.commands) > 4096:
            self.commands.clear()
        self.commands[pid] = identity
        return identity

    def _proc_identity(self, pid):
        user = command = None
        try:
            with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        user = self._user(int(line.split()[1]))
                        break
        except (OSError, ValueError, IndexError):
            pass
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                raw = f.read(COMMAND_LIMIT * 4)
            command = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace") or None
        except OSError:
            pass
        if command is None:
            try:
                with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                    command = f.read().strip() or None
            except OSError:
                pass
        return user, command

    def _user(self, uid):
        if uid not in self.users:
            try:
                import pwd
                self.users[uid] = pwd.getpwuid(uid).pw_name
            except (ImportError, KeyError):
                self.users[uid] = str(uid)
        return self.users[uid]


class HostReader:
    """CPU %, memory and load average of the host, from /proc (None where it cannot be read)."""

    def __init__(self):
        self.last = self._cpu_times()

    def _cpu_times(self):
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields[:8]), idle

    def read(self):
        rec: dict = {"cpu_pct": None, "ram_used_mib": None, "ram_total_mib": None, "load": None}
        now = self._cpu_times()
        if now is not None and self.last is not None and now[0] > self.last[0]:
            busy = (now[0] - self.last[0]) - (now[1] - self.last[1])
            rec["cpu_pct"] = round(100.0 * busy / (now[0] - self.last[0]), 1)
        self.last = now
        try:
            info = {}
            with open("/proc/meminfo", encoding="ascii") as f:
                for line in f:
                    key, _, rest = line.partition(":")
                    if key in ("MemTotal", "MemAvailable"):
                        info[key] = int(rest.split()[0])
            if "MemTotal" in info:
                rec["ram_total_mib"] = round(info["MemTotal"] / 1024.0, 1)
                if "MemAvailable" in info:
                    rec["ram_used_mib"] = round((info["MemTotal"] - info["MemAvailable"]) / 1024.0, 1)
        except (OSError, ValueError, IndexError):
            pass
        try:
            with open("/proc/loadavg", encoding="ascii") as f:
                rec["load"] = [float(x) for x in f.read().split()[:3]]
        except (OSError, ValueError):
            pass
        return rec


class Streamer:
    """Turns readings into protocol-2 lines: static facts and processes only on change, values as deltas."""

    def __init__(self, reader, host, out):
        self.reader = reader
        self.host = host
        self.out = out
        self.previous = []  # per device: the values last sent
        self.procs = []  # per device: the process list last sent
        self.who_sent = set()  # pids whose user and command were sent
        self.next_static = 0.0
        self.next_slow = 0.0
        self.next_proc_values = 0.0

    def devices_message(self):
        self.out.add({"type": "devices", "devices": self.reader.statics})
        self.previous = [[None] * len(FIELDS) for _ in self.reader.statics]
        self.procs = [None] * len(self.reader.statics)
        self.next_slow = 0.0  # read everything for the new device list at once

    def tick(self, now, wall):
        reader = self.reader
        if now >= self.next_static:
            self.next_static = now + STATIC_EVERY_S
            if reader.refresh() or len(self.previous) != len(reader.statics):
                self.devices_message()
        slow = now >= self.next_slow
        if slow:
            self.next_slow = now + SLOW_EVERY_S
        started = wall()
        line: list = [0.0]
        for position, (h, _index, _mig) in enumerate(reader.handles):
            previous = self.previous[position]
            values = reader.values(h, None if slow else previous)
            if values == previous:
                continue  # nothing moved (one C-level comparison; equal numbers of another type too)
            changes = None
            for f, value in enumerate(values):
                if value != previous[f] or type(value) is not type(previous[f]):
                    if changes is None:
                        changes = [position]
                    changes.append(f)
                    changes.append(value)
                    previous[f] = value
            if changes is not None:
                line.append(changes)
        # Stamped mid-read: reading many GPUs takes a moment, and the values span it.
        line[0] = round((started + wall()) / 2, 3)
        changed = {}
        who = {}
        for position, (h, _index, _mig) in enumerate(reader.handles):
            if not reader.processes or not slow:
                break  # processes are read once a second: their set rarely changes faster
            procs = reader.processes_of(position, h)
            last = self.procs[position]
            if procs == last:
                continue
            same_set = (procs is not None and last is not None
                        and [p[0] for p in procs] == [p[0] for p in last])
            if same_set and now < self.next_proc_values:
                continue  # only memory or utilisation moved: sent every PROC_VALUES_EVERY_S
            self.procs[position] = procs
            changed[str(position)] = procs
            for pid, _used, _util in procs or ():
                if pid not in self.who_sent:  # who a process is, once per pid per stream
                    who[str(pid)] = reader.identity(pid)
                    self.who_sent.add(pid)
        if slow and now >= self.next_proc_values:
            self.next_proc_values = now + PROC_VALUES_EVERY_S
        if changed:
            message = {"type": "procs", "d": changed}
            if who:
                message["who"] = who
            self.out.add(message)
        # After the process lists read in this tick, so that the sample carries them (the first
        # sample of a stream too, rather than "cannot tell" until the next one).
        self.out.add(line)
        if slow and self.host is not None:
            rec = self.host.read()
            rec["type"] = "host"
            self.out.add(rec)
        self.out.flush()


def _text(value):
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def _percent(value):
    """A GPM percentage rounded to 0.1 (None when not a finite number)."""
    if not isinstance(value, (int, float)) or value != value or value in (float("inf"), float("-inf")):
        return None
    return round(min(100.0, max(0.0, float(value))), 1)


def _mib(nbytes):
    return round(nbytes / 1048576, 1) if isinstance(nbytes, int) else None


def _watts(milliwatts):
    return milliwatts / 1000.0 if isinstance(milliwatts, (int, float)) else None


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
    out = Out(sys.stdout)
    try:
        nvml, why = _load_nvml()
        if nvml is None:
            out.add({"type": "unavailable", "reason": why})
            out.flush()
            return EXIT_NO_NVML
        try:
            nvml.nvmlDeviceGetCount()
            reader = NvmlReader(nvml, processes=not args.no_processes)
            driver = _text(_safe(nvml.nvmlSystemGetDriverVersion))
        except nvml.NVMLError as exc:
            out.add({"type": "unavailable", "reason": f"NVML failed listing GPUs: {str(exc)[:200]}"})
            out.flush()
            return EXIT_NO_NVML
        out.add({
            "type": "hello",
            "protocol": PROTOCOL,
            "source": "nvml",
            "simulated": getattr(nvml, "GPUWS_SIMULATED", False) is True,
            "driver": driver,
            "hz": args.hz,
            "gpu_count": len([h for h in reader.handles if h[2] is None]),
            "fields": list(FIELDS),
        })
        streamer = Streamer(reader, None if args.no_host else HostReader(), out)
        streamer.devices_message()
        streamer.next_static = time.monotonic() + STATIC_EVERY_S
        period = 1.0 / args.hz
        deadline = time.monotonic()
        sent = 0
        while True:
            streamer.tick(time.monotonic(), time.time)
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
