"""`nvidia-smi mig` listing parsers (real captures) and MIG resize planning."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.core.errors import ParseError
from gpuws.core.resize.catalog import model_by_key
from gpuws.core.resize.layout import FULL_LAYOUT, LayoutError, parse_target
from gpuws.core.resize.mig_parse import ComputeInstance, GpuInstance, parse_lci, parse_lgi, parse_lgip, parse_lgipp
from gpuws.core.resize.plan import StepKind, build_mig_plan
from gpuws.core.resize.state import GpuMigState
from tests.support.real_fixtures import REAL_FIXTURES

FIXTURES = REAL_FIXTURES
H100 = model_by_key("h100-80gb")


def _block(path: Path, command: str) -> str:
    """The output after `$ <command>` in a fixture file, up to the next blank line."""
    text = path.read_text()
    return text.split(f"$ {command}\n", 1)[1].split("\n\n", 1)[0]


def test_lgip_and_lgipp_from_a_real_h100_nvl() -> None:
    path = FIXTURES / "mig" / "h100-nvl-lgip-lgipp-cgi.txt"
    profiles = parse_lgip(_block(path, "nvidia-smi mig -lgip"))
    assert [(p.profile, p.profile_id, p.total, p.memory_gib, p.sm_count) for p in profiles] == [
        ("1g.12gb", 19, 7, 10.75, 16), ("1g.12gb+me", 20, 1, 10.75, 16), ("1g.24gb", 15, 4, 21.62, 26),
        ("2g.24gb", 14, 3, 21.62, 32), ("3g.47gb", 9, 2, 46.38, 60), ("4g.47gb", 5, 1, 46.38, 64),
        ("7g.94gb", 0, 1, 93.12, 132),
    ]
    placements = {p.profile_id: (p.starts, p.size) for p in parse_lgipp(_block(path, "nvidia-smi mig -lgipp"))}
    assert placements[15] == ((0, 2, 4, 6), 2) and placements[5] == ((0,), 4) and placements[0] == ((0,), 8)
    # The catalog agrees with the real card.
    nvl = model_by_key("h100-nvl")
    for p in profiles:
        entry = nvl.profile(p.profile)
        if entry is not None:
            assert (entry.profile_id, entry.max_count, entry.memory_gib, entry.sm_count) == (
                p.profile_id, p.total, p.memory_gib, p.sm_count)
            assert (entry.placement_starts, entry.placement_size) == placements[p.profile_id]


def test_lgip_from_a_real_h100_sxm5_matches_the_catalog() -> None:
    text = _block(FIXTURES / "mig" / "h100-sxm5-lgip.txt", "sudo nvidia-smi mig -lgip")
    for p in parse_lgip(text):
        entry = H100.profile(p.profile)
        if entry is not None:
            assert (entry.profile_id, entry.max_count, entry.memory_gib, entry.sm_count) == (
                p.profile_id, p.total, p.memory_gib, p.sm_count)


# The -lgi / -lci layouts as NVIDIA's driver prints them (MIG user guide; newer drivers add the
# compute-instance Placement column).
LGI = """\
+----------------------------------------------------+
| GPU instances:                                     |
| GPU   Name          Profile  Instance   Placement  |
|                       ID       ID       Start:Size |
|====================================================|
|   0  MIG 3g.20gb       9        1          4:4     |
+----------------------------------------------------+
|   0  MIG 3g.20gb       9        2          0:4     |
+----------------------------------------------------+
"""
LCI_OLD = """\
+-------------------------------------------------------+
| Compute instances:                                    |
| GPU     GPU       Name             Profile   Instance |
|       Instance                       ID        ID     |
|         ID                                            |
|=======================================================|
|   0      1       MIG 3g.20gb          2         0     |
+-------------------------------------------------------+
"""
LCI_NEW = """\
+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
|   0      7       MIG 1g.10gb           0         0          0:1     |
+--------------------------------------------------------------------+
"""


def test_lgi_and_lci_tables() -> None:
    assert parse_lgi(LGI) == [GpuInstance(0, "3g.20gb", 9, 1, 4, 4), GpuInstance(0, "3g.20gb", 9, 2, 0, 4)]
    assert parse_lci(LCI_OLD) == [ComputeInstance(0, 1, "3g.20gb", 2, 0)]
    assert parse_lci(LCI_NEW) == [ComputeInstance(0, 7, "1g.10gb", 0, 0, 0, 1)]


@pytest.mark.parametrize("text", ["No GPU instances found: Not Found", "No MIG-enabled devices found."])
def test_driver_messages_for_nothing_read_as_empty(text: str) -> None:
    assert parse_lgi(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        LGI.replace("   4:4", "   four"),
        LGI.replace("GPU instances:", "GPU thingies:"),
        LGI.split("|====")[0],
        "+---+\n| GPU instances: Placement |\n|===|\n| 0 MIG 1g.10gb 19 1 |\n",
    ],
)
def test_malformed_lgi_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_lgi(text)


def test_malformed_lgipp_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="unexpected line"):
        parse_lgipp("GPU  0 Profile ID 19 Placements: {0,1,2\n")


def _state(mig: str, gis: tuple[GpuInstance, ...] = (), cis: tuple[ComputeInstance, ...] = (),
           pending: str | None = None) -> GpuMigState:
    return GpuMigState(0, "NVIDIA H100 80GB HBM3", "GPU-1", mig, pending or mig, gis, cis)


TWO_3G = (GpuInstance(0, "3g.40gb", 9, 1, 4, 4), GpuInstance(0, "3g.40gb", 9, 2, 0, 4))
TWO_3G_CIS = (ComputeInstance(0, 1, "3g.40gb", 2, 0), ComputeInstance(0, 2, "3g.40gb", 2, 0))


def test_full_to_seven_slices_enables_mig_then_creates_each_instance() -> None:
    plan = build_mig_plan(_state("Disabled"), parse_target("7x1g.10gb", H100), H100, sudo=False)
    assert [s.kind for s in plan.steps] == [StepKind.SET_MIG_MODE, StepKind.RESET_GPU] + [StepKind.CREATE_GI] * 7
    assert plan.steps[0].argv == ("nvidia-smi", "-i", "0", "-mig", "1")
    assert plan.steps[1].only_if_pending and plan.steps[1].argv == ("nvidia-smi", "-i", "0", "-r")
    assert plan.steps[2].argv == ("nvidia-smi", "mig", "-i", "0", "-cgi", "19", "-C")
    assert plan.destructive and plan.summary() == "GPU 0: full -> 7x1g.10gb (9 steps)"


def test_mig_to_full_destroys_compute_then_gpu_instances_then_disables() -> None:
    plan = build_mig_plan(_state("Enabled", TWO_3G, TWO_3G_CIS), FULL_LAYOUT, H100, sudo=True)
    assert [s.argv for s in plan.steps] == [
        ("sudo", "-n", "nvidia-smi", "mig", "-i", "0", "-dci"),
        ("sudo", "-n", "nvidia-smi", "mig", "-i", "0", "-dgi"),
        ("sudo", "-n", "nvidia-smi", "-i", "0", "-mig", "0"),
        ("sudo", "-n", "nvidia-smi", "-i", "0", "-r"),
    ]
    assert all(s.destructive for s in plan.steps)
    assert all(isinstance(a, str) for s in plan.steps for a in s.argv)


def test_same_layout_is_an_empty_plan_and_gi_without_ci_is_rebuilt() -> None:
    target = parse_target("3g.40gb,3g.40gb", H100)
    assert build_mig_plan(_state("Enabled", TWO_3G, TWO_3G_CIS), target, H100, sudo=False).empty
    assert build_mig_plan(_state("Disabled"), FULL_LAYOUT, H100, sudo=False).summary() == "already at target"
    half = build_mig_plan(_state("Enabled", TWO_3G, TWO_3G_CIS[:1]), target, H100, sudo=False)
    assert [s.kind for s in half.steps] == [StepKind.DESTROY_CI, StepKind.DESTROY_GI, StepKind.CREATE_GI,
                                            StepKind.CREATE_GI]


def test_pending_mode_change_is_planned_again() -> None:
    plan = build_mig_plan(_state("Disabled", pending="Enabled"), FULL_LAYOUT, H100, sudo=False)
    assert [s.kind for s in plan.steps] == [StepKind.SET_MIG_MODE, StepKind.RESET_GPU]


def test_plan_refuses_a_target_that_does_not_fit() -> None:
    from gpuws.core.resize.layout import Layout

    with pytest.raises(LayoutError):
        build_mig_plan(_state("Disabled"), Layout(True, ("4g.40gb", "4g.40gb")), H100, sudo=False)
