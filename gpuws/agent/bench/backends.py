"""One backend per toolchain (PyTorch, CuPy, NumPy, CUDA C via nvcc+cuBLAS): the array work each check needs."""

from __future__ import annotations

import contextlib
import json
import os
import pkgutil
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

from .host import to_float
from .output import GEMM_CHECKS, CheckError, Emitter, Record, first_line
from .verify import (
    GEMM_TOLERANCE,
    STRESS_TOLERANCE,
    Array,
    ArrayOps,
    TorchOps,
    answer_check,
    array_grid,
    checksum_check,
    gemm_samples,
    torch_grid,
)

Verify = Callable[[], tuple[int, int]]  # () -> (bytes checked, bytes wrong)
KERNELS = "bench_kernels.cu"  # the CUDA C source of the nvcc backend, in this package


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
        """The CUDA ordinals (or the CPU's 0) this backend measures."""
        raise NotImplementedError

    def runtime_version(self) -> str | None:
        """The CUDA runtime version this toolchain uses, None where there is none."""
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

    def grid(self, dev: int, a: Array, b: Array, c: Array, rows: list[int],

             cols: list[int]) -> tuple[list[Any], list[Any]]:
        """The float64 reference and the answers on a grid of sampled rows and columns."""
        raise NotImplementedError

    def check_gemm(self, dev: int, check: str) -> Record | None:
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

    def checksum(self, dev: int, a: Array, b: Array, c: Array, fmt: str) -> Record | None:
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

    def checksum_gemm(self, dev: int, check: str) -> Record | None:
        """The last timed GEMM's product, every element, by checksum (None when none was kept)."""
        last = getattr(self, "last_gemm", None)
        if last is None or last[2].get("c") is None:
            return None
        a, b, holder = last
        return self.checksum(dev, a, b, holder["c"], check[5:])

    def make_copy(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        """A device-to-device copy of `nbytes` and its verification."""
        raise NotImplementedError

    def make_triad(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        """The STREAM triad a = b + 3c over `nbytes` per array, and its verification."""
        raise NotImplementedError

    def make_h2d(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        """A pinned host-to-device copy of `nbytes` and its verification."""
        raise CheckError("host-to-device copies need a GPU")

    def make_d2h(self, dev: int, nbytes: int) -> tuple[Callable[[], object], Verify]:
        """A device-to-pinned-host copy of `nbytes` and its verification."""
        raise CheckError("device-to-host copies need a GPU")

    def make_p2p(self, src: int, dst: int, nbytes: int) -> tuple[Callable[[], object], Verify, bool]:
        """A peer copy from `src` to `dst`, its verification, and whether peer access is on."""
        raise CheckError("peer-to-peer copies need two GPUs")

    def stress_dtype(self, dev: int) -> str:
        """The card's best tensor-core format for the stress GEMM (power reaches the limit)."""
        return "fp32"

    def make_stress(self, dev: int, n: int) -> StressState:
        """The stress GEMM state of device `dev` (n x n at `stress_dtype`)."""
        raise NotImplementedError

    def sync(self, dev: int) -> None:
        """Wait until all work queued on `dev` is done."""

    def timer_start(self, dev: int) -> Any:
        """Start timing work queued on `dev` (a token for `timer_end`)."""
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
        """End the timing and wait for it: the seconds."""
        self.timer_end(dev, token)
        return self.timer_elapsed(dev, token)

    def release(self) -> None:
        """Free what the last check allocated."""

    def is_alloc_error(self, exc: BaseException) -> bool:
        """Whether `exc` says the device ran out of memory."""
        return isinstance(exc, MemoryError)


class StressState:
    """Repeated GEMMs, each compared bit for bit with the first (as gpu-burn does, but exact:
    the same product on the same card is deterministic), non-finite elements counted as wrong."""

    dtype = "fp32"
    flops_per_step = 0.0

    def verify_reference(self) -> Record:
        """The first product against float64 on sampled rows and columns over every output tile
        (a unit that is wrong the same way every time matches itself in the later comparisons)."""
        raise NotImplementedError

    def checksum_reference(self) -> Record | None:
        """Every element of the first product by checksum (`checksum_check`): an element wrong
        the same way in every product matches itself bit for bit, so only this sees it."""
        return None

    def step(self) -> None:
        """One GEMM plus its comparison with the first (counted on the device, no sync)."""
        raise NotImplementedError

    def mismatches(self) -> int:
        """Elements that differed from the first product, non-finite ones included, so far."""
        raise NotImplementedError


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
            holder: Record = {}
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

    def grid(self, dev: int, a: Array, b: Array, c: Array, rows: list[int],

             cols: list[int]) -> tuple[list[Any], list[Any]]:
        self.sync(dev)
        return torch_grid(self.t, a, b, c, rows, cols)

    def ops(self, dev: int) -> ArrayOps | None:
        """PyTorch's array operations for the checksum."""
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
    """The stress GEMM on PyTorch (CUDA or CPU), compared on the device."""

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

    def verify_reference(self) -> Record:
        rows, cols = gemm_samples(int(self.a.shape[0])), gemm_samples(int(self.b.shape[1]))
        ref, got = torch_grid(self.t, self.a, self.b, self.ref, rows, cols)
        return answer_check(ref, got, STRESS_TOLERANCE[self.dtype], rows, cols)

    def checksum_reference(self) -> Record | None:
        """Every element of the first product, by checksum on the device."""
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

    def grid(self, dev: int, a: Array, b: Array, c: Array, rows: list[int],

             cols: list[int]) -> tuple[list[Any], list[Any]]:
        return array_grid(self.np, a, b, c, rows, cols)

    def ops(self, dev: int) -> ArrayOps | None:
        """NumPy's array operations for the checksum."""
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
    """The stress GEMM on NumPy (the CPU harness check)."""

    def __init__(self, backend: NumpyBackend, n: int) -> None:
        np = self.np = backend.np
        self.backend = backend
        self.a = backend.rng.standard_normal((n, n)).astype(np.float32)
        self.b = backend.rng.standard_normal((n, n)).astype(np.float32)
        self.ref = self.a @ self.b  # the first iteration
        self.c = np.empty_like(self.ref)
        self.bad = int(np.count_nonzero(~np.isfinite(self.ref)))
        self.flops_per_step = 2.0 * n**3

    def verify_reference(self) -> Record:
        rows, cols = gemm_samples(int(self.a.shape[0])), gemm_samples(int(self.b.shape[1]))
        ref, got = array_grid(self.np, self.a, self.b, self.ref, rows, cols)
        return answer_check(ref, got, STRESS_TOLERANCE["fp32"], rows, cols)

    def checksum_reference(self) -> Record | None:
        """Every element of the first product, by checksum."""
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

    def grid(self, dev: int, a: Array, b: Array, c: Array, rows: list[int],

             cols: list[int]) -> tuple[list[Any], list[Any]]:
        with self.cp.cuda.Device(dev):
            return array_grid(self.cp, a, b, c, rows, cols)

    def ops(self, dev: int) -> ArrayOps | None:
        """CuPy's array operations (NumPy's names) for the checksum."""
        return ArrayOps(self.cp)

    def checksum(self, dev: int, a: Array, b: Array, c: Array, fmt: str) -> Record | None:
        """The checksum on device `dev` (CuPy allocates on the current device)."""
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
    """The stress GEMM on CuPy, compared on the device."""

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

    def verify_reference(self) -> Record:
        rows, cols = gemm_samples(int(self.a.shape[0])), gemm_samples(int(self.b.shape[1]))
        with self.cp.cuda.Device(self.dev):
            ref, got = array_grid(self.cp, self.a, self.b, self.ref, rows, cols)
        return answer_check(ref, got, STRESS_TOLERANCE[self.dtype], rows, cols)

    def checksum_reference(self) -> Record | None:
        """Every element of the first product, by checksum on the device."""
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
    """CUDA C (bench_kernels.cu in this package) built with nvcc and cuBLAS.

    The binary measures one thing per invocation and prints the seconds of each timed window and
    what it verified; the medians and figures are computed by the same Python harness as for the
    other backends. It reports errors on stderr (and as JSON on stdout) with exit status 1.
    """

    name = "nvcc-cublas"
    harness = "gpu"

    def __init__(self, binary: str, gpus: list[Record]) -> None:
        self.binary = binary
        self.gpus = gpus
        self.extra: Record = {}
        # CUDA's own numbering and identities (`devices`), matched to nvidia-smi's by UUID.
        self.cuda_devices: list[Record] = [
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
    def build(cls, workdir: str, gpus: list[Record], emitter: Emitter, timeout: float = 240.0,
              source: str | None = None) -> NvccBackend:
        if source is None:
            # Beside this module: in the package, or in the zip gpuws sends (so read, not opened).
            try:
                text = pkgutil.get_data(__package__ or __name__.rpartition(".")[0], KERNELS)
            except OSError:
                text = None
            if not text:
                raise CheckError(f"{KERNELS} was not sent with the runner")
            source = os.path.join(workdir, KERNELS)
            with open(source, "wb") as out:
                out.write(text)
        if not os.path.exists(source):
            raise CheckError(f"{KERNELS} was not sent with the runner")
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
                 peer: int | None = None, timeout: float = 120.0, extra: str | None = None) -> Record:
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


def select_backend(choice: str, gpus: list[Record], workdir: str | None,
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
