"""The process table (pid, user, command, GPU, GPU memory, SM %), sortable, with Stop process…,
on the simulated host through its real nvidia-smi, ps and kill wrappers; and the parsers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from gpuws.app.workspace import Workspace
from gpuws.core.models import HostProfile
from gpuws.core.processes import parse_load, parse_pmon, parse_ps
from gpuws.core.runner import LocalRunner
from gpuws.sim.state import SimStateStore
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.telemetry.process_table import ProcessTable
from tests.support.sshd import install_sim_nvidia_smi

pytestmark = pytest.mark.gui


def test_parsers_keep_missing_values_missing() -> None:
    assert parse_ps("  4242 alice python3 train.py --lr 3e-4\n 17 bob\n") == {
        4242: ("alice", "python3 train.py --lr 3e-4"), 17: ("bob", "")}
    pmon = ("# gpu        pid  type    sm   mem   enc   dec   command\n"
            "# Idx          #   C/G     %     %     %     %   name\n"
            "    0       4242     C    87    40     -     -   python3\n"
            "    1       5151     C     -     -     -     -   jupyter\n")
    assert parse_pmon(pmon) == {4242: 87.0}
    meminfo = "MemTotal:       65536000 kB\nMemAvailable:   32768000 kB\n"
    load = parse_load("16\n", "0.52 0.40 0.33 2/400 1234\n", meminfo)
    assert load.cpus == 16 and load.load == (0.52, 0.40, 0.33)
    assert load.text() == "16 CPUs · load 0.52 0.40 0.33 · RAM 31.2 of 62.5 GiB used"


def test_the_table_lists_sorts_and_stops_a_process(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> None:
    """Found: cards said only "process (4204063) 22.1 GiB": no user, command, utilisation, no way to stop it."""
    bin_dir = tmp_path / "bin"
    install_sim_nvidia_smi(bin_dir)
    store = SimStateStore(tmp_path / "state")
    with store.update() as state:
        big = state.gpu(0).add_process("python3 train.py --epochs 90", 30_000)
        small = state.gpu(2).add_process("python3 eval.py", 2_000)
    runner = LocalRunner(dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", GPUWS_SIM_STATE=str(store.dir)))
    table = ProcessTable()
    qtbot.addWidget(table)
    workspace = Workspace(lambda coro: bridge.run_async(coro), post=bridge.post, stream=False)
    workspace.add_host(HostProfile(name="sim", host="localhost"))
    table.set_source(bridge, lambda: runner, workspace=workspace, host="sim")  # Stop goes through its verb
    table.show()
    qtbot.waitUntil(lambda: any(str(big) == r[0] for r in table.rows()), timeout=20_000)
    rows = {int(r[0]): r for r in table.rows()}
    assert rows[big][2] == "python3 train.py --epochs 90" and rows[big][3] == "0" and rows[big][4] == "29.3 GiB"
    assert rows[big][1] not in ("", "—")  # the user, from ps
    assert "CPUs" in table.load_label.text() and "RAM" in table.load_label.text()  # host CPU/RAM/load
    table.table.sortByColumn(4, Qt.SortOrder.AscendingOrder)
    memory = [r[4] for r in table.rows() if r[4] != "—"]
    assert memory == sorted(memory, key=lambda m: float(m.split()[0]))
    # Stop: confirmed once for SIGTERM; the simulated process goes away.
    asked: list[str] = []
    table.confirm = lambda title, question: asked.append(question) is None
    table.select_pid(small)
    table.stop_button.click()
    qtbot.waitUntil(lambda: "stopped" in table.status.text(), timeout=20_000)
    assert asked and f"pid {small}" in asked[0] and "SIGTERM" in asked[0]
    assert all(p.pid != small for gpu in store.load().gpus for p in gpu.processes)
    table.hide()
    qtbot.waitUntil(lambda: bridge.pending_count == 0, timeout=15_000)
