"""The Resize tab driven against the simulated GPU host (its nvidia-smi, kill and ps first on PATH,
run through a LocalRunner behind a real HostSession): plan shown, typed confirmation, stopping
busy processes, progress to the end, the verified result, a fault rolled back, the audit history.

Screenshots are saved in each test's tmp_path (light and dark) for a person to look at.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from gpuws.core.models import HostProfile, ProviderInfo
from gpuws.core.resize.audit import AuditLog
from gpuws.core.resize.layout import FULL_LAYOUT, Layout
from gpuws.core.resize.plan import Plan
from gpuws.core.runner import LocalRunner
from gpuws.remote.resize import ROLLBACK_FAILED, ROLLED_BACK, TARGET_VERIFIED, ResizeOutcome, ResizeResult
from gpuws.sim.state import SCENARIO_PID_BASE, Fault, SimStateStore
from gpuws.ui import theme
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.resize.options import price_difference
from gpuws.ui.resize.progress_view import OutcomeKind, outcome_kind
from gpuws.ui.session_controller import HostSession
from gpuws.ui.tabs import HostContext
from gpuws.ui.tabs.resize import ResizeTab, mig_outcome_text
from tests.support.local_connection import LocalConnection
from tests.support.sshd import install_sim_nvidia_smi

pytestmark = pytest.mark.gui

A100 = 1  # GPU 1 of the default simulated host: NVIDIA A100-SXM4-80GB
IDLE_KERNEL_PID = SCENARIO_PID_BASE + A100 * 100  # the "idle" scenario's notebook kernel on GPU 1


@pytest.fixture
def sim_store(tmp_path: Path) -> SimStateStore:
    return SimStateStore(tmp_path / "state")


@pytest.fixture
def tab(qtbot: Any, bridge: AsyncBridge, tmp_path: Path, sim_store: SimStateStore) -> Iterator[ResizeTab]:
    """A Resize tab showing a connected, probed simulated host named 'gpu-lab'."""
    bin_dir = tmp_path / "bin"
    install_sim_nvidia_smi(bin_dir)
    sim_store.load()  # creates the default state: H100, A100, L40S, vGPU
    runner = LocalRunner(dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", GPUWS_SIM_STATE=str(sim_store.dir)))
    profile = HostProfile(name="gpu-lab", host="127.0.0.1", user="me", simulated=True,
                          provider=ProviderInfo(kind="aws", instance_id="i-0abc123", region="eu-west-1"))
    session = HostSession(profile, bridge, connection_factory=lambda _p, **_kw: LocalConnection(runner))
    widget = ResizeTab()
    widget.resize(1100, 900)
    session.connect_host()
    qtbot.waitUntil(lambda: session.state == "connected", timeout=15000)
    widget.set_host(HostContext(profile, session, bridge))
    qtbot.waitUntil(lambda: bool(widget.gpus), timeout=15000)
    yield widget
    # Let reads still in flight (the tab re-reads after every resize) finish before the loop stops.
    qtbot.waitUntil(lambda: bridge.pending_count == 0, timeout=15000)
    widget.set_host(None)
    widget.close()
    widget.deleteLater()
    session.close()
    session.deleteLater()


def _choose(qtbot: Any, tab: ResizeTab, gpu: int, target: str) -> None:
    combo = tab.picker.gpu_combo
    combo.setCurrentIndex(combo.findData(gpu))
    assert tab.picker.select_target(target), f"{target} is not offered"
    qtbot.waitUntil(lambda: tab.preview is not None and tab.preview.plan.after.describe() == target, timeout=15000)


def _apply_and_wait(qtbot: Any, tab: ResizeTab) -> None:
    assert tab.confirmation.apply_button.isEnabled()
    qtbot.mouseClick(tab.confirmation.apply_button, Qt.MouseButton.LeftButton)
    assert tab.applying
    qtbot.waitUntil(lambda: tab.progress_view.finished and not tab.applying, timeout=60000)


def _row(tab: ResizeTab, target: str) -> list[str]:
    table = tab.picker.table
    for row in range(table.rowCount()):
        if table.item(row, 0).data(Qt.ItemDataRole.UserRole) == target:
            return [table.item(row, col).text() for col in range(table.columnCount())]
    raise AssertionError(f"no row for {target}")


def _shoot(tab: ResizeTab, folder: Path, name: str) -> None:
    assert tab.grab().save(str(folder / f"{name}.png"))  # for a person to look at


def _shoot_light_and_dark(tab: ResizeTab, folder: Path, name: str) -> None:
    """Save the tab in the light and the dark palette into `folder`, the test's own tmp_path (the
    application palette is restored)."""
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    original = app.palette()
    try:
        for suffix, palette in (("light", theme.light_palette()), ("dark", theme.dark_palette())):
            app.setPalette(palette)
            QApplication.processEvents()
            dark = tab.palette().color(QPalette.ColorRole.Window).lightness() < 80
            assert dark == (suffix == "dark")
            _shoot(tab, folder, f"{name}-{suffix}")
    finally:
        app.setPalette(original)


@pytest.mark.slow
def test_full_to_seven_slices_and_back_with_typed_confirmation(
    qtbot: Any, tab: ResizeTab, sim_store: SimStateStore, tmp_path: Path
) -> None:
    # The targets of the A100 80GB, priced from the catalog's reference ($2.00/h for the card).
    _choose(qtbot, tab, A100, "7x1g.10gb")
    assert _row(tab, "full")[0].endswith("full") and _row(tab, "full")[0].startswith("\u25cf")  # current
    assert _row(tab, "3g.40gb")[3:] == ["$0.86", "\u2212$1.14"]
    assert _row(tab, "7x1g.10gb")[1:4] == ["66.5 GiB", "100%", "$2.00"]

    # The exact plan, as commands.
    plan = tab.plan_view.text()
    assert "nvidia-smi -i 1 -mig 1" in plan and plan.count("nvidia-smi mig -i 1 -cgi 19 -C") == 7
    assert tab.plan_view.destructive_badge.isVisibleTo(tab)
    assert tab.comparison.before.title.text() == "full" and tab.comparison.after.title.text() == "7x1g.10gb"
    assert tab.comparison.difference.text() == "\u00b1$0.00/h"

    # What will be stopped: the notebook kernel the simulated host runs on GPU 1.
    assert [p.pid for p in tab.processes_view.processes] == [IDLE_KERNEL_PID]
    assert tab.processes_view.table.item(0, 1).text() == "python3 -m ipykernel_launcher"

    # Apply needs the host name typed exactly, and the processes to be stoppable.
    button, field = tab.confirmation.apply_button, tab.confirmation.field
    assert not button.isEnabled()
    qtbot.keyClicks(field, "gpu-la")
    assert not button.isEnabled()
    qtbot.keyClicks(field, "b")
    assert not button.isEnabled() and "in use" in tab.confirmation.reason.text()
    tab.processes_view.stop_checkbox.setChecked(True)
    assert button.isEnabled()
    _shoot_light_and_dark(tab, tmp_path, "resize-plan")

    _apply_and_wait(qtbot, tab)
    bar = tab.progress_view.bar
    assert bar.value() == bar.maximum() == 9
    assert tab.progress_view.outcome.kind is OutcomeKind.SUCCESS
    assert tab.progress_view.outcome.title.text() == "Target verified: GPU 1 is now 7x1g.10gb"
    log = tab.progress_view.log.toPlainText()
    assert f"stopping pid(s) {IDLE_KERNEL_PID}" in log and "verified: 7x1g.10gb" in log
    # The host really is there, and the tab read it back: the current row moved.
    assert sim_store.load().gpu(A100).mig_current
    qtbot.waitUntil(lambda: _row(tab, "7x1g.10gb")[0].startswith("\u25cf"), timeout=15000)
    qtbot.waitUntil(lambda: len(tab.audit_view.records) == 1, timeout=5000)
    record = tab.audit_view.records[0]
    assert (record.before, record.after, record.outcome) == ("full", "7x1g.10gb", TARGET_VERIFIED)
    assert tab.audit_view.table.item(0, 2).text() == "full \u2192 7x1g.10gb"
    _shoot_light_and_dark(tab, tmp_path, "resize-verified")

    # And back to the full card: a new plan needs a new confirmation.
    _choose(qtbot, tab, A100, "full")
    assert not tab.progress_view.isVisibleTo(tab)  # Found: the previous outcome stayed above the new plan
    assert "nvidia-smi mig -i 1 -dci" in tab.plan_view.text() and "-mig 0" in tab.plan_view.text()
    assert tab.processes_view.processes == []  # MIG on: the scenario runs nothing
    assert field.text() == "" and not button.isEnabled()
    qtbot.keyClicks(field, "gpu-lab")
    _apply_and_wait(qtbot, tab)
    assert tab.progress_view.outcome.title.text() == "Target verified: GPU 1 is now full"
    assert not sim_store.load().gpu(A100).mig_current
    qtbot.waitUntil(lambda: len(tab.audit_view.records) == 2, timeout=5000)
    assert tab.audit_view.records[0].after == "full"  # newest first
    # Each resize wrote a "started" record before its first change, then its outcome.
    assert [r.outcome for r in AuditLog().read("gpu-lab")] == ["started", TARGET_VERIFIED, "started", TARGET_VERIFIED]


@pytest.mark.slow
def test_a_failed_step_shows_the_verified_rollback(qtbot: Any, tab: ResizeTab, sim_store: SimStateStore,
                                                   tmp_path: Path) -> None:
    with sim_store.update() as state:
        for gpu in state.gpus:
            gpu.set_load(0.0)  # no scenario processes: the GPU is free
        state.gpu(A100).inject_fault(Fault.CREATE_GI_FAILS)
    _choose(qtbot, tab, A100, "3g.40gb")
    assert tab.processes_view.processes == [] and not tab.processes_view.stop_checkbox.isVisibleTo(tab)
    qtbot.keyClicks(tab.confirmation.field, "gpu-lab")
    _apply_and_wait(qtbot, tab)

    outcome = tab.progress_view.outcome
    assert outcome.kind is OutcomeKind.WARNING
    assert outcome.title.text() == "Resize failed \u2014 rolled back to the previous layout (full), verified"
    assert "create GPU instance 3g.40gb" in outcome.detail.text()
    assert "rollback" in tab.progress_view.log.toPlainText()
    assert tab.progress_view.bar.value() == tab.progress_view.bar.maximum()
    assert not sim_store.load().gpu(A100).mig_current  # the host is back on the full card
    qtbot.waitUntil(lambda: len(tab.audit_view.records) == 1, timeout=5000)
    assert tab.audit_view.records[0].outcome == ROLLED_BACK and tab.audit_view.records[0].after == "full"
    qtbot.waitUntil(lambda: tab.refresh_button.isEnabled(), timeout=15000)  # the re-read is done
    _shoot_light_and_dark(tab, tmp_path, "resize-rollback")


def test_provider_plan_masks_credentials_and_needs_the_typed_name(qtbot: Any, tab: ResizeTab) -> None:
    assert tab.picker.provider_row.isVisibleTo(tab)
    tab.picker.instance_edit.setText("p4d.24xlarge")
    qtbot.mouseClick(tab.picker.instance_button, Qt.MouseButton.LeftButton)
    plan = tab.plan_view.text()
    assert "AWS_ACCESS_KEY_ID=*** AWS_SECRET_ACCESS_KEY=*** aws ec2 modify-instance-attribute" in plan
    assert "--instance-id i-0abc123 --instance-type Value=p4d.24xlarge --region eu-west-1" in plan
    assert not tab.confirmation.apply_button.isEnabled()
    qtbot.keyClicks(tab.confirmation.field, "gpu-lab")
    assert tab.confirmation.apply_button.isEnabled()
    assert tab.confirmation.apply_button.text() == "Change instance type to p4d.24xlarge"
    # A hostile value never reaches a command line: it is refused with the reason.
    tab.picker.instance_edit.setText("x; rm -rf /")
    qtbot.mouseClick(tab.picker.instance_button, Qt.MouseButton.LeftButton)
    assert tab.error_banner.isVisibleTo(tab) and "letters, digits" in tab.error_banner.text()
    assert tab.plan_view.text() == "" and not tab.confirmation.apply_button.isEnabled()


def test_an_invalid_custom_layout_is_refused_before_planning(qtbot: Any, tab: ResizeTab) -> None:
    combo = tab.picker.gpu_combo
    combo.setCurrentIndex(combo.findData(A100))
    tab.picker.custom_edit.setText("4g.40gb,4g.40gb")
    qtbot.mouseClick(tab.picker.custom_button, Qt.MouseButton.LeftButton)
    assert tab.picker.custom_error.isVisibleTo(tab)
    assert "at most 1 4g.40gb" in tab.picker.custom_error.text()
    assert tab.preview is None
    tab.picker.custom_edit.setText("4g.40gb, 2g.20gb,1g.10gb")
    qtbot.mouseClick(tab.picker.custom_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tab.preview is not None, timeout=15000)
    assert tab.preview is not None and tab.preview.plan.after.describe() == "4g.40gb,2g.20gb,1g.10gb"
    assert tab.comparison.difference.text() == "\u00b1$0.00/h"


def test_a_plan_made_stale_by_a_change_on_the_host_is_refused(
    qtbot: Any, tab: ResizeTab, sim_store: SimStateStore
) -> None:
    with sim_store.update() as state:
        for gpu in state.gpus:
            gpu.set_load(0.0)
    _choose(qtbot, tab, A100, "3g.40gb")
    assert "-mig 1" in tab.plan_view.text()
    with sim_store.update() as state:  # someone enables MIG on the host meanwhile
        state.gpu(A100).mig_current = state.gpu(A100).mig_pending = True
    qtbot.keyClicks(tab.confirmation.field, "gpu-lab")
    _apply_and_wait(qtbot, tab)
    outcome = tab.progress_view.outcome
    assert outcome.kind is OutcomeKind.WARNING
    assert outcome.title.text() == "Refused: nothing on the host was changed"
    assert "changed since the plan was shown (it is now mig)" in outcome.detail.text()
    assert sim_store.load().gpu(A100).gpu_instances == []  # the stale plan never ran
    qtbot.waitUntil(lambda: tab.picker.gpu_combo.currentText().endswith("now mig"), timeout=15000)


def test_outcome_texts_say_which_state_the_gpu_is_in() -> None:
    full, target = FULL_LAYOUT, Layout(True, ("3g.40gb",))
    plan = Plan(1, full, target)
    failed = ResizeResult(ROLLBACK_FAILED.format(state="mig"), False, full, Layout(True), plan, error="boom",
                          kind=ResizeOutcome.ROLLBACK_FAILED)
    assert outcome_kind(failed.kind) is OutcomeKind.ERROR
    title, detail = mig_outcome_text(failed)
    assert title == "Rollback failed: GPU 1 is now mig" and detail.startswith("Error: boom")
    rolled = ResizeResult(ROLLED_BACK, False, full, full, plan, error="boom", kind=ResizeOutcome.ROLLED_BACK)
    assert outcome_kind(rolled.kind) is OutcomeKind.WARNING
    verified = ResizeResult(TARGET_VERIFIED, True, full, target, plan)
    assert outcome_kind(verified.kind) is OutcomeKind.SUCCESS
    assert mig_outcome_text(verified)[0] == "Target verified: GPU 1 is now 3g.40gb"


def test_price_difference_text() -> None:
    assert price_difference(2.0, 0.857) == "\u2212$1.14/h"
    assert price_difference(0.29, 2.0) == "+$1.71/h"
    assert price_difference(2.0, 2.0) == "\u00b1$0.00/h"
    assert price_difference(None, 2.0) == ""


@pytest.mark.slow
def test_demo_host_in_the_window_full_to_seven_slices_and_back(make_window: Any, qtbot: Any, tmp_path: Path) -> None:
    """`gpuws --demo`: the in-process demo host over SSH, in the main window's Resize tab."""
    window = make_window()
    with qtbot.waitSignal(window.demo_ready, timeout=15000):
        window.open_demo()
    qtbot.waitUntil(lambda: window.sidebar.entry("demo").state == "connected", timeout=20000)
    tab = next(w for w in window.detail.tab_widgets if isinstance(w, ResizeTab))
    qtbot.waitUntil(lambda: bool(tab.gpus), timeout=20000)
    assert not tab.simulated_badge.isHidden()
    prices = [window.sidebar.entry("demo").price]
    for target in ("7x1g.10gb", "full"):
        _choose(qtbot, tab, A100, target)
        if tab.processes_view.processes:  # the demo's notebook kernel, when its scenario runs one
            tab.processes_view.stop_checkbox.setChecked(True)
        qtbot.keyClicks(tab.confirmation.field, "demo")
        _apply_and_wait(qtbot, tab)
        assert tab.progress_view.outcome.title.text() == f"Target verified: GPU 1 is now {target}"
        qtbot.waitUntil(lambda t=target: tab.picker.gpu_combo.currentText().endswith(f"now {t}"), timeout=20000)
        # Found: after a resize to a cheaper layout the sidebar kept the old price.
        prices.append(window.sidebar.entry("demo").price)
        assert prices[-1] != prices[-2]
        rate = window.detail.session_tab.rate_label
        qtbot.waitUntil(lambda p=prices[-1], r=rate: p in r.text(), timeout=5000)  # the cost meter follows too
        session = window.sessions["demo"]
        mig_now = "Enabled" if target != "full" else "Disabled"
        qtbot.waitUntil(lambda s=session, m=mig_now: s.inventory.gpus[1].mig_mode == m, timeout=20000)
        if target != "full":  # how it looks in the window at its default size, mid-way
            window.show()
            window.detail.tabs.setCurrentWidget(tab)
            qtbot.wait(200)  # let the layouts settle before grabbing
            assert window.grab().save(str(tmp_path / "resize-window-demo.png"))
    qtbot.waitUntil(lambda: len(tab.audit_view.records) == 2, timeout=5000)
    qtbot.waitUntil(tab.refresh_button.isEnabled, timeout=15000)  # its last re-read is done


@pytest.mark.slow
def test_interrupted_resize_banner_and_recover_button(
    qtbot: Any, bridge: AsyncBridge, tmp_path: Path, sim_store: SimStateStore
) -> None:
    """A half-done resize (4 of 7 instances, its journal left by a process that is gone) shows a
    banner on connect; Recover completes the target and verifies it; the banner goes."""
    from gpuws.core.resize.journal import JournalEntry, ResizeJournal
    from gpuws.sim.state import GpuInstance

    with sim_store.update() as state:
        gpu = state.gpu(A100)
        gpu.mig_current = gpu.mig_pending = True
        for start in range(4):
            gpu.gpu_instances.append(GpuInstance(7 + start, 19, start, 1))  # no compute instances yet
    ResizeJournal().begin(JournalEntry(host="gpu-lab", gpu=A100, gpu_name="NVIDIA A100-SXM4-80GB", before="full",
                                       target="7x1g.10gb", pid=2**22 + 4321, simulated=True))
    bin_dir = tmp_path / "bin"
    install_sim_nvidia_smi(bin_dir)
    runner = LocalRunner(dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", GPUWS_SIM_STATE=str(sim_store.dir)))
    profile = HostProfile(name="gpu-lab", host="127.0.0.1", user="me", simulated=True)
    session = HostSession(profile, bridge, connection_factory=lambda _p, **_kw: LocalConnection(runner))
    widget = ResizeTab()
    try:
        session.connect_host()
        qtbot.waitUntil(lambda: session.state == "connected", timeout=15000)
        widget.set_host(HostContext(profile, session, bridge))
        qtbot.waitUntil(lambda: widget.interrupted is not None, timeout=15000)
        assert not widget.interrupted_banner.isHidden()
        assert "GPU 1 (full -> 7x1g.10gb" in widget.interrupted_banner._label.text()
        qtbot.mouseClick(widget.recover_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: widget.progress_view.finished and not widget.applying, timeout=60000)
        # The tab reads the GPUs again after the recovery: the verified target shows there.
        qtbot.waitUntil(lambda: widget.interrupted is None and any(
            s.index == A100 and s.layout.describe() == "7x1g.10gb" for s in widget.gpus), timeout=15000)
        assert widget.interrupted_banner.isHidden()
        assert AuditLog().read("gpu-lab")[-1].outcome == "recover: target verified"
        qtbot.waitUntil(lambda: bridge.pending_count == 0, timeout=15000)
    finally:
        widget.set_host(None)
        widget.close()
        widget.deleteLater()
        session.close()
        session.deleteLater()


@pytest.mark.slow
def test_mig_parted_file_offers_its_configs_for_the_selected_gpu(qtbot: Any, tab: ResizeTab) -> None:
    config = str(Path(__file__).resolve().parents[1] / "fixtures" / "mig-parted" / "config-default.yaml")
    combo = tab.picker.gpu_combo
    combo.setCurrentIndex(combo.findData(A100))
    offered: list[str] = []

    def choose(names: list[str]) -> tuple[str, bool]:
        offered.extend(names)
        return "all-balanced", True

    tab.offer_mig_parted_configs(config, choose)
    assert len(offered) == 81
    qtbot.waitUntil(lambda: tab.preview is not None, timeout=15000)
    assert tab.preview is not None and tab.preview.plan.after.describe() == "3g.40gb,2g.20gb,2x1g.10gb"
