"""The one GPU registry: driver captures, PCI ids, +me profiles, and what derives from it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpuws.agent.bench import host as bench_runner  # THROTTLE_BITS lives in the runner's host module
from gpuws.core.bench.datasheets import CATALOG, detect_model
from gpuws.core.gpus.models import MIG_GPUS, VARIANTS, MemorySource, variant_for_name, variant_for_pci_id
from gpuws.core.gpus.throttle import CLOCK_EVENT_BITS
from gpuws.core.nvsmi.mig_profiles import derive_mig_profile
from gpuws.core.resize.catalog import GPU_MODELS, model_for_gpu_name
from gpuws.core.resize.mig_parse import parse_lgip
from gpuws.core.telemetry.throttle import GPU_IDLE_BIT, REASON_BITS
from gpuws.sim.models import GPU_MODELS as SIM_MODELS
from tests.support.real_fixtures import REAL_FIXTURES

MIG_FIXTURES = REAL_FIXTURES / "mig"


def _lgip_table(text: str) -> str:
    """The `mig -lgip` box of a capture (from its first `+---` line to its last)."""
    lines = text.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("+-"))
    end = first
    for i in range(first, len(lines)):
        if lines[i].startswith(("+", "|")):
            end = i
        else:
            break
    return "\n".join(lines[first:end + 1])


@pytest.mark.parametrize(
    ("capture", "key"), [("h100-sxm5-lgip.txt", "h100-80gb"), ("h100-nvl-lgip-lgipp-cgi.txt", "h100-nvl")]
)
def test_registry_rows_match_real_lgip_captures_field_for_field(capture: str, key: str) -> None:
    """Every `-lgip` row of a real card, +me (ID 20) included: ID, count, GiB, SMs and engines."""
    rows = parse_lgip(_lgip_table((MIG_FIXTURES / capture).read_text()))
    assert {r.profile for r in rows} >= {MIG_GPUS[key].profiles[1].name}  # the +me row is captured
    by_id = {p.profile_id: p for p in MIG_GPUS[key].profiles}
    assert sorted(by_id) == sorted(r.profile_id for r in rows)
    for row in rows:
        spec = by_id[row.profile_id]
        assert (spec.name, spec.max_count, spec.memory_gib_text, spec.sm_count) == (
            row.profile, row.total, f"{row.memory_gib:.2f}", row.sm_count)


def test_every_model_has_its_plus_me_profile_id_20() -> None:
    for gpu in MIG_GPUS.values():
        if not gpu.profiles:
            continue
        me = [p for p in gpu.profiles if p.media_extensions]
        assert [(p.profile_id, p.name, p.max_count, p.ofa) for p in me] == [
            (20, gpu.profiles[0].name + "+me", 1, me[0].ofa)]
        assert me[0].ofa in (1, None)  # the media extensions include the OFA where published


def test_a100_40gb_memory_is_the_drivers_not_rounded_up() -> None:
    """MIG user guide `-lgip` on A100-SXM4-40GB: 3g.20gb / 4g.20gb 19.50 GiB, 7g.40gb 39.25."""
    a100 = {p.name: p.memory_gib for p in MIG_GPUS["a100-40gb"].profiles}
    assert (a100["3g.20gb"], a100["4g.20gb"], a100["7g.40gb"]) == (19.50, 19.50, 39.25)
    assert (a100["1g.5gb"], a100["1g.10gb"], a100["2g.10gb"]) == (4.75, 9.62, 9.62)


def test_h200_and_b200_sizes_are_marked_nominal() -> None:
    for key in ("h200-141gb", "b200"):
        assert MIG_GPUS[key].memory_source is MemorySource.NOMINAL
        catalog = next(m for m in GPU_MODELS if m.key == key)
        assert catalog.memory_nominal
    assert not next(m for m in GPU_MODELS if m.key == "h100-80gb").memory_nominal


def test_host_lgip_replaces_nominal_memory() -> None:
    h200 = next(m for m in GPU_MODELS if m.key == "h200-141gb")
    measured = h200.with_host_memory({19: 16.0})
    assert measured.profile("1g.18gb") is not None and measured.profile("1g.18gb").memory_gib == 16.0  # type: ignore[union-attr]
    assert not measured.memory_nominal


@pytest.mark.parametrize(
    ("pci", "variant"),
    [("0x233010DE", "H100 SXM"), ("0x20B210DE", "A100 80GB SXM"), ("0x232110DE", "H100 NVL"),
     ("20b010de", "A100 40GB SXM"), ("0x290110DE", "B200"), ("0x20B710DE", "A30"), ("0xFFFF10DE", None)],
)
def test_pci_device_ids_as_mig_parted_writes_them(pci: str, variant: str | None) -> None:
    found = variant_for_pci_id(pci)
    assert (found.name if found else None) == variant


def test_simulated_models_report_the_registrys_pci_ids_and_mig_tables() -> None:
    for model in SIM_MODELS.values():
        if model.virtualization_mode == "VGPU":
            continue
        variant = variant_for_name(model.name)
        assert variant is not None and model.pci_device_id in variant.pci_device_ids
        if model.mig_profiles:
            assert variant.mig is not None and model.mig_profiles == MIG_GPUS[variant.mig].profiles


def test_one_name_matcher_feeds_catalog_datasheets_and_inventory() -> None:
    for name, mig_key, datasheet in [
        ("NVIDIA H100 80GB HBM3", "h100-80gb", "H100 SXM"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb", "A100 40GB SXM"),
        ("NVIDIA H100 NVL", "h100-nvl", "H100 NVL"),
        ("NVIDIA H200", "h200-141gb", "H200"),
    ]:
        catalog = model_for_gpu_name(name)
        assert catalog is not None and catalog.key == mig_key
        assert detect_model(name) == datasheet and datasheet in CATALOG
    # The A30 (4 slices) and the A800 come from the registry too, for MIG device names.
    assert derive_mig_profile("NVIDIA A30", 24576, 14, 6016) == "1g.6gb"
    assert derive_mig_profile("NVIDIA A800-SXM4-80GB", 81920, 14, 9728) == "1g.10gb"
    assert derive_mig_profile("GRID A100-10C", 10240, 14, 4864) is None  # a vGPU guest: never guessed
    assert all(v.mig is None or v.mig in MIG_GPUS for v in VARIANTS)
    assert all(v.datasheet is None or v.datasheet in CATALOG for v in VARIANTS)


def test_agent_throttle_bits_do_not_drift_from_the_registry() -> None:
    """The agent runs standalone on the host, so it has its own copy: it must equal the registry's."""
    assert dict(CLOCK_EVENT_BITS) == bench_runner.THROTTLE_BITS
    # Read from the agent's source too (what is sent to the host), not only the imported module.
    tree = ast.parse(Path(bench_runner.__file__).read_text())
    literal = next(
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "THROTTLE_BITS" for t in node.targets)
    )
    assert ast.literal_eval(literal) == dict(CLOCK_EVENT_BITS)
    assert dict(REASON_BITS) | {GPU_IDLE_BIT: "gpu_idle"} == dict(CLOCK_EVENT_BITS)
    assert {0x200, 0x400} <= set(bench_runner.THROTTLE_BITS)


def test_a_hosts_own_lgip_replaces_the_catalog_memory_in_the_state() -> None:
    from gpuws.core.resize.state import GpuMigState

    state = GpuMigState(0, "NVIDIA H200", None, "Enabled", "Enabled", host_profile_memory=((19, 16.5),))
    assert state.model is not None and state.model.profile(19).memory_gib == 16.5  # type: ignore[union-attr]
    assert not state.model.memory_nominal
    plain = GpuMigState(0, "NVIDIA H200", None, "Disabled", "Disabled")
    assert plain.model is not None and plain.model.memory_nominal
