"""Checking the answers: GEMM products against float64 (sampled grid and checksums over every element)."""

from __future__ import annotations

import contextlib
import math
from typing import Any

from .output import CheckError, Record

GEMM_TILE = 128


GEMM_SAMPLES_PER_TILE = 2


# Measured on a healthy H200 (gpuws device check, 2026-12-04, n = 8192): fp32 4.5e-6 (PEDANTIC /
# no TF32), tf32 4.7e-4 through PyTorch but 3.3e-3 through cuBLAS CUBLAS_COMPUTE_32F_FAST_TF32,
# fp16 4.5e-4, bf16 3.6e-3, fp8 (fast accumulation, bf16 out) 7.0e-3. A wrong tile is off by O(1).
GEMM_TOLERANCE = {"gemm_fp32": 2e-5, "gemm_tf32": 1e-2, "gemm_fp16": 1e-2, "gemm_bf16": 1e-2, "gemm_fp8": 5e-2}


STRESS_TOLERANCE = {"fp32": 2e-5, "fp16": 1e-2, "bf16": 1e-2}


# Every element of every checked product is also covered by Huang-Abraham checksums (ABFT): per
# CHECKSUM_BAND-row band and column, the band's sum of C = A @ B against (e_band^T A) B, and per row
# and CHECKSUM_BAND-column band, C's sum against A (B e_band), all in float64 (the plain e^T(AB) vs
# (e^T A)B of Huang and Abraham, split into bands so that one wrong element stands out of the
# rounding noise of 32 elements, not 8192). A sum is wrong when it differs by more than
#   CHECKSUM_LAMBDA * sqrt(u_out^2 * sum(C^2) + rho^2 * sum_l(a^2 b^2)),  rho^2 = k u_acc^2 + (2 u_in)^2
#                                                                      + u_out^2 + g64^2,
# over the band's elements: u_out the output format's unit roundoff (each element rounded once; with
# a band of 32 <= CHECKSUM_LAMBDA^2 elements this term bounds even errors that all lean one way, by
# Cauchy-Schwarz), u_acc the accumulator's (k roundings of partial sums whose squares sum to at most
# k sum(a^2 b^2) in expectation), u_in the inputs' conversion (TF32), the u_out^2 once more for a
# split-K reduction rounded in the output format, g64 the float64 reference's own. The error terms
# are rounding errors of random-sign products (the runner's inputs are zero-mean random), so their
# sum is bounded as Hoeffding bounds a sum of independent bounded terms: beyond 8 times the root
# sum of squares with probability under 2 exp(-32) = 2.5e-14 per sum.
CHECKSUM_BAND = 32


CHECKSUM_LAMBDA = 8.0


# Unit roundoff (in, accumulate, out) per format. TF32 keeps 10 mantissa bits (truncating: <= 2^-10),
# but cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32 on the H200 recording erred as bf16 inputs do (3.3e-3 of the
# row's largest element, torch's TF32 4.9e-4): 2^-8. FP8 with fast accumulation keeps about 14 bits
# in the tensor core's accumulator (DeepSeek-V3 technical report, 3.3.2): 2^-13; its output is bf16.
CHECKSUM_ROUNDOFF = {
    "fp32": (0.0, 2.0**-24, 2.0**-24),
    "tf32": (2.0**-8, 2.0**-24, 2.0**-24),
    "fp16": (0.0, 2.0**-24, 2.0**-11),
    "bf16": (0.0, 2.0**-24, 2.0**-8),
    "fp8": (0.0, 2.0**-13, 2.0**-8),
}


def gemm_samples(n: int, per_tile: int = GEMM_SAMPLES_PER_TILE, tile: int = GEMM_TILE) -> list[int]:
    """Row (or column) indices to check: `per_tile` in every `tile`-wide band of 0..n-1, at
    offsets that differ from band to band (a fault at a fixed offset in every tile is still hit)."""
    picks: list[int] = []
    for start in range(0, n, tile):
        width = min(tile, n - start)
        for k in range(per_tile):
            offset = (start // tile * 37 + k * (width // per_tile + 13)) % width
            if start + offset not in picks:
                picks.append(start + offset)
    return picks


def answer_check(ref: list[list[float]], got: list[list[float]], tolerance: float,
                 rows: list[int] | None = None, cols: list[int] | None = None) -> Record:
    """Compare a sampled grid of a product (`got`) with its float64 reference (`ref`): per row,
    the error relative to the row's largest reference element. Non-finite answers are wrong."""
    wrong = nonfinite = checked = 0
    worst = 0.0
    first: list[int] | None = None
    if len(ref) != len(got) or any(len(a) != len(b) for a, b in zip(ref, got)):  # noqa: B905 - lengths checked here
        raise CheckError("the answer check got grids of different shapes")
    for i, (ref_row, got_row) in enumerate(zip(ref, got)):  # noqa: B905 - equal lengths, checked above
        scale = max((abs(x) for x in ref_row if math.isfinite(x)), default=0.0) or 1.0
        for j, (want, have) in enumerate(zip(ref_row, got_row)):  # noqa: B905
            checked += 1
            if not math.isfinite(have):
                nonfinite += 1
                bad, rel = True, math.inf
            else:
                rel = abs(have - want) / scale
                bad = not rel <= tolerance
            worst = max(worst, rel)
            if bad:
                wrong += 1
                if first is None:
                    first = [rows[i] if rows else i, cols[j] if cols else j]
    return {"checked": checked, "wrong": wrong, "nonfinite": nonfinite, "max_rel_error": worst,
            "tolerance": tolerance, "first_wrong": first, "rows": len(ref), "cols": len(ref[0]) if ref else 0}


# An array of NumPy, CuPy or PyTorch: the runner cannot name their types without importing them.
Array = Any


class ArrayOps:
    """What the checksum needs of an array module, the same for NumPy and CuPy (`xp`); PyTorch's
    differences are in `TorchOps`. Everything stays on the arrays' device; only counts come back."""

    def __init__(self, xp: Any) -> None:
        self.xp = xp

    def wide(self, x: Array) -> Any:
        """`x` as float64, on its device."""
        return x.astype(self.xp.float64)

    def bands(self, n: int, like: Array) -> Any:
        """The n x ceil(n / CHECKSUM_BAND) float64 matrix whose column b sums band b."""
        xp = self.xp
        count = -(-n // CHECKSUM_BAND)
        return self.wide(xp.arange(n)[:, None] // CHECKSUM_BAND == xp.arange(count)[None, :])

    def count(self, mask: Array) -> int:
        """How many elements of the boolean `mask` are true."""
        return int(mask.sum())

    def first(self, mask: Array) -> int:
        """The flat index of the first True of `mask` (row-major), -1 when none."""
        return int(self.wide(mask).argmax()) if self.count(mask) else -1

    def largest(self, x: Array) -> float:
        """The largest element of `x` (0 when it is empty)."""
        return float(x.max()) if x.size else 0.0


class TorchOps(ArrayOps):
    """The checksum's array operations on PyTorch tensors (other names for dtypes and devices)."""

    def wide(self, x: Array) -> Any:
        t = self.xp
        # FP8 converts to float64 only through float32; a bool mask converts directly.
        return x.to(t.float64) if x.dtype in (t.bool, t.float64) else x.to(t.float32).to(t.float64)

    def bands(self, n: int, like: Array) -> Any:
        t = self.xp
        count = -(-n // CHECKSUM_BAND)
        rows = t.arange(n, device=like.device)[:, None] // CHECKSUM_BAND
        return (rows == t.arange(count, device=like.device)[None, :]).to(t.float64)

    def largest(self, x: Array) -> float:
        return float(x.max()) if x.numel() else 0.0


def checksum_check(ops: ArrayOps, a: Array, b: Array, c: Array, fmt: str) -> Record:
    """Every element of c = a @ b verified by banded Huang-Abraham checksums in float64 (see
    CHECKSUM_ROUNDOFF): the sums wrong, the non-finite elements of c, the worst sum's error as a
    share of its tolerance, and where the first wrong sum points (row of the first wrong row sum,
    column of the first wrong column sum: the element itself when one element is wrong)."""
    xp = ops.xp
    u_in, u_acc, u_out = CHECKSUM_ROUNDOFF[fmt]
    n, k = int(a.shape[0]), int(a.shape[1])
    m = int(b.shape[1])
    if int(b.shape[0]) != k or tuple(int(x) for x in c.shape) != (n, m):
        raise CheckError("the checksum got matrices of different shapes")
    g64 = (k + CHECKSUM_BAND) * 2.0**-53 * math.sqrt(CHECKSUM_BAND * k)
    rho2 = k * u_acc**2 + (2 * u_in) ** 2 + u_out**2 + g64**2
    # A NaN or infinity in c makes NaN sums, which is the point: no warning about them.
    quiet = getattr(xp, "errstate", None)
    with quiet(all="ignore") if quiet is not None else contextlib.nullcontext():
        return _checksums(ops, a, b, c, rho2, u_in, u_acc, u_out)


def _checksums(ops: ArrayOps, a: Array, b: Array, c: Array, rho2: float, u_in: float, u_acc: float,
               u_out: float) -> Record:
    xp = ops.xp
    n, m = int(c.shape[0]), int(c.shape[1])
    a64, b64, c64 = ops.wide(a), ops.wide(b), ops.wide(c)
    nonfinite = n * m - ops.count(xp.isfinite(c64))
    a2, b2, c2 = a64 * a64, b64 * b64, c64 * c64
    row_bands, col_bands = ops.bands(n, a64), ops.bands(m, b64)
    wrong, first, worst = 0, [-1, -1], 0.0
    # Column sums per band of rows: e_b^T C against (e_b^T A) B; then row sums per band of columns.
    sides = ((row_bands.T @ c64, (row_bands.T @ a64) @ b64, row_bands.T @ c2, (row_bands.T @ a2) @ b2),
             (c64 @ col_bands, a64 @ (b64 @ col_bands), c2 @ col_bands, a2 @ (b2 @ col_bands)))
    for side, (got, want, out2, terms2) in enumerate(sides):
        tolerance = CHECKSUM_LAMBDA * xp.sqrt(u_out**2 * out2 + rho2 * terms2)
        error = xp.abs(got - want)
        bad = ~(error <= tolerance)  # a NaN or infinity is never within tolerance
        wrong += ops.count(bad)
        share = error / (tolerance + 1e-300)
        worst = max(worst, ops.largest(xp.where(xp.isfinite(share), share, xp.zeros_like(share))))
        at = ops.first(bad)
        if at >= 0:
            width = int(bad.shape[1])
            # Row sums name the row (side 1), column sums the column (side 0).
            first[1 - side] = at // width if side == 1 else at % width
            if first[side] < 0:
                first[side] = (at % width) * CHECKSUM_BAND if side == 1 else (at // width) * CHECKSUM_BAND
    return {"method": "huang-abraham", "band": CHECKSUM_BAND, "elements": n * m,
            "sums": int(row_bands.shape[1]) * m + n * int(col_bands.shape[1]), "wrong": wrong,
            "nonfinite": nonfinite, "max_share_of_tolerance": round(worst, 6),
            "first_wrong": first if wrong or nonfinite else None, "lambda": CHECKSUM_LAMBDA,
            "unit_roundoff": {"in": u_in, "accumulate": u_acc, "out": u_out}}


def torch_grid(t: Any, a: Array, b: Array, c: Array, rows: list[int], cols: list[int]) -> tuple[list[Any], list[Any]]:
    """The float64 product of rows x cols of a @ b, and the same elements of c (PyTorch)."""
    r = t.tensor(rows, device=a.device)
    k = t.tensor(cols, device=b.device)

    def wide(x: Array) -> Any:  # FP8 converts to float64 only through float32
        return x.to(t.float32).to(t.float64)

    ref = wide(a.index_select(0, r)) @ wide(b.index_select(1, k))
    got = wide(c.index_select(0, r).index_select(1, k))
    return ref.cpu().tolist(), got.cpu().tolist()


def array_grid(xp: Any, a: Array, b: Array, c: Array, rows: list[int], cols: list[int]) -> tuple[list[Any], list[Any]]:
    """The same for NumPy or CuPy arrays (`xp` is the module)."""
    r, k = xp.asarray(rows), xp.asarray(cols)
    ref = a[r].astype(xp.float64) @ b[:, k].astype(xp.float64)
    got = c[r][:, k].astype(xp.float64)
    if hasattr(ref, "get"):
        ref, got = ref.get(), got.get()
    return ref.tolist(), got.tolist()
