"""The simulated `nvidia-smi pmon -s u` (issue 27: the process table's SM column was "—" for
every process on the demo host, which had no pmon): the real tool's header, the share of the
GPU each process uses, dashes where the driver cannot tell, and the process table filled."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gpuws.core.processes import parse_pmon
from gpuws.core.runner import LocalRunner
from gpuws.remote.processes import read_processes
from gpuws.sim.dynamics import sample
from gpuws.sim.nvidia_smi import PMON_HEADER
from gpuws.sim.state import SimStateStore
from tests.sim.conftest import FIXTURES, SmiRunner
from tests.support.sshd import install_sim_nvidia_smi


def _busy(sim_store: SimStateStore) -> list[int]:
    with sim_store.update() as state:
        gpu = state.gpu(0)
        gpu.set_load(0.8)
        return [gpu.add_process("python3 train.py", 30_000), gpu.add_process("python3 eval.py", 10_000)]


CAPTURE = FIXTURES / "nvidia-smi-captures" / "h100-80gb-hbm3__590.48.01.txt"


def _captured(section: str) -> list[str]:
    """The lines the real nvidia-smi printed under `# SECTION :: pmon` (header included)."""
    lines = CAPTURE.read_text().splitlines()
    start = lines.index(f"# {section} :: pmon (per-process monitor)") + 3
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return [line.rstrip() for line in lines[start:end]]


def test_the_header_and_columns_are_the_real_tools(sim_store: SimStateStore, smi: SmiRunner) -> None:
    assert [h.rstrip() for h in PMON_HEADER] == _captured("idle")[:2]
    with sim_store.update() as state:
        state.gpu(0).set_load(0.0)
    code, out, _ = smi("pmon", "-c", "1", "-i", "0")
    assert code == 0 and [line.rstrip() for line in out.splitlines()] == _captured("idle")[:3]
    assert parse_pmon(out) == {}
    # A busy GPU, as the real one prints it and the table reads it: the same columns.
    real = _captured("load")
    assert parse_pmon("\n".join(real)) == {11345: 99.0}
    pid = _busy(sim_store)[0]
    ours = next(line for line in smi("pmon", "-c", "1", "-i", "0")[1].splitlines() if f" {pid} " in line)
    gpu_burn = next(line for line in real if "gpu_burn" in line)
    ends = [i for i in range(len(gpu_burn) - 1) if gpu_burn[i] != " " and gpu_burn[i + 1] == " "]
    assert [i for i in range(len(ours) - 1) if ours[i] != " " and ours[i + 1] == " "] == ends  # right-aligned alike


def test_each_process_gets_its_share_of_the_gpu(sim_store: SimStateStore, smi: SmiRunner) -> None:
    pids = _busy(sim_store)
    code, out, _ = smi("pmon", "-c", "1", "-s", "u", "-i", "0")
    assert code == 0
    sm = parse_pmon(out)
    assert set(pids) <= set(sm)
    assert sm[pids[0]] > sm[pids[1]] > 0  # the one holding more memory does more of the work
    assert sum(sm[pid] for pid in pids) <= 100


def test_a_mig_gpu_says_dash_per_process(sim_store: SimStateStore, smi: SmiRunner) -> None:
    with sim_store.update() as state:
        gpu = state.gpu(0)
        gpu.mig_current = True
        pid = gpu.add_process("python3 train.py", 4096)
    assert sample(sim_store.load().gpu(0), 0.0).util_gpu_pct is None
    code, out, _ = smi("pmon", "-c", "1", "-i", "0")
    assert code == 0 and str(pid) in out and pid not in parse_pmon(out)


def test_other_metrics_are_refused_as_not_simulated(smi: SmiRunner) -> None:
    code, _, err = smi("pmon", "-s", "m")
    assert code != 0 and "-s u" in err


def test_the_process_table_has_sm_on_the_simulated_host(sim_store: SimStateStore, tmp_path: Path) -> None:
    pids = _busy(sim_store)
    bin_dir = tmp_path / "bin"
    install_sim_nvidia_smi(bin_dir)
    import os

    runner = LocalRunner({**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    processes, _load = asyncio.run(read_processes(runner))
    shown = {p.pid: p.sm_pct for p in processes}
    assert set(pids) <= set(shown)
    assert all(shown[pid] is not None and shown[pid] > 0 for pid in pids)
