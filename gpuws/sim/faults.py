"""Faults the simulated GPU host plays for the benchmark, from `--fault KIND:GPU` or the
environment (`GPUWS_SIM_FAULTS=KIND:GPU,KIND:GPU`, read by the in-process demo host).

- bench-nan: the GEMMs of that GPU return NaN elements (its GEMM checks and its `stress` check fail).
- copy-corrupt: its copies flip a byte (`mem_copy`, `h2d`, `d2h`, `p2p` fail).
- busy: another process holds the GPU at high utilisation (its `gemm_*` checks are inconclusive).
- throttle: its clocks fall to a third after 5 s of load (sustained GEMM checks warn or fail,
  naming the throttle).
- slow-link: its PCIe link trained at x4 (`env.pcie` fails, host copies are slow).
- gemm-wrong: its GEMMs run at full speed but return wrong numbers in one output tile past row 3
  (the GEMM checks fail on the answer check).
- gemm-element: one element of each of its GEMM products is wrong (by half the largest element),
  in the same place every time and where the sampled answer check does not look: only the
  checksum over every element (and in the stress run, that of the first product) sees it.
- gemm-tile: one 32 x 32 tile of each product is off by 2 % of the largest element, where no
  sampled row or column falls (the checksum sees it).
- cuda-invisible: CUDA cannot see it (as under `CUDA_VISIBLE_DEVICES` or a failed CUDA start-up);
  nvidia-smi lists it, the benchmark cannot measure it (inconclusive).
- no-vnc: host-wide (the GPU index does not matter): no VNC server on the host's PATH, so
  `gpuws desktop` takes its missing-server path.
- software-gl: host-wide: no (simulated) VirtualGL, so the desktop's OpenGL is the real llvmpipe.

Health faults (`gpuws health`), each in the real format of the field it emulates
(tests/fixtures/real): xid-79 and xid-13 (an `NVRM: Xid` line in the kernel log),
remap-pending (`remapped_row_pending` Yes), reset-required (`gpu_recovery_action` Reset),
fabric-down (fabric state In Progress on an NVSwitch system; CUDA cannot start there, error
802), nvlink-errors (CRC, replay and recovery counters in `nvidia-smi nvlink -e`), pcie-capped
(the link trained one generation below what card and slot allow, under load too: Gen4 of an
H100's Gen5), power-capped (power limit 300 W of the 700 W default).

A fault the host cannot play on the GPU it names (a capped link or power limit on a vGPU guest,
fabric-down off an NVSwitch system, a GPU index the host lacks) is refused with the reason
(`gpuws.sim.health.check_faults`), never silently ignored.

The simulated `nvidia-smi` shows busy and slow-link; the benchmark runner's simulated backend
reads the same variable for the rest (it is standalone, so it parses it itself).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from gpuws.core.errors import RefusedInput

FAULTS_ENV = "GPUWS_SIM_FAULTS"
# Set by the benchmark runner on the simulated host: the demo's own jobs stand aside meanwhile.
JOBS_PAUSED_ENV = "GPUWS_SIM_JOBS_PAUSED"
BUSY_PID_BASE = 47000  # simulated pids of the busy fault's process (one per GPU)
SLOW_LINK_WIDTH = 4
CAPPED_POWER_SHARE = 300 / 700  # power-capped: 300 of the H100's 700 W
BUSY_UTILIZATION = 0.97


class FaultKind(StrEnum):
    """What a simulated GPU does wrong in the benchmark."""

    BENCH_NAN = "bench-nan"
    COPY_CORRUPT = "copy-corrupt"
    BUSY = "busy"
    THROTTLE = "throttle"
    SLOW_LINK = "slow-link"
    GEMM_WRONG = "gemm-wrong"
    CUDA_INVISIBLE = "cuda-invisible"
    GEMM_ELEMENT = "gemm-element"
    GEMM_TILE = "gemm-tile"
    XID_79 = "xid-79"
    XID_13 = "xid-13"
    REMAP_PENDING = "remap-pending"
    RESET_REQUIRED = "reset-required"
    FABRIC_DOWN = "fabric-down"
    NVLINK_ERRORS = "nvlink-errors"
    PCIE_CAPPED = "pcie-capped"
    POWER_CAPPED = "power-capped"
    NO_VNC = "no-vnc"  # host-wide
    SOFTWARE_GL = "software-gl"  # host-wide


class FaultSpecError(RefusedInput):
    """A fault is not written KIND:GPU with a known kind and a GPU index."""


@dataclass(frozen=True)
class SimFault:
    """One fault on one simulated GPU."""

    kind: FaultKind
    gpu: int

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.gpu}"


def parse_fault(text: str) -> SimFault:
    """`KIND:GPU`, e.g. "bench-nan:0"; a `FaultSpecError` naming the kinds otherwise."""
    kind, sep, gpu = text.strip().partition(":")
    kinds = ", ".join(k.value for k in FaultKind)
    if not sep or not gpu.strip().isdigit():
        raise FaultSpecError(f"fault {text.strip()!r}: write KIND:GPU, e.g. bench-nan:0 (kinds: {kinds})")
    try:
        return SimFault(FaultKind(kind.strip()), int(gpu))
    except ValueError:
        raise FaultSpecError(f"fault {text.strip()!r}: unknown kind {kind.strip()!r} (kinds: {kinds})") from None


def parse_faults(items: Iterable[str]) -> list[SimFault]:
    """Every `KIND:GPU` of `items`, each item possibly a comma-separated list; duplicates once."""
    found: list[SimFault] = []
    for item in items:
        for part in item.split(","):
            if part.strip():
                fault = parse_fault(part)
                if fault not in found:
                    found.append(fault)
    return found


def faults_from_env(env: Mapping[str, str] | None = None) -> list[SimFault]:
    """The faults of `GPUWS_SIM_FAULTS` (empty when unset); a bad entry is a `FaultSpecError`."""
    text = (env if env is not None else os.environ).get(FAULTS_ENV, "")
    return parse_faults([text]) if text.strip() else []


def format_faults(faults: Iterable[SimFault]) -> str:
    """The `GPUWS_SIM_FAULTS` value for `faults`."""
    return ",".join(str(f) for f in faults)


def has_fault(faults: Iterable[SimFault], kind: FaultKind, gpu: int) -> bool:
    return SimFault(kind, gpu) in set(faults)


def has_host_fault(faults: Iterable[SimFault], kind: FaultKind) -> bool:
    """A host-wide fault (no-vnc, software-gl) given on any GPU index."""
    return any(f.kind is kind for f in faults)


def active_faults() -> list[SimFault]:
    """Faults of the simulated host this process runs in (never raises: a bad value plays none)."""
    try:
        return faults_from_env()
    except FaultSpecError:
        return []
