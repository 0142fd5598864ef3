"""The window's resize updates the saved profile's slice and price exactly as `gpuws resize` does:
both call `gpuws.app.resize.apply_mig` (simulated host through a local runner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.app import resize as service
from gpuws.app.workspace import Workspace
from gpuws.core.models import HostProfile
from gpuws.core.profiles import ProfileStore
from gpuws.core.resize.audit import AuditLog
from gpuws.core.resize.journal import STARTED
from gpuws.remote.resize import MigResizer, ResizeOutcome
from gpuws.sim.state import SimStateStore
from gpuws.ui.resize import operations
from tests.ui.test_telemetry_service import sim_host


async def test_the_window_resize_reprices_the_profile_like_the_cli(tmp_path: Path) -> None:
    runner = sim_host(tmp_path)
    with SimStateStore(tmp_path / "state").update() as state:
        for gpu in state.gpus:
            gpu.set_load(0.0)
    profile = HostProfile(name="gpu1", host="127.0.0.1", user="me", price_per_hour=8.0)
    ProfileStore().add(profile)

    _, _, plan = await MigResizer(runner).plan(0, "3g.40gb")
    workspace = Workspace(lambda _coro: None, stream=False)  # type: ignore[arg-type,return-value]
    workspace.add_host(profile)
    # The window's Resize tab goes through the Workspace verb, as `gpuws resize` does.
    applied = await workspace.resize("gpu1", plan, stop_processes=False, progress=lambda _p: None,
                                     audit=AuditLog(), via="window", runner=runner)
    assert applied.outcome is ResizeOutcome.VERIFIED
    saved = ProfileStore().get("gpu1")
    assert applied.profile == saved  # the window follows the saved figures, computed once
    # The same figures as tests/cli/test_resize_cli.py checks for `gpuws resize gpu1 3g.40gb`.
    assert saved.slice_profile == "gpu0=3g.40gb"
    assert saved.price_per_hour == pytest.approx(8.0 - 2.0 + 0.8571, abs=1e-3)
    finished = [r for r in AuditLog().read("gpu1") if r.phase != STARTED]  # the journal's "started" too
    assert [(r.before, r.after) for r in finished] == [("full", "3g.40gb")]

    # A plan made before the GPU changed is refused before anything runs.
    with pytest.raises(service.PlanChanged):
        await workspace.resize("gpu1", plan, stop_processes=False, progress=lambda _p: None, audit=AuditLog(),
                               runner=runner)


def test_the_tab_reads_through_the_one_service_and_changes_only_through_the_verbs() -> None:
    assert operations.preview_mig is service.preview_mig
    # Nothing that changes a layout or an instance type beside the Workspace verbs.
    assert not {"apply_mig", "apply_provider", "recover_mig"} & set(vars(operations))


async def test_the_after_verify_step_tells_the_front_end_once_with_the_saved_profile(tmp_path: Path) -> None:
    runner = sim_host(tmp_path)
    with SimStateStore(tmp_path / "state").update() as state:
        for gpu in state.gpus:
            gpu.set_load(0.0)
    profile = HostProfile(name="gpu1", host="127.0.0.1", user="me", price_per_hour=8.0)
    ProfileStore().add(profile)
    told: list[HostProfile] = []
    _, _, plan = await service.plan_mig(runner, 0, "3g.40gb")
    applied = await service.apply_mig(runner, profile, plan, stop_processes=False, audit=AuditLog(),
                                      on_changed=told.append)
    assert told == [applied.profile] == [ProfileStore().get("gpu1")]
    # Nothing to do: nothing changed, nobody is told.
    _, _, again = await service.plan_mig(runner, 0, "3g.40gb")
    await service.apply_mig(runner, applied.profile, again, stop_processes=False, audit=AuditLog(),
                            on_changed=told.append)
    assert len(told) == 1


@pytest.mark.keyring
async def test_a_provider_type_change_goes_through_the_after_verify_step(tmp_path: Path) -> None:
    from gpuws.core.models import ProviderInfo
    from gpuws.core.resize.provider import plan_provider_resize

    marks = tmp_path / "marks"
    marks.mkdir()
    provider = ProviderInfo(kind="custom", instance_id="i-0abc", commands={
        action: ["touch", f"{marks}/{action}-{{instance_type}}"] for action in ("stop", "modify", "start")})
    profile = HostProfile(name="cloud", host="10.0.0.9", price_per_hour=4.0, slice_profile="g5.xlarge",
                          slice_prices={"g5.2xlarge": 1.25}, provider=provider)
    ProfileStore().add(profile)
    told: list[HostProfile] = []

    async def reconnect() -> str:
        return "1 GPU"  # the instance "came back": what the provider CLI changed is the marks

    applied = await service.apply_provider(profile, plan_provider_resize(provider, "g5.2xlarge"),
                                           reconnect=reconnect, audit=AuditLog(), on_changed=told.append)
    assert applied.kind is ResizeOutcome.VERIFIED and (marks / "modify-g5.2xlarge").exists()
    saved = ProfileStore().get("cloud")
    assert (saved.slice_profile, saved.price_per_hour) == ("g5.2xlarge", 1.25)
    assert told == [saved] and not applied.warnings
    assert AuditLog().read("cloud")[-1].after == "g5.2xlarge"

    # A type without a known price: the slice follows, the price stays, and the user is told.
    again = await service.apply_provider(saved, plan_provider_resize(provider, "g5.4xlarge"),
                                         reconnect=reconnect, audit=AuditLog())
    saved = ProfileStore().get("cloud")
    assert (saved.slice_profile, saved.price_per_hour) == ("g5.4xlarge", 1.25)
    assert again.warnings and "no price is known for g5.4xlarge" in again.warnings[0]


@pytest.mark.keyring
async def test_a_provider_without_describe_keeps_its_templates_through_the_verb(tmp_path: Path) -> None:
    """Google Cloud, Alibaba, Tencent and custom templates have no describe command: the Workspace
    verb runs their steps in order and reaches the host at the profile's address, as before."""
    from gpuws.app.cloud import Reached
    from gpuws.core.inventory import HostFacts, Inventory
    from gpuws.core.models import ProviderInfo

    marks = tmp_path / "marks"
    marks.mkdir()
    provider = ProviderInfo(kind="custom", instance_id="i-0abc", commands={
        action: ["touch", f"{marks}/{action}-{{instance_type}}"] for action in ("stop", "modify", "start")})
    profile = HostProfile(name="cloud-templates", host="10.0.0.9", price_per_hour=4.0, slice_profile="a.small",
                          slice_prices={"a.large": 1.25}, provider=provider)
    ProfileStore().add(profile)
    reached: list[str] = []

    async def reach(at: HostProfile) -> Reached:
        reached.append(at.host)
        return Reached(Inventory(HostFacts(), []), 0.0)

    workspace = Workspace(lambda _coro: None, stream=False)  # type: ignore[arg-type,return-value]
    workspace.add_host(profile)
    done = await workspace.resize_instance("cloud-templates", "type:a.large", reach=reach, audit=AuditLog())

    assert done.kind is ResizeOutcome.VERIFIED and (marks / "modify-a.large").exists()
    assert reached == ["10.0.0.9"]  # the profile's own address: nothing to read it back from
    assert any("not read back" in w for w in done.warnings)
    saved = ProfileStore().get("cloud-templates")
    assert (saved.slice_profile, saved.price_per_hour, saved.host) == ("a.large", 1.25, "10.0.0.9")
    assert workspace.host("cloud-templates").profile == saved  # type: ignore[union-attr]  # layout_changed
