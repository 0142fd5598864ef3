"""The simulated host's `kill` and `ps` stop and list simulated GPU processes like real ones."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuws.sim.procs import simulated_processes
from gpuws.sim.state import BUSY_PID_BASE, SimStateStore


def run(tool: str, *args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {"GPUWS_SIM_STATE": str(state), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "gpuws.sim.procs", tool, *args], capture_output=True, text=True, env=env, timeout=30
    )


@pytest.fixture
def state(tmp_path: Path) -> Path:
    store = SimStateStore(tmp_path / "sim", spec="a100,h100")
    with store.update() as s:
        s.gpu(0).set_scenario("idle")  # a notebook kernel holding memory
        s.gpu(1).set_load(0.0)
        s.gpu(1).add_process("python3 worker.py", 1000)
    return tmp_path / "sim"


def test_ps_names_a_simulated_pid_and_kill_stops_it(state: Path) -> None:
    alive = simulated_processes(SimStateStore(state).load(), time.time())
    assert len(alive) == 2
    for pid, (_gpu, command) in alive.items():
        out = run("ps", "-o", "comm=", "-p", str(pid), state=state)
        assert out.returncode == 0 and out.stdout.strip() == command.split()[0]
    r = run("kill", "-TERM", *map(str, alive), state=state)
    assert r.returncode == 0, r.stderr
    assert simulated_processes(SimStateStore(state).load(), time.time()) == {}


def test_real_pids_still_go_to_the_real_tools(state: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert run("ps", "-o", "comm=", "-p", str(sleeper.pid), state=state).stdout.strip() == "sleep"
        assert run("kill", "-KILL", str(sleeper.pid), state=state).returncode == 0
        assert sleeper.wait(5) == -9
    finally:
        sleeper.kill()
    listing = run("ps", "-eo", "pid=,comm=", state=state).stdout
    assert "ipykernel" not in listing  # comm is the executable: python3
    assert listing.count("python3") >= 2  # the simulated ones are listed with the real ones


def test_an_ended_simulated_pid_never_reaches_the_real_kill(state: Path) -> None:
    r = run("kill", "-KILL", str(BUSY_PID_BASE), state=state)  # a simulated pid, not running now
    assert r.returncode == 1 and "No such process" in r.stderr
