"""gpuws on-host GPU sanity benchmark: measures, never judges.

Standalone on purpose: the standard library plus whatever it finds (PyTorch, CuPy, NumPy, nvcc,
pynvml). gpuws packs this package into one zip (a zipapp, `gpuws.remote.bench.runner_zip`), sends
it over SSH into a temporary directory and runs it with the host's `python3`, so nothing is
installed there; it also runs as it is on any machine:

    python3 gpuws_bench.pyz --json [--quick|--full] [--timeout S] [--expected JSON] [--allow-busy]
    python3 -m gpuws.agent.bench --json ...   (from a checkout)

One module per concern: `output` (the JSON lines), `host` (nvidia-smi facts, telemetry), `timing`
(sizes, windows, figures), `verify` (answer checks and checksums), `backends` (PyTorch, CuPy,
NumPy, CUDA C), `checks` (the harness), `sim` (the simulated host), `runner` (the run, the command
line). Relative imports only: the package is `gpuws.agent.bench` here and `gpuws_bench` in the zip.

Output is one JSON object per line on stdout:
    {"type": "progress", "step": k, "total": n, "check": ..., "message": ...}
    {"type": "log", "level": "info"|"warning"|"error", "message": ...}
    {"type": "result", "check": ..., "gpu": i|null, "value": x|null, "unit": ..., "status":
     "ok"|"inconclusive"|"skipped", "reason": ..., "harness": "gpu"|"cpu"|"simulated",
     "simulated": bool, "facts"/"details": {...}}
    {"type": "summary", ...}   (always last, also after a timeout or an error)

It reports raw figures and facts; gpuws scores them against the card's datasheet. Anything that
could not run is reported "inconclusive" with the reason, never left out (no silent pass).

No false pass, by construction: every element of every GEMM is verified by banded Huang-Abraham
checksums in float64 (see CHECKSUM_ROUNDOFF), and its answers are checked against a float64
product on sampled rows and columns over every output tile (per-format tolerances; a non-finite
element is wrong), on every backend; the stress GEMM's first product gets the same checks and
every later one is compared bit for bit with it (the same product on the same card is
deterministic); every measured copy is checked byte for byte afterwards; a timed check that ran
less than 90% of its asked duration, or (on a GPU) recorded no telemetry, is inconclusive. CUDA
devices are matched to nvidia-smi's GPUs by UUID; a GPU CUDA cannot see is inconclusive with the
reason. Throughput figures are the median of repeated timed windows (each at least 10 ms, after a
warm-up of at least 200 ms), with the sustained (10th percentile) and peak windows beside it.
A GPU already running compute processes is measured only
with --allow-busy. Non-finite numbers are sent as strings with a reason: the output is always JSON.

Backends, in order: PyTorch+CUDA, CuPy, CUDA C via nvcc+cuBLAS (bench_kernels.cu in this
package). Without a GPU toolchain it says what to install, and where NumPy or CPU PyTorch exists it
runs the same harness on the CPU with small sizes, labelled "cpu" (a test of the harness, not a
GPU measurement). On the gpuws simulated GPU host it produces plausible simulated figures, each
labelled "simulated".
"""

from __future__ import annotations

from .backends import (
    KERNELS,
    Backend,
    CupyBackend,
    CupyStress,
    NumpyBackend,
    NumpyStress,
    NvccBackend,
    StressState,
    TorchBackend,
    TorchStress,
    Verify,
    build_timeout,
    cpu_backend,
    find_nvcc,
    select_backend,
    stderr_tail,
)
from .checks import Harness, match_devices, measure
from .host import (
    BUSY_UTILIZATION_PCT,
    ENV_FIELDS,
    GPU_FIELDS,
    SAMPLE_FIELDS,
    SIM_MARKER,
    THROTTLE_BITS,
    Sampler,
    busy_reason,
    csv_value,
    decode_throttle,
    driver_cuda_version,
    environment_checks,
    gpu_activity,
    host_is_simulated,
    list_gpus,
    nvlink_status,
    query_gpus,
    remapped_rows,
    run_cmd,
    summarize_samples,
    to_float,
    to_int,
    topology_links,
)
from .output import CPU_LABEL, GEMM_CHECKS, NO_TOOLCHAIN, PROTOCOL, CheckError, Deadline, Emitter, first_line, jsonable
from .runner import main, parse_args, run
from .sim import (
    SIM_FAULT_KINDS,
    SIM_FAULTS_ENV,
    SIM_HOST_LINK_SHARE,
    SIM_JOBS_PAUSED_ENV,
    SIM_MAX_CLOCK,
    SIM_MODELS,
    SIM_PRODUCT_N,
    SIM_THROTTLE_AFTER_S,
    round_to_format,
    sim_checks,
    sim_fault_product,
    sim_faults,
    sim_peaks,
    sim_product,
    sim_unsampled,
    simulated_run,
)
from .timing import (
    MIN_RUN_SHARE,
    MIN_WARMUP_S,
    MIN_WINDOW_S,
    OVERALL_TIMEOUT,
    median_or_none,
    percentile,
    run_share_problem,
    window_stats,
)
from .verify import (
    CHECKSUM_BAND,
    CHECKSUM_LAMBDA,
    CHECKSUM_ROUNDOFF,
    GEMM_SAMPLES_PER_TILE,
    GEMM_TILE,
    GEMM_TOLERANCE,
    STRESS_TOLERANCE,
    ArrayOps,
    TorchOps,
    answer_check,
    array_grid,
    checksum_check,
    gemm_samples,
    torch_grid,
)

__all__ = [
    'BUSY_UTILIZATION_PCT', 'CHECKSUM_BAND', 'CHECKSUM_LAMBDA', 'CHECKSUM_ROUNDOFF', 'CPU_LABEL', 'ENV_FIELDS',
    'GEMM_CHECKS', 'GEMM_SAMPLES_PER_TILE', 'GEMM_TILE', 'GEMM_TOLERANCE', 'GPU_FIELDS', 'KERNELS',
    'MIN_RUN_SHARE', 'MIN_WARMUP_S', 'MIN_WINDOW_S', 'NO_TOOLCHAIN', 'OVERALL_TIMEOUT', 'PROTOCOL',
    'SAMPLE_FIELDS', 'SIM_FAULTS_ENV', 'SIM_FAULT_KINDS', 'SIM_HOST_LINK_SHARE', 'SIM_JOBS_PAUSED_ENV',
    'SIM_MARKER', 'SIM_MAX_CLOCK', 'SIM_MODELS', 'SIM_PRODUCT_N', 'SIM_THROTTLE_AFTER_S', 'STRESS_TOLERANCE',
    'THROTTLE_BITS', 'ArrayOps', 'Backend', 'CheckError', 'CupyBackend', 'CupyStress', 'Deadline', 'Emitter',
    'Harness', 'NumpyBackend', 'NumpyStress', 'NvccBackend', 'Sampler', 'StressState', 'TorchBackend',
    'TorchOps', 'TorchStress', 'Verify', 'answer_check', 'array_grid', 'build_timeout', 'busy_reason',
    'checksum_check', 'cpu_backend', 'csv_value', 'decode_throttle', 'driver_cuda_version',
    'environment_checks', 'find_nvcc', 'first_line', 'gemm_samples', 'gpu_activity', 'host_is_simulated',
    'jsonable', 'list_gpus', 'main', 'match_devices', 'measure', 'median_or_none', 'nvlink_status',
    'parse_args', 'percentile', 'query_gpus', 'remapped_rows', 'round_to_format', 'run', 'run_cmd',
    'run_share_problem', 'select_backend', 'sim_checks', 'sim_fault_product', 'sim_faults', 'sim_peaks',
    'sim_product', 'sim_unsampled', 'simulated_run', 'stderr_tail', 'summarize_samples', 'to_float', 'to_int',
    'topology_links', 'torch_grid', 'window_stats',
]
