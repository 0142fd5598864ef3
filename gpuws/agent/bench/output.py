"""What the runner prints: one JSON object per line, and the errors that end a check or the run."""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from typing import Any

PROTOCOL = 1


NO_TOOLCHAIN = (
    "no CUDA toolchain: install PyTorch with CUDA (pip install torch) or CuPy, or the CUDA toolkit (nvcc)"
)


CPU_LABEL = "CPU harness check \u2014 not a GPU measurement"


GEMM_CHECKS = ("gemm_fp32", "gemm_tf32", "gemm_fp16", "gemm_bf16", "gemm_fp8")


# One JSON object as the runner prints it: a result, its facts or details, a summary.
Record = dict[str, Any]


class CheckError(Exception):
    """A check could not run; the message is the reason shown to the user."""


class Deadline(Exception):
    """The overall timeout was reached."""


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
        self.results: list[Record] = []

    def emit(self, obj: Record) -> None:
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
        obj: Record = {"type": "result", "check": check, "gpu": gpu, "value": value, "unit": unit,
                               "status": status, "reason": reason, "harness": harness, "simulated": simulated}
        if harness == "cpu":
            obj["label"] = CPU_LABEL
        obj.update(extra)
        self.results.append(obj)
        self.emit(obj)


def first_line(exc: BaseException) -> str:
    """The first line of `exc`'s text (its class name when empty), at most 300 characters."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
