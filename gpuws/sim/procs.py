"""`kill` and `ps` for the simulated host, so its simulated GPU processes can be stopped.

The simulated host's compute processes (a scenario's training job, a notebook kernel, ones a
test added) exist only in the simulation's state, yet a resize must be able to list them with
`ps` and stop them with `kill` exactly as on a real host. These wrappers sit first on the
simulated host's PATH: simulated pids are handled here (the scenario job is stopped, an added
process is removed), and every other pid or option goes to the real `/bin/kill` and `ps`
untouched.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

from gpuws.sim.dynamics import scenario_processes
from gpuws.sim.state import SIM_PID_BASE, SimState, SimStateStore

REAL_KILL = "/bin/kill"
REAL_PS = "/bin/ps"


def simulated_processes(state: SimState, t: float) -> dict[int, tuple[int, str]]:
    """pid -> (gpu index, command line) of every simulated process alive at time `t`."""
    procs: dict[int, tuple[int, str]] = {}
    for gpu in state.gpus:
        # Not a Fault.BUSY process: it plays one in another pid namespace (a container), which the
        # host can neither see nor stop.
        for proc in [*scenario_processes(gpu, t), *gpu.processes]:
            procs[proc.pid] = (gpu.index, proc.name)
    return procs


def in_simulated_range(pid: int) -> bool:
    """Whether the simulation hands out this pid (no real process can have one of these)."""
    return pid >= SIM_PID_BASE


def _comm(command: str) -> str:
    """What `ps -o comm=` shows: the executable's base name, cut to 15 characters as Linux does."""
    return os.path.basename(command.split()[0])[:15] if command else ""


def kill_main(args: Sequence[str]) -> int:
    pids = [a for a in args if a.isdigit()]
    options = [a for a in args if not a.isdigit()]
    store = SimStateStore.from_env()
    real: list[str] = []
    failed = False
    with store.update() as state:
        alive = simulated_processes(state, time.time())
        for pid_text in pids:
            pid = int(pid_text)
            if pid not in alive:
                if in_simulated_range(pid):
                    # A simulated process that has ended: never let its number reach a real process.
                    print(f"kill: ({pid}) - No such process", file=sys.stderr)
                    failed = True
                else:
                    real.append(pid_text)
                continue
            gpu = state.gpu(alive[pid][0])
            if not state.remove_process(pid):
                # A scenario's own job: stopping it leaves that GPU idle, as on a real host.
                gpu.set_load(0.0)
    if real or not pids:
        os.execv(REAL_KILL, [REAL_KILL, *options, *real])
    return 1 if failed else 0


def ps_main(args: Sequence[str]) -> int:
    # Only the two forms gpuws uses are answered for simulated pids; anything else is real ps.
    store = SimStateStore.from_env()
    alive = simulated_processes(store.load(), time.time())
    argv = list(args)
    if argv[:2] == ["-o", "comm="] and len(argv) == 4 and argv[2] == "-p" and argv[3].isdigit():
        pid = int(argv[3])
        if pid in alive:
            print(_comm(alive[pid][1]))
            return 0
    if argv[:2] == ["-o", "pid=,user=,args="] and len(argv) == 4 and argv[2] == "-p":
        # The process table's form (issue 16): simulated pids answered here, the rest by real ps.
        wanted = [int(p) for p in argv[3].split(",") if p.isdigit()]
        real = [str(p) for p in wanted if p not in alive]
        user = os.environ.get("USER") or "gpuws"
        for pid in wanted:
            if pid in alive:
                print(f"{pid:>7} {user} {alive[pid][1]}")
        sys.stdout.flush()
        if not real:
            return 0
        os.execv(REAL_PS, [REAL_PS, "-o", "pid=,user=,args=", "-p", ",".join(real)])
    if argv == ["-eo", "pid=,comm="]:
        for pid, (_gpu, command) in sorted(alive.items()):
            print(f"{pid:>7} {_comm(command)}")
        sys.stdout.flush()  # before exec replaces this process and its buffers
    os.execv(REAL_PS, [REAL_PS, *argv])
    return 0  # not reached


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in {"kill", "ps"}:
        print("usage: python -m gpuws.sim.procs kill|ps ARGS", file=sys.stderr)
        return 2
    return kill_main(args[1:]) if args[0] == "kill" else ps_main(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
