"""What the checksum over every element costs and what it catches: `python -m benchmarks bench_checksum`.

On the CPU (NumPy, the runner's CPU harness): the float32 GEMM itself, the sampled float64 check
and the banded Huang-Abraham checksum, medians side by side at a few sizes; then, per format, the
smallest single-element error the checksum catches, as a share of the product's largest element
(k = 8192, rounding emulated as the runner's simulated host does). The checksum is 12 float64
products of (n / 32) x n x n: 0.375 of one n-square float64 GEMM's work (on an H100, whose float64
tensor cores run at 67 TFLOP/s, about 5x one bf16 GEMM's time: a few ms at n = 8192).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy

from gpuws.agent import bench as runner


def _median_ms(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def costs() -> None:
    """The GEMM, the sampled check and the checksum at a few sizes."""
    ops = runner.ArrayOps(numpy)
    rng = numpy.random.default_rng(0)
    for n in (256, 512, 1024):
        a = rng.standard_normal((n, n)).astype(numpy.float32)
        b = rng.standard_normal((n, n)).astype(numpy.float32)
        c = a @ b
        rows, cols = runner.gemm_samples(n), runner.gemm_samples(n)
        gemm = _median_ms(lambda a=a, b=b: a @ b)
        sampled = _median_ms(lambda a=a, b=b, c=c, rows=rows, cols=cols: runner.answer_check(
            *runner.array_grid(numpy, a, b, c, rows, cols), 2e-5, rows, cols))
        summed = _median_ms(lambda a=a, b=b, c=c: runner.checksum_check(ops, a, b, c, "fp32"))
        print(f"n={n}: float32 GEMM {gemm:.1f} ms, sampled check {sampled:.1f} ms, checksum {summed:.1f} ms "
              f"({summed / gemm:.1f}x the GEMM)")


def sensitivity() -> None:
    """The smallest single-element error caught, per format, at k = 8192."""
    ops = runner.ArrayOps(numpy)
    for fmt in ("fp32", "tf32", "fp16", "bf16", "fp8"):
        stored = "fp32" if fmt == "tf32" else fmt
        a = runner.round_to_format(numpy, numpy.random.default_rng(2).standard_normal((64, 8192))
                                   .astype(numpy.float32), stored)
        b = runner.round_to_format(numpy, numpy.random.default_rng(3).standard_normal((8192, 64))
                                   .astype(numpy.float32), stored)
        c = runner.round_to_format(numpy, runner.round_to_format(numpy, a, fmt) @ runner.round_to_format(numpy, b, fmt),
                                   "bf16" if fmt == "fp8" else "fp32" if fmt == "tf32" else fmt).astype(numpy.float64)
        largest = float(numpy.abs(c).max())
        lo, hi = 0.0, 1.0
        for _ in range(30):  # bisect the share of the largest element that trips one checksum
            mid = (lo + hi) / 2
            bad = c.copy()
            bad[10, 20] += mid * largest
            lo, hi = (lo, mid) if runner.checksum_check(ops, a, b, bad, fmt)["wrong"] else (mid, hi)
        print(f"{fmt}: one element off by {hi:.2e} of the largest ({hi * largest:.3g}, typical element "
              f"{float(numpy.sqrt((c * c).mean())):.3g}) is caught")


if __name__ == "__main__":
    costs()
    sensitivity()
