"""Decoding the telemetry agent's protocol 2 (see `gpuws/agent/telemetry_agent.py`) into samples.

The agent sends static facts once (and again when they change), then per sample only the values
that changed, as `[t, [device, field, value, field, value, ...], ...]`. `AgentDecoder` keeps the
state those deltas apply to and turns each sample line into a full `SampleBatch`, so everything
after it (store, alerts, `gpuws watch --json`) sees the same `GpuSample`s as before.

Built for speed on the client: one `orjson.loads` per line (a quarter of `json.loads`' time on
these lines), then only the changed values are looked at; a sample is made from a per-device
argument list in one call. Samples of one device share their `processes` and `throttle_reasons`
lists with the previous sample until those change: treat samples as read-only.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Sequence
from dataclasses import fields as dataclass_fields
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

import orjson

from gpuws.core.errors import ParseError
from gpuws.core.telemetry.metrics import F16_MAX, METRIC_INDEX, METRICS, RAW_SCALE
from gpuws.core.telemetry.sample import (
    SOURCE_NVML,
    GpuSample,
    HostSample,
    MigRef,
    ProcessSample,
    SampleBatch,
)
from gpuws.core.telemetry.throttle import decode_mask

if TYPE_CHECKING:
    import numpy as np

PROTOCOL: Final = 2

_SLOTS: Final = tuple(f.name for f in dataclass_fields(GpuSample))
_SLOT: Final = {name: i for i, name in enumerate(_SLOTS)}
_T, _GPU, _UUID = _SLOT["t"], _SLOT["gpu"], _SLOT["uuid"]
_REASONS, _IDLE, _PSTATE = _SLOT["throttle_reasons"], _SLOT["idle"], _SLOT["pstate"]
_PROCESSES, _MIG = _SLOT["processes"], _SLOT["mig"]
_SOURCE, _SIMULATED = _SLOT["source"], _SLOT["simulated"]

# How a dynamic field's wire value becomes sample attributes (_STORED: a float that is also a
# store column, the common case, tested first).
_STORED, _FLOAT, _INT, _PSTATE_KIND, _MASK, _IGNORED = 0, 1, 2, 3, 4, 5
_KINDS: Final[dict[str, int]] = {
    **{name: _FLOAT for name in (
        "util_gpu_pct", "util_mem_pct", "mem_used_mib", "temp_c", "power_w", "sm_clock_mhz", "mem_clock_mhz",
        "pcie_rx_kib_s", "pcie_tx_kib_s", "fan_pct", "enc_util_pct", "dec_util_pct", "sm_active_pct",
    )},
    **{name: _INT for name in (
        "pcie_gen_current", "pcie_width_current", "ecc_errors_corrected", "ecc_errors_uncorrected",
    )},
    "pstate": _PSTATE_KIND,
    "throttle_mask": _MASK,
}
_STATIC_FLOATS: Final = ("sm_clock_max_mhz", "mem_clock_max_mhz", "power_limit_w", "mem_total_mib")
_STATIC_INTS: Final = ("pcie_gen_max", "pcie_width_max")
_INF = math.inf


class _Device:
    """One device's current values: GpuSample's positional arguments, and where its store row (the
    metrics as the store keeps them: scaled and clipped for float16, see `store.encode_rows`) starts
    in the decoder's flat row buffer."""

    __slots__ = ("args", "base")

    def __init__(self, args: list[Any], base: int) -> None:
        self.args = args
        self.base = base


_NAN = math.nan
_NOBODY: Final = (None, None, None)
_N_METRICS: Final = len(METRICS)


class AgentDecoder:
    """State and decoding of one agent stream after its hello line."""

    def __init__(self, fields: Sequence[Any], *, skew_s: float = 0.0, simulated: bool = False,
                 stored_rows: bool = True) -> None:
        """`stored_rows`: give each batch its rows as the store keeps them (numpy float16); off
        for a reader with no store (`gpuws watch`), which then never imports numpy."""
        if not isinstance(fields, list | tuple) or not all(isinstance(f, str) for f in fields):
            raise ParseError("telemetry agent sent no field list")
        # field position -> (sample slot, kind, store column or -1, the column's storage scale, the
        # largest reading it stores unclipped); unknown fields are skipped.
        self._fields = [self._field(name) for name in fields]
        self.skew_s = skew_s
        self.simulated = simulated
        self.devices: list[_Device] = []
        self.keys: tuple[str, ...] = ()  # the devices' keys, one tuple per device list
        # Every device's store row, one after the other, as float32 (what `encode_rows` rounds from):
        # written value by value, turned into the stored float16 rows with one conversion per line.
        self._rows = array("f")
        self._stored: np.ndarray[Any, Any] | None = None  # the devices' rows as stored, while unchanged
        self._np: ModuleType | None = None
        if stored_rows:
            import numpy  # only here: a decoder with no store keeps numpy out of the process

            self._np = numpy
        self.host: HostSample | None = None
        self._masks: dict[int, tuple[list[str] | None, bool | None]] = {}
        self._who: dict[int, tuple[str | None, str | None, str | None]] = {}  # pid -> user, command, name

    @staticmethod
    def _field(name: str) -> tuple[int, int, int, float, float]:
        if name not in _KINDS:
            return (-1, _IGNORED, -1, 1.0, 0.0)
        kind, column = _KINDS[name], METRIC_INDEX.get(name, -1)
        if kind == _FLOAT and column >= 0:
            scale = RAW_SCALE[column]
            return (_SLOT[name], _STORED, column, scale, F16_MAX / scale)
        return (_SLOT.get(name, -1), kind, column, 1.0, 0.0)

    # -- lines --------------------------------------------------------------------------------

    def feed(self, line: str | bytes) -> SampleBatch | None:
        """Decode one line: a SampleBatch for a sample line, None for a control line (state only)."""
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            # What orjson refuses and the json module reads: NaN and Infinity tokens (unknown
            # values, see `_float`), integers past 64 bits. Anything else is no JSON at all.
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                raise ParseError(f"telemetry agent sent a line that is not JSON: {line[:60]!r}") from None
        if type(message) is list:
            return self.sample(message)
        if not isinstance(message, dict):
            raise ParseError("telemetry agent sent a JSON line that is neither a sample nor a message")
        kind = message.get("type")
        if kind == "devices":
            self.set_devices(message.get("devices"))
        elif kind == "procs":
            self.set_processes(message.get("d"), message.get("who"))
        elif kind == "host":
            self.set_host(message)
        return None  # hello again, or a message type of a newer agent: nothing to do

    def sample(self, message: list[Any]) -> SampleBatch:
        """Apply one sample line's changes and return every device's sample at its instant."""
        if not message:
            raise ParseError("telemetry agent sent an empty sample")
        host_t = message[0]
        if type(host_t) is not float and type(host_t) is not int:
            raise ParseError("telemetry agent sent a sample without a time")
        t = host_t - self.skew_s
        devices = self.devices
        kinds = self._fields
        rows = self._rows
        moved = False  # a stored value changed: the store's rows are made again
        try:
            for i in range(1, len(message)):
                change = message[i]
                position = change[0]
                if type(position) is not int or position < 0:
                    raise ParseError(f"telemetry agent sent a change for an unknown device: {str(position)[:20]!r}")
                device = devices[position]
                args = device.args
                base = device.base
                n = len(change)
                if not n & 1:
                    raise ParseError("telemetry agent sent a change list with a field but no value")
                for k in range(1, n, 2):
                    f = change[k]
                    if f < 0:
                        raise IndexError
                    slot, kind, column, scale, limit = kinds[f]
                    value = change[k + 1]
                    if kind == _STORED:
                        moved = True
                        kind_of = value.__class__
                        if kind_of is int:
                            value = float(value)
                            kind_of = float
                        # A number in the stored range (NaN and infinities fail the comparison).
                        if kind_of is float and -limit <= value <= limit:
                            args[slot] = value
                            rows[base + column] = value * scale  # as the store keeps it
                        else:
                            value = _float(value)
                            args[slot] = value
                            # Unknown, or clipped to float16's range as `encode_rows` does.
                            rows[base + column] = (_NAN if value is None
                                                   else max(-F16_MAX, min(F16_MAX, value * scale)))
                    elif kind == _FLOAT:
                        args[slot] = _float(value)
                    elif kind == _INT:
                        number = _float(value)
                        args[slot] = None if number is None else int(number)
                    elif kind == _MASK:
                        self._mask(args, value)
                    elif kind == _PSTATE_KIND:
                        number = _float(value)
                        args[slot] = None if number is None else f"P{int(number)}"
        except (IndexError, TypeError, KeyError):
            # Not a list, an empty one, a position past the end, a non-integer field position.
            raise ParseError("telemetry agent sent a malformed change list") from None
        samples = []
        for device in devices:
            args = device.args
            args[_T] = t
            samples.append(GpuSample(*args))
        stored = self._stored
        numpy = self._np
        # Else the last line's rows, shared (the store only reads them), or none without a store.
        if numpy is not None and (moved or stored is None) and devices:
            stored = self._stored = (
                numpy.frombuffer(rows, dtype=numpy.float32).reshape(len(devices), _N_METRICS).astype(numpy.float16))
        return SampleBatch(t, samples, SOURCE_NVML, self.simulated, host_t=float(host_t), host=self.host,
                           stored_rows=stored, keys=self.keys)

    def _mask(self, args: list[Any], value: Any) -> None:
        if value is None:
            args[_REASONS] = args[_IDLE] = None
            return
        if type(value) is not int:
            raise ParseError(f"telemetry agent sent a non-integer throttle_mask: {str(value)[:40]!r}")
        found = self._masks.get(value)
        if found is None:
            if value < 0:
                found = (None, None)
            else:
                d = decode_mask(value)
                found = (list(d.reasons), d.idle)
            if len(self._masks) < 1024:
                self._masks[value] = found
        decoded = found
        args[_REASONS], args[_IDLE] = decoded

    # -- control messages ---------------------------------------------------------------------

    def set_devices(self, records: Any) -> None:
        """A new device list with static facts: every device's values start again from unknown."""
        if not isinstance(records, list):
            raise ParseError("telemetry agent sent a device list that is not a list")
        devices: list[_Device] = []
        for record in records:
            if not isinstance(record, dict):
                raise ParseError("telemetry agent sent a device record that is not an object")
            gpu = record.get("gpu")
            if type(gpu) is not int or gpu < 0:
                raise ParseError(f"telemetry agent sent an invalid GPU index: {str(gpu)[:40]!r}")
            args: list[Any] = [None] * len(_SLOTS)
            args[_GPU] = gpu
            args[_UUID] = _opt_str(record.get("uuid"), "uuid")
            for name in _STATIC_FLOATS:
                args[_SLOT[name]] = _float(record.get(name))
            for name in _STATIC_INTS:
                value = _float(record.get(name))
                args[_SLOT[name]] = None if value is None else int(value)
            args[_MIG] = _mig(record.get("mig"))
            args[_SOURCE] = SOURCE_NVML
            args[_SIMULATED] = self.simulated
            devices.append(_Device(args, len(devices) * _N_METRICS))
        self.devices = devices
        self._rows = array("f", [_NAN]) * (len(devices) * _N_METRICS)
        self._stored = None
        self.keys = tuple(GpuSample(0.0, d.args[_GPU], mig=d.args[_MIG]).key for d in devices)

    def set_processes(self, changed: Any, who: Any = None) -> None:
        """New process lists ([pid, used_mib, sm_util_pct]) for the devices named (by position), and
        `who` (pid -> [user, command, name]) for pids not named before; null: NVML cannot tell."""
        if who is not None:
            if not isinstance(who, dict):
                raise ParseError("telemetry agent sent process names that are not an object")
            if len(self._who) > 4096:
                self._who.clear()  # a long stream of short-lived processes: forget the old ones
            for pid_text, identity in who.items():
                if not isinstance(identity, list) or len(identity) != 3:
                    raise ParseError("telemetry agent sent a malformed process identity")
                try:
                    pid = int(pid_text)
                except ValueError:
                    raise ParseError("telemetry agent sent an identity for an invalid pid") from None
                user, command, name = identity
                self._who[pid] = (_opt_str(user, "process user", 64), _opt_str(command, "process command", 512),
                                  _opt_str(name, "process name"))
        if not isinstance(changed, dict):
            raise ParseError("telemetry agent sent processes that are not an object")
        for key, procs in changed.items():
            try:
                position = int(key)
            except ValueError:
                raise ParseError("telemetry agent sent processes for an invalid device") from None
            if not 0 <= position < len(self.devices):
                raise ParseError("telemetry agent sent processes for an unknown device")
            if procs is None:
                self.devices[position].args[_PROCESSES] = None
            elif isinstance(procs, list):
                self.devices[position].args[_PROCESSES] = [self._process(p) for p in procs]
            else:
                raise ParseError("telemetry agent sent a process list that is not a list")

    def _process(self, entry: Any) -> ProcessSample:
        if type(entry) is not list or len(entry) != 3 or type(entry[0]) is not int:
            raise ParseError("telemetry agent sent a malformed process entry")
        pid, used, util = entry
        user, command, name = self._who.get(pid, _NOBODY)
        return ProcessSample(pid, name, _float(used), user, command, _float(util))

    def set_host(self, message: dict[str, Any]) -> None:
        """The host's CPU, memory and load average (attached to the following samples)."""
        get = message.get
        load = get("load")
        if type(load) is list and len(load) == 3:
            loads = (_float(load[0]), _float(load[1]), _float(load[2]))
        elif isinstance(load, list):
            values = [*(_float(v) for v in load[:3]), None, None, None]
            loads = (values[0], values[1], values[2])
        elif load is None:
            loads = (None, None, None)
        else:
            raise ParseError("telemetry agent sent a load average that is not a list")
        t = self.devices[0].args[_T] if self.devices and self.devices[0].args[_T] is not None else 0.0
        self.host = HostSample(t, _float(get("cpu_pct")), _float(get("ram_used_mib")), _float(get("ram_total_mib")),
                               *loads)


def _float(value: Any) -> float | None:
    if value is None:
        return None
    kind = type(value)
    if kind is float:
        return value if -_INF < value < _INF else None  # NaN and infinities are "unknown"
    if kind is int:
        return float(value)
    raise ParseError(f"telemetry agent sent a non-numeric value: {str(value)[:40]!r}")


def _opt_str(value: Any, what: str, limit: int = 256) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParseError(f"telemetry agent sent a non-text {what}")
    return value[:limit]


def _opt_int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if type(value) is not int:
        raise ParseError(f"telemetry agent sent a non-integer {what}: {str(value)[:40]!r}")
    return value


def _mig(value: Any) -> MigRef | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ParseError("telemetry agent sent a MIG reference that is not an object")
    parent = _opt_int(value.get("parent_gpu"), "mig.parent_gpu")
    device = _opt_int(value.get("device"), "mig.device")
    if parent is None or device is None:
        raise ParseError("telemetry agent sent a MIG device without its parent or index")
    return MigRef(parent, device, _opt_int(value.get("gi"), "mig.gi"), _opt_int(value.get("ci"), "mig.ci"))


def decode_lines(lines: Sequence[str | bytes], fields: Sequence[str], **kwargs: Any) -> list[SampleBatch]:
    """Every sample of a sequence of agent lines after hello (tests and benchmarks)."""
    decoder = AgentDecoder(fields, **kwargs)
    return [batch for line in lines if (batch := decoder.feed(line)) is not None]
