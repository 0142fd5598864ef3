"""The simulated host's persistent state: one JSON file in the directory `$GPUWS_SIM_STATE`.

Every `nvidia-smi` invocation is a new process, so the state lives on disk. Reads and
read-modify-write cycles hold a file lock (`filelock`) and writes are atomic (temp file, fsync,
rename), so concurrent invocations never see or leave a half-written file. Frequent read-only
callers (the fake NVML) use `SimStateStore.load_shared()`, which re-reads only when the file changed.

What tests drive (see `SimStateStore.update()`):

- load: `gpu.set_load(0.8)` (constant), `gpu.set_load_schedule([(t, load), ...])` (a step function of
  wall time), `gpu.set_scenario("training")` (the demo cycles, see `gpuws.sim.dynamics`).
- processes: `gpu.add_process(name, used_mib)` -> pid, `state.remove_process(pid)`.
- faults, one per MIG step (`Fault`): armed with `gpu.inject_fault(Fault.CREATE_GI_FAILS)`; each fires
  once and is then used up unless armed with `times=-1` (every time).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from filelock import FileLock

from gpuws.core.errors import GpuwsError
from gpuws.core.simulation import SIM_STATE_ENV_VAR
from gpuws.sim.models import CUDA_VERSION, DEFAULT_GPU_SPEC, DRIVER_VERSION, GPU_MODELS, GpuModel, parse_gpu_spec

STATE_FILE = "state.json"
LOCK_FILE = "state.lock"
SCHEMA_VERSION = 1
SCENARIOS = ("training", "idle", "hot", "inference")
# Simulated pids sit above Linux's largest possible pid (pid_max is at most 2**22), so a simulated
# process can never share its number with a real one on the machine the simulation runs on.
SIM_PID_BASE = 4_200_000
SCENARIO_PID_BASE = SIM_PID_BASE + 4000  # + 100 x GPU index + cycle (dynamics.scenario_processes)
BUSY_PID_BASE = SIM_PID_BASE + 4999  # + GPU index: the process a Fault.BUSY keeps on the GPU
FIRST_SIM_PID = SIM_PID_BASE + 20000  # processes tests add
SIM_HOSTNAME = "gpuws-sim"
SHARED_MAX_AGE_S = 0.5  # load_shared() re-reads at least this often even if the file looks unchanged
# Saves of the state made by this process (any store): a reader here that caches the state for a
# moment sees its own process's changes at once, and other processes' within that moment.
saves_in_process = 0


class SimStateError(GpuwsError):
    """The simulation state directory is missing, unreadable or corrupt."""


class Fault(StrEnum):
    """Faults a test arms on one GPU; each makes one MIG step misbehave as real hardware can.

    - BUSY: a compute process ("python3 train.py", 1 GiB) appears on the GPU and stays until cleared,
      so MIG mode changes and GPU resets are refused as "in use".
    - CREATE_GI_FAILS: the next `mig -cgi` fails (real error text, nothing created).
    - CREATE_CI_FAILS: the next compute-instance creation (`mig -cci`, or `-cgi ... -C`) fails; with
      `-C` the GPU instance stays created, as on real hardware.
    - DESTROY_FAILS: the next `mig -dci` / `mig -dgi` fails ("In use by another client").
    - RESET_FAILS: the next MIG mode toggle stays pending (needs a reset that fails) and
      `nvidia-smi -r` fails.
    - SILENT_NOOP: the next `mig -cgi` / `-cci` prints success and exits 0 but creates nothing.
    """

    BUSY = "busy"
    CREATE_GI_FAILS = "create_gi_fails"
    CREATE_CI_FAILS = "create_ci_fails"
    DESTROY_FAILS = "destroy_fails"
    RESET_FAILS = "reset_fails"
    SILENT_NOOP = "silent_noop"


@dataclass
class ComputeInstance:
    ci_id: int
    profile_id: int  # compute-instance profile id (0 = 1c, 1 = 2c, 2 = 3c, 3 = 4c, 4 = 7c)
    slices: int
    uuid: str


@dataclass
class GpuInstance:
    gi_id: int
    profile_id: int
    start: int
    size: int
    compute_instances: list[ComputeInstance] = field(default_factory=list)


@dataclass
class SimProcess:
    pid: int
    name: str
    used_mib: int
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass
class GpuState:
    """One simulated GPU: identity, MIG layout, load, processes and armed faults."""

    index: int
    model_key: str
    uuid: str
    pci_bus_id: str
    serial: str
    mig_current: bool = False
    mig_pending: bool = False
    gpu_instances: list[GpuInstance] = field(default_factory=list)
    load: dict[str, Any] = field(default_factory=lambda: {"kind": "scenario", "name": "idle"})
    processes: list[SimProcess] = field(default_factory=list)
    faults: dict[str, int] = field(default_factory=dict)  # fault name -> remaining (-1: always)
    mig_uuid_counter: int = 0

    @property
    def model(self) -> GpuModel:
        return GPU_MODELS[self.model_key]

    # -- load -----------------------------------------------------------------------------------

    def set_load(self, load: float) -> None:
        """A constant load in [0, 1]; replaces the scenario (no scenario processes any more)."""
        self.load = {"kind": "constant", "value": _clamp01(load)}

    def set_load_schedule(self, points: list[tuple[float, float]]) -> None:
        """A step function of wall time: [(epoch_seconds, load), ...]; before the first point: 0."""
        self.load = {"kind": "schedule", "points": sorted([float(t), _clamp01(v)] for t, v in points)}

    def set_scenario(self, name: str) -> None:
        if name not in SCENARIOS:
            raise SimStateError(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")
        self.load = {"kind": "scenario", "name": name}

    # -- processes and faults ---------------------------------------------------------------------

    def add_process(
        self, name: str, used_mib: int, *, pid: int | None = None,
        gpu_instance_id: int | None = None, compute_instance_id: int | None = None,
    ) -> int:
        """Attach a simulated compute process; returns its pid."""
        if pid is None:
            pid = FIRST_SIM_PID + self.index * 1000 + len(self.processes) + 1
            while any(p.pid == pid for p in self.processes):
                pid += 1
        self.processes.append(SimProcess(pid, name, int(used_mib), gpu_instance_id, compute_instance_id))
        return pid

    def inject_fault(self, fault: Fault | str, times: int = 1) -> None:
        """Arm `fault` for the next `times` occurrences (-1: every time until cleared)."""
        self.faults[Fault(fault).value] = times

    def clear_faults(self) -> None:
        self.faults.clear()

    def has_fault(self, fault: Fault) -> bool:
        return self.faults.get(fault.value, 0) != 0

    def consume_fault(self, fault: Fault) -> bool:
        """True if `fault` is armed; uses one occurrence up."""
        remaining = self.faults.get(fault.value, 0)
        if remaining == 0:
            return False
        if remaining > 0:
            if remaining == 1:
                del self.faults[fault.value]
            else:
                self.faults[fault.value] = remaining - 1
        return True

    def next_mig_uuid(self) -> str:
        self.mig_uuid_counter += 1
        n = self.mig_uuid_counter
        return f"MIG-{self.uuid[4:12]}-{n:04x}-4{self.index:03x}-8{n:03x}-{n:012x}"


@dataclass
class SimState:
    """The whole simulated host."""

    gpus: list[GpuState]
    created: float
    driver_version: str = DRIVER_VERSION
    cuda_version: str = CUDA_VERSION
    hostname: str = SIM_HOSTNAME
    version: int = SCHEMA_VERSION

    def gpu(self, index: int) -> GpuState:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        raise SimStateError(f"no simulated GPU {index}")

    def remove_process(self, pid: int) -> bool:
        """Detach the simulated process `pid` from whichever GPU has it."""
        for gpu in self.gpus:
            for proc in gpu.processes:
                if proc.pid == pid:
                    gpu.processes.remove(proc)
                    return True
        return False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimState:
        if data.get("version") != SCHEMA_VERSION:
            raise SimStateError(f"simulation state has schema version {data.get('version')!r}")
        gpus = []
        for g in data["gpus"]:
            if g["model_key"] not in GPU_MODELS:
                raise SimStateError(f"simulation state names unknown model {g['model_key']!r}")
            gis = [
                GpuInstance(
                    gi["gi_id"], gi["profile_id"], gi["start"], gi["size"],
                    [ComputeInstance(**ci) for ci in gi["compute_instances"]],
                )
                for gi in g["gpu_instances"]
            ]
            procs = [SimProcess(**p) for p in g["processes"]]
            gpus.append(GpuState(**{**g, "gpu_instances": gis, "processes": procs}))
        return cls(
            gpus=gpus, created=float(data["created"]), driver_version=data["driver_version"],
            cuda_version=data["cuda_version"], hostname=data.get("hostname", SIM_HOSTNAME),
        )

    @classmethod
    def new(cls, spec: str = DEFAULT_GPU_SPEC, now: float | None = None) -> SimState:
        """A fresh host for `spec`, with the default demo scenario on each GPU."""
        gpus = []
        for index, model in enumerate(parse_gpu_spec(spec)):
            gpu = GpuState(
                index=index,
                model_key=model.key,
                uuid=f"GPU-{0x5a1d0000 + index:08x}-{model.key[:4].encode().hex()[:4]}-4000-8000-{index:012x}",
                pci_bus_id=f"00000000:{0x18 + index * 0x10:02X}:00.0",
                serial=f"{1650000000000 + index:013d}",
            )
            gpu.set_scenario(SCENARIOS[index % len(SCENARIOS)])
            gpus.append(gpu)
        return cls(gpus=gpus, created=time.time() if now is None else now)


class SimStateStore:
    """Loads and saves `SimState` in one directory, under a lock."""

    def __init__(self, state_dir: Path | str, spec: str = DEFAULT_GPU_SPEC) -> None:
        self.dir = Path(state_dir)
        self.spec = spec
        self.path = self.dir / STATE_FILE
        self._lock = FileLock(str(self.dir / LOCK_FILE), timeout=10)
        self._shared: tuple[tuple[int, int, int, int], float, SimState] | None = None  # load_shared()
        self._shared_text = ""  # the file text `_shared` was parsed from
        self._path_text = str(self.path)  # stat() of a str: no Path conversion on every NVML call

    @classmethod
    def from_env(cls) -> SimStateStore:
        """The store named by $GPUWS_SIM_STATE (created on first use with the default GPUs)."""
        value = os.environ.get(SIM_STATE_ENV_VAR)
        if not value:
            raise SimStateError(f"{SIM_STATE_ENV_VAR} is not set: no simulated GPU state")
        return cls(Path(value), os.environ.get("GPUWS_SIM_GPUS", DEFAULT_GPU_SPEC))

    def _ensure_dir(self) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SimStateError(f"cannot create simulation state dir {self.dir}: {exc.strerror}") from None

    def _read_unlocked(self) -> SimState:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            state = SimState.new(self.spec)
            self._write_unlocked(state)
            return state
        except OSError as exc:
            raise SimStateError(f"cannot read {self.path}: {exc.strerror}") from None
        return self._parse(text)

    def _parse(self, text: str) -> SimState:
        try:
            return SimState.from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            raise SimStateError(f"corrupt simulation state {self.path}: {exc}") from None

    def _write_unlocked(self, state: SimState) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".state-", suffix=".json", dir=self.dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(state.to_dict(), f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            global saves_in_process
            saves_in_process += 1
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load(self) -> SimState:
        """A snapshot of the state (created from the spec on first use)."""
        self._ensure_dir()
        with self._lock:
            return self._read_unlocked()

    def load_shared(self) -> SimState:
        """The state for read-only callers that ask many times a second (the fake NVML).

        Re-read only when the file has changed (every save replaces it atomically: a new inode,
        mtime and usually size) and at least every `SHARED_MAX_AGE_S`, in case a coarse file clock
        and a reused inode make two saves look alike. No lock is needed to read: a reader of an
        atomically replaced file sees a whole one. The object is shared between calls: never
        modify it (use `update()` to change the state).
        """
        try:
            st = os.stat(self._path_text)
        except FileNotFoundError:
            return self.load()  # first use: created under the lock
        except OSError as exc:
            raise SimStateError(f"cannot read {self.path}: {exc.strerror}") from None
        # Stat before reading: a save in between makes the next call's stat differ and re-read.
        key = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
        now = time.monotonic()
        cached = self._shared
        if cached is not None and cached[0] == key and 0.0 <= now - cached[1] < SHARED_MAX_AGE_S:
            return cached[2]
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return self.load()
        except OSError as exc:
            raise SimStateError(f"cannot read {self.path}: {exc.strerror}") from None
        if cached is not None and cached[0] == key and text == self._shared_text:
            state = cached[2]  # only the age ran out and the text is the same: no need to parse it again
        else:
            state = self._parse(text)
        self._shared = (key, now, state)
        self._shared_text = text
        return state

    def save(self, state: SimState) -> None:
        self._ensure_dir()
        with self._lock:
            self._write_unlocked(state)

    def reset(self, spec: str | None = None) -> SimState:
        """Replace the state with a fresh host for `spec` (default: this store's spec)."""
        state = SimState.new(spec or self.spec)
        self.save(state)
        return state

    @contextmanager
    def update(self) -> Iterator[SimState]:
        """Read-modify-write under the lock; saved when the block ends without an exception."""
        self._ensure_dir()
        with self._lock:
            state = self._read_unlocked()
            yield state
            self._write_unlocked(state)


def _clamp01(value: float) -> float:
    return max(0.0, min(1.0, float(value)))
