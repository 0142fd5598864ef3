"""The simulated MIG state machine: real rules, real texts, and every injected fault."""

from __future__ import annotations

from gpuws.sim.state import Fault, SimStateStore
from tests.sim.conftest import FIXTURES, SmiRunner


def _enable_idle_mig(sim_store: SimStateStore, smi: SmiRunner, index: int = 0) -> None:
    with sim_store.update() as state:
        state.gpu(index).set_load(0.0)  # no demo job on it
    code, out, _ = smi("-i", str(index), "-mig", "1")
    assert code == 0
    assert out.splitlines() == [f"Enabled MIG Mode for GPU {sim_store.load().gpu(index).pci_bus_id}", "All done."]


def test_enable_is_refused_while_a_process_runs_then_applies_on_reset(sim_store, smi) -> None:
    with sim_store.update() as state:
        gpu = state.gpu(0)
        gpu.set_load(0.0)
        pid = gpu.add_process("python3 train.py", 4096)
    code, out, _ = smi("-i", "0", "-mig", "1")
    assert code == 0
    assert "Warning: MIG mode is in pending enable state" in out and "In use by another client" in out
    gpu = sim_store.load().gpu(0)
    assert (gpu.mig_current, gpu.mig_pending) == (False, True)
    assert smi("-i", "0", "-r")[0] == 255  # still busy
    with sim_store.update() as state:
        assert state.remove_process(pid)
    code, out, _ = smi("-i", "0", "-r")
    assert code == 0 and "was successfully reset" in out
    assert sim_store.load().gpu(0).mig_current is True


def test_mig_on_a_card_without_mig_is_not_supported(sim_store, smi) -> None:
    code, _, err = smi("-i", "2", "-mig", "1")
    assert code == 3 and "Not Supported" in err


def test_lgip_is_byte_identical_to_real_h100(sim_store, smi) -> None:
    _enable_idle_mig(sim_store, smi)
    code, out, _ = smi("mig", "-i", "0", "-lgip")
    assert code == 0
    real = (FIXTURES / "mig" / "h100-sxm5-lgip.txt").read_text().splitlines()
    start = real.index("+-----------------------------------------------------------------------------+")
    real_table = real[start:]
    assert out.splitlines()[: len(real_table)] == real_table


def test_lgipp_matches_real_format(sim_store, smi) -> None:
    _enable_idle_mig(sim_store, smi)
    code, out, _ = smi("mig", "-i", "0", "-lgipp")
    real = [line for line in (FIXTURES / "mig" / "h100-nvl-lgip-lgipp-cgi.txt").read_text().splitlines()
            if line.startswith("GPU  0 Profile ID")]
    assert code == 0 and out.splitlines() == real


def test_create_follows_real_placements_and_ids(sim_store, smi) -> None:
    _enable_idle_mig(sim_store, smi)
    code, out, _ = smi("mig", "-i", "0", "-cgi", "14,9,19,19", "-C")
    assert code == 0
    assert out.splitlines()[0] == "Successfully created GPU instance ID  3 on GPU  0 using profile MIG 2g.20gb (ID 14)"
    assert ("Successfully created compute instance ID  0 on GPU  0 GPU instance ID  2 using profile "
            "MIG 3g.40gb (ID  2)") in out
    # The same layout as the real H100 MIG capture: GI 2 (3g), 3 (2g), 9 and 10 (1g).
    gis = sorted((gi.gi_id, gi.start, gi.size) for gi in sim_store.load().gpu(0).gpu_instances)
    assert gis == [(2, 4, 4), (3, 0, 2), (9, 2, 1), (10, 3, 1)]
    code, out, _ = smi("-L", "-i", "0")
    assert [line.split(":")[0] for line in out.splitlines()[1:]] == [
        "  MIG 3g.40gb     Device  0", "  MIG 2g.20gb     Device  1",
        "  MIG 1g.10gb     Device  2", "  MIG 1g.10gb     Device  3",
    ]
    code, _, err = smi("mig", "-i", "0", "-cgi", "19")
    assert code == 255
    assert err.splitlines() == [
        "Unable to create a GPU instance on GPU  0 using profile 19: Insufficient Resources",
        "Failed to create GPU instances: Insufficient Resources",
    ]


def test_seven_small_slices_then_back_to_full(sim_store, smi) -> None:
    _enable_idle_mig(sim_store, smi, index=1)
    assert smi("mig", "-i", "1", "-cgi", ",".join(["1g.10gb"] * 7), "-C")[0] == 0
    code, out, _ = smi("mig", "-i", "1", "-lgi")
    assert code == 0 and out.count("MIG 1g.10gb") == 7
    code, _, err = smi("mig", "-i", "1", "-dgi")
    assert code == 255 and "In use by another client" in err  # compute instances first
    assert smi("mig", "-i", "1", "-dci")[0] == 0
    assert smi("mig", "-i", "1", "-dgi")[0] == 0
    code, _, err = smi("mig", "-i", "1", "-lgi")
    assert code == 6 and "No GPU instances found" in err
    assert smi("-i", "1", "-mig", "0")[0] == 0
    assert sim_store.load().gpu(1).mig_current is False


def test_disable_refused_while_instances_exist(sim_store, smi) -> None:
    _enable_idle_mig(sim_store, smi)
    smi("mig", "-i", "0", "-cgi", "0")
    code, _, err = smi("-i", "0", "-mig", "0")
    assert code == 255 and "Unable to disable MIG Mode" in err


def test_injected_faults(sim_store, smi) -> None:
    _enable_idle_mig(sim_store, smi)
    with sim_store.update() as state:
        state.gpu(0).inject_fault(Fault.CREATE_GI_FAILS)
    code, _, err = smi("mig", "-i", "0", "-cgi", "9")
    assert code == 255 and "Failed to create GPU instances" in err
    assert sim_store.load().gpu(0).gpu_instances == []
    assert smi("mig", "-i", "0", "-cgi", "9")[0] == 0  # one-shot: the next try works

    with sim_store.update() as state:
        state.gpu(0).inject_fault(Fault.CREATE_CI_FAILS)
    code, _, err = smi("mig", "-i", "0", "-cgi", "9", "-C")
    assert code == 255 and "Failed to create compute instances" in err
    gpu = sim_store.load().gpu(0)
    assert len(gpu.gpu_instances) == 2 and all(not gi.compute_instances for gi in gpu.gpu_instances)

    with sim_store.update() as state:
        state.gpu(0).inject_fault(Fault.DESTROY_FAILS)
    code, _, err = smi("mig", "-i", "0", "-dgi")
    assert code == 255 and "In use by another client" in err
    assert smi("mig", "-i", "0", "-dgi")[0] == 0

    with sim_store.update() as state:
        state.gpu(0).inject_fault(Fault.SILENT_NOOP)
    code, out, _ = smi("mig", "-i", "0", "-cgi", "19", "-C")
    assert code == 0 and "Successfully created GPU instance" in out
    assert sim_store.load().gpu(0).gpu_instances == []  # ... yet nothing exists

    with sim_store.update() as state:
        state.gpu(0).inject_fault(Fault.RESET_FAILS)
    code, out, _ = smi("-i", "0", "-mig", "0")
    assert code == 0 and "pending disable state" in out
    assert sim_store.load().gpu(0).mig_current is True


def test_busy_fault_blocks_mode_change(sim_store, smi) -> None:
    with sim_store.update() as state:
        state.gpu(1).inject_fault(Fault.BUSY, times=-1)
    code, out, _ = smi("-i", "1", "-mig", "1")
    assert "pending enable state" in out
    code, out, _ = smi("--query-compute-apps=pid,process_name", "--format=csv,noheader", "-i", "1")
    assert code == 0
    assert "python3 train.py" in out
    assert sim_store.load().gpu(1).mig_current is False


def test_mig_commands_need_mig_enabled(sim_store, smi) -> None:
    code, _, err = smi("mig", "-i", "2", "-lgi")
    assert code == 6 and err.strip() == "No MIG-enabled devices found."
