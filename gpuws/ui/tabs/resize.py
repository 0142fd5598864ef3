"""The Resize tab: change a GPU's MIG layout (or the instance type) with a plan you confirm first.

A wizard in one page: pick the GPU and a target (left), then read current vs target with the
price difference, the exact commands, what will be stopped, type the host name to confirm, and
watch the progress and the verified outcome; the host's resize history sits underneath.

All remote work runs on the loop thread through `context.bridge`; progress reports come back
through `ProgressRelay`'s queued signal. Results of an older request (another host, GPU or
target chosen meanwhile) are recognised by a generation number and dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, TypeVar

import shiboken6
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from gpuws.app.cloud import InstanceResized
from gpuws.app.resize import ResizeOutcome, ResizeRefused, ResizeResult
from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.core.resize.audit import AuditLog
from gpuws.core.resize.journal import JournalEntry
from gpuws.core.resize.layout import Layout, LayoutError
from gpuws.core.resize.pricing import PriceBook, price_book
from gpuws.core.resize.provider import ProviderPlan, plan_provider_resize
from gpuws.core.resize.state import GpuMigState
from gpuws.core.simulation import SIM_LABEL
from gpuws.ui.resize import operations
from gpuws.ui.resize.audit_view import AuditView
from gpuws.ui.resize.cloud_view import cloud_family, cloud_figures, cloud_hint, cloud_price_source
from gpuws.ui.resize.comparison import ComparisonCard
from gpuws.ui.resize.confirm import TypedConfirmation
from gpuws.ui.resize.operations import LayoutRun, MigApplied, MigPreview, PlanChanged
from gpuws.ui.resize.options import layout_figures
from gpuws.ui.resize.plan_view import PlanView
from gpuws.ui.resize.processes_view import ProcessesView
from gpuws.ui.resize.progress_view import OutcomeKind, ProgressRelay, ProgressView, outcome_kind
from gpuws.ui.resize.target_picker import TargetPicker
from gpuws.ui.tabs import HostContext
from gpuws.ui.widgets import Badge, Banner, BannerKind, heading, muted_label

if TYPE_CHECKING:
    from gpuws.app.workspace import Workspace
    from gpuws.core.runner import CommandRunner

T = TypeVar("T")
PICKER_WIDTH = 380


class _Column(QWidget):
    """The scrolling column of cards. QScrollArea ignores height-for-width (wrapped labels), so
    the column asks its layout how tall it must be at its current width and keeps that minimum."""

    def event(self, event: QEvent) -> bool:
        """Qt: keep the minimum height the wrapped column needs at its width."""
        if event.type() in (QEvent.Type.LayoutRequest, QEvent.Type.Resize):
            layout = self.layout()
            if layout is not None and layout.hasHeightForWidth():
                needed = layout.heightForWidth(self.width())
                if needed > 0 and needed != self.minimumHeight():
                    self.setMinimumHeight(needed)
        return super().event(event)


class ResizeTab(QWidget):
    """Change the GPU slice (MIG layouts, or the instance type) with a plan you confirm first.

    Interface: `ResizeTab(parent=None, *, audit_log=None)`, `set_host(context | None)`.
    `price_changed(profile)` fires after a verified resize changed the host's hourly price (the
    profile object is updated in place); the window refreshes the sidebar and the cost meter.
    """

    price_changed = Signal(object)

    def __init__(self, parent: QWidget | None = None, *, audit_log: AuditLog | None = None) -> None:
        super().__init__(parent)
        self.context: HostContext | None = None
        self._own_workspace: Workspace | None = None  # only for a tab shown without the window's hub
        self._audit_log = audit_log
        self.gpus: list[GpuMigState] = []
        self.prices: PriceBook | None = None
        self.preview: MigPreview | None = None
        self.provider_plan: ProviderPlan | None = None
        self.applying = False
        self._applying_on: str | None = None  # the host a running resize belongs to
        self._generation = 0  # bumped whenever what is shown changes; stale callbacks are dropped
        self._wanted: tuple[int, str] | None = None  # (GPU, target) to open once the GPUs are read

        self.relay = ProgressRelay(self)
        self._build()
        self.relay.received.connect(self.progress_view.on_progress, Qt.ConnectionType.QueuedConnection)
        self._show_message("Select a host on the left.")

    # -- construction ---------------------------------------------------------------------------

    def _build(self) -> None:
        self.title = heading("Resize", 1.3, self)
        self.simulated_badge = Badge(SIM_LABEL, "simulated", self)
        self.simulated_badge.hide()
        self.refresh_button = QPushButton("Refresh", self)
        self.refresh_button.setToolTip("Read the GPUs' layouts again")
        self.refresh_button.clicked.connect(self.reload)
        header = QHBoxLayout()
        header.setSpacing(10)
        header.addWidget(self.title)
        header.addWidget(self.simulated_badge)
        self.mig_parted_button = QPushButton("mig-parted config…", self)
        self.mig_parted_button.setToolTip("Open an NVIDIA mig-parted config file and pick one of its named configs "
                                          "for the selected GPU")
        self.mig_parted_button.clicked.connect(self.open_mig_parted_file)
        header.addStretch(1)
        header.addWidget(self.mig_parted_button)
        header.addWidget(self.refresh_button)

        self.error_banner = Banner(BannerKind.ERROR, "", self)
        self.error_banner.hide()
        # A resize of this host that did not finish (its journal remains): say so, offer recovery.
        self.interrupted: JournalEntry | None = None
        self.interrupted_banner = Banner(BannerKind.WARNING, "", self)
        self.recover_button = QPushButton("Recover", self.interrupted_banner)
        self.recover_button.setToolTip("Complete the interrupted resize's target, or restore the previous layout "
                                       "if that fails; then verify")
        self.recover_button.clicked.connect(self.recover)
        banner_layout = self.interrupted_banner.layout()
        assert banner_layout is not None
        banner_layout.addWidget(self.recover_button)
        self.interrupted_banner.hide()

        self.picker = TargetPicker(self)
        self.picker.setMinimumWidth(230)  # the window fits 900 px (issue 16)
        self.picker.gpu_changed.connect(self._on_gpu_changed)
        self.picker.target_chosen.connect(self._on_target_chosen)
        self.picker.instance_type_chosen.connect(self._on_instance_type_chosen)

        column = _Column()
        self.comparison = ComparisonCard(column)
        self.plan_view = PlanView(column)
        self.processes_view = ProcessesView(column)
        self.processes_view.changed.connect(self._update_blocked)
        self.confirmation = TypedConfirmation(column)
        self.confirmation.apply_requested.connect(self.apply)
        self.progress_view = ProgressView(column)
        self.progress_view.hide()
        self.audit_view = AuditView(column)
        column_layout = QVBoxLayout(column)
        column_layout.setContentsMargins(0, 0, 10, 12)  # right: clear of the scroll bar
        column_layout.setSpacing(14)
        for widget in (self.progress_view, self.comparison, self.plan_view, self.processes_view,
                       self.confirmation, self.audit_view):
            column_layout.addWidget(widget)
        column_layout.addStretch(1)
        self.wizard_cards: list[QWidget] = [self.comparison, self.plan_view, self.processes_view, self.confirmation]

        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QScrollArea.Shape.NoFrame)
        self.scroll_area.setWidget(column)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        splitter.addWidget(self.picker)
        splitter.addWidget(self.scroll_area)
        splitter.setStretchFactor(1, 1)
        self.scroll_area.setMinimumWidth(330)
        splitter.setSizes([PICKER_WIDTH, 700])

        self.message = muted_label("", self)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setWordWrap(True)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.message)
        self.stack.addWidget(splitter)

        outer = QVBoxLayout(self)
        outer.setContentsMargins(20, 14, 20, 8)
        outer.setSpacing(10)
        outer.addLayout(header)
        outer.addWidget(self.error_banner)
        outer.addWidget(self.interrupted_banner)
        outer.addWidget(self.stack, 1)

    # -- host -------------------------------------------------------------------------------------

    def set_host(self, context: HostContext | None) -> None:
        """Show `context`'s host (None: no host selected) and read its GPUs."""
        if self.context is not None:
            self.context.session.state_changed.disconnect(self._on_session_state)
        self.context = context
        self._generation += 1
        self.gpus, self.preview, self.provider_plan = [], None, None
        self.progress_view.hide()
        self.error_banner.hide()
        self.simulated_badge.setVisible(bool(context and context.profile.simulated))
        if context is None:
            self._show_message("Select a host on the left.")
            return
        context.session.state_changed.connect(self._on_session_state)
        self.confirmation.expected = context.profile.name
        self.picker.set_provider(context.profile.provider.kind)
        self.audit_view.show_records([])
        self.reload()

    @property
    def audit_log(self) -> AuditLog:
        """The resize history to read and append to."""
        # Made on use: its default path follows GPUWS_CONFIG_DIR at the time of use.
        return self._audit_log or AuditLog()

    def _runner(self) -> CommandRunner | None:
        connection = self.context.session.connection if self.context else None
        return None if connection is None else connection.runner

    def reload(self) -> None:
        """Read every GPU's layout again (and the history); keeps the chosen GPU."""
        if self.context is None or self.applying:
            return
        # A cloud host: its instance-type family from the catalog and its profile (no host read).
        family = cloud_family(self.context.profile)
        self.picker.set_cloud_family(family)
        runner = self._runner()
        if runner is None and family is not None:
            # Not connected (a stopped instance, say): its instance type can change all the same.
            self.gpus = []
            self.picker.set_gpus([])
            self.stack.setCurrentIndex(1)
            self._run(operations.interrupted_resize(self.audit_log, self.context.profile.name),
                      self._on_interrupted, lambda exc: None)
            self.reload_audit()
            return
        if runner is None:
            self._show_message(self._not_connected_text())
            return
        if not self.gpus:
            self._show_message("Reading the GPUs' MIG layouts…")
        self.refresh_button.setEnabled(False)
        self._run(operations.read_gpus(runner), self._on_gpus, self._on_read_failed)
        self._run(operations.interrupted_resize(self.audit_log, self.context.profile.name),
                  self._on_interrupted, lambda exc: None)
        self.reload_audit()

    def reload_audit(self) -> None:
        """Read the host's resize history again."""
        if self.context is not None:
            self._run(operations.read_audit(self.audit_log, self.context.profile.name),
                      self.audit_view.show_records, lambda exc: None, keep_generation=True)

    def _on_session_state(self, state: str, _detail: str) -> None:
        if self.applying:
            return  # the apply's own result says what happened
        if state == "connected":
            self.reload()  # (re)connected and probed: read the layouts afresh
        else:
            self._generation += 1
            self.gpus = []
            self._show_message(self._not_connected_text())

    def _on_interrupted(self, entry: JournalEntry | None) -> None:
        self.interrupted = entry
        if entry is None:
            self.interrupted_banner.hide()
            return
        self.interrupted_banner.set_text(f"Warning: {entry.summary()}.")
        self.interrupted_banner.show()

    def recover(self) -> None:
        """Finish the interrupted resize (the Recover button of the banner)."""
        entry, runner = self.interrupted, self._runner()
        # An instance type change is recovered through the provider: the host may be stopped.
        if (entry is None or self.context is None or self.applying
                or (runner is None and entry.backend != "provider")):
            return
        self._applying_on = self.context.profile.name
        self._set_applying(True)
        self.interrupted_banner.hide()
        self.progress_view.show()
        name = self.context.profile.name
        # Through the Workspace verbs, as `gpuws resize --recover` (one door: the window and the
        # CLI cannot drift); the verbs end in `Workspace.layout_changed`.
        if entry.backend == "provider":
            self.progress_view.start(0, f"recovering the instance type change {entry.before} -> {entry.target}")
            self._run(self._workspace().recover_instance(name, entry, audit=self.audit_log,
                                                         progress=self.relay.report),
                      self._on_applied, self._on_apply_failed, keep_generation=True)
            return
        self.progress_view.start(0, f"recovering GPU {entry.gpu}: {entry.before} -> {entry.target}")
        self._run(self._workspace().recover(name, entry, audit=self.audit_log, progress=self.relay.report,
                                            runner=runner),
                  self._on_applied, self._on_apply_failed, keep_generation=True)

    def open_mig_parted_file(self) -> None:
        """Pick a mig-parted file and one of its named configs; plan it for the selected GPU."""
        from PySide6.QtWidgets import QFileDialog, QInputDialog

        path, _ = QFileDialog.getOpenFileName(self, "Open a mig-parted config", "", "YAML (*.yaml *.yml);;All (*)")
        if path:
            self.offer_mig_parted_configs(path, lambda names: QInputDialog.getItem(
                self, "mig-parted config", "Named config:", names, 0, False))

    def offer_mig_parted_configs(self, path: str, choose: Callable[[list[str]], tuple[str, bool]]) -> None:
        """Offer the named configs of `path` (through `choose`) and plan the chosen one."""
        runner, state = self._runner(), self.selected_state()
        if runner is None or state is None:
            return
        try:
            names = operations.mig_parted_config_names(path)
        except GpuwsError as exc:
            self._show_error(exc)
            return
        config, ok = choose(names)
        if not ok or not config:
            return

        def planned(layout: Layout | None) -> None:
            """Plan the layout the config gives this GPU, or say that it gives none."""
            if layout is None:
                self._show_error(GpuwsError(f"no entry of {config!r} selects GPU {state.index}; it stays as it is"))
            else:
                self.error_banner.hide()
                self._on_target_chosen(layout.describe())

        self._run(operations.mig_parted_target(runner, path, config, state.index), planned, self._show_error)

    def _not_connected_text(self) -> str:
        return "Not connected. Connect to this host (Ctrl+R) to see its GPUs' layouts and resize them."

    def _show_message(self, text: str) -> None:
        self.message.setText(text)
        self.stack.setCurrentIndex(0)

    # -- GPUs and targets -------------------------------------------------------------------------

    def _on_gpus(self, gpus: list[GpuMigState]) -> None:
        self.refresh_button.setEnabled(True)
        self.error_banner.hide()
        self.gpus = gpus
        if not gpus:
            self._show_message("The driver reports no GPUs on this host.")
            return
        self.stack.setCurrentIndex(1)
        self.picker.set_gpus(gpus, select=self.picker.current_gpu())
        if self._wanted is not None:
            self.show_target(*self._wanted)

    def show_target(self, gpu: int, target: str) -> None:
        """Open the wizard on GPU `gpu` with `target` chosen (the advice strip's "Resize to this…")."""
        self._wanted = (gpu, target)
        if self.applying or gpu not in {s.index for s in self.gpus}:
            return  # applied when the GPUs have been read (see _on_gpus)
        self._wanted = None
        self.picker.set_gpus(self.gpus, select=gpu)
        self.picker.select_target(target)

    def _on_read_failed(self, exc: BaseException) -> None:
        self.refresh_button.setEnabled(True)
        self._show_message("The GPUs' layouts could not be read.")
        self._show_error(exc)

    def selected_state(self) -> GpuMigState | None:
        """The GPU chosen in the picker, as last read."""
        index = self.picker.current_gpu()
        return next((s for s in self.gpus if s.index == index), None)

    def _on_gpu_changed(self, index: int) -> None:
        state = self.selected_state()
        if state is None or self.context is None:
            return
        self.prices = price_book(self.context.profile, state.model, len(self.gpus))
        self.picker.show_targets(state, self.prices)
        self._clear_plan()
        now = layout_figures(state.layout, state.model, self.prices)
        title = state.layout.describe() if state.mig_capable else "full card"
        self.comparison.show_change((title, now), ("—", None), after_hint="Choose a target on the left.",
                                    price_source=self.prices.source)

    def _clear_plan(self) -> None:
        self._generation += 1
        self.preview, self.provider_plan = None, None
        self.plan_view.clear()
        self.processes_view.show_processes(None, [], [])
        self.confirmation.set_plan(has_plan=False, destructive=False, action="Apply")
        self._show_plan_cards(plan=False, apply=False)
        self.error_banner.hide()

    def _show_plan_cards(self, *, plan: bool, apply: bool) -> None:
        """The plan card once there is a plan; what-will-be-stopped and confirm only when there is work."""
        self.plan_view.setVisible(plan)
        self.processes_view.setVisible(apply)
        self.confirmation.setVisible(apply)

    def _on_target_chosen(self, target: str) -> None:
        runner, state = self._runner(), self.selected_state()
        if runner is None or state is None:
            return
        self._clear_plan()
        self.progress_view.hide()  # a new plan: the last resize's outcome no longer sits above it
        self.plan_view.summary.setText("planning…")
        self.plan_view.show()
        self._run(operations.preview_mig(runner, state.index, target), self._on_preview, self._on_preview_failed)

    def _on_preview(self, preview: MigPreview) -> None:
        assert self.prices is not None
        self.preview = preview
        plan, model = preview.plan, preview.model
        self.comparison.show_change(
            (plan.before.describe(), layout_figures(plan.before, model, self.prices)),
            (plan.after.describe(), layout_figures(plan.after, model, self.prices)),
            price_source=self.prices.source,
        )
        self.plan_view.show_mig_plan(plan)
        self.processes_view.show_processes(plan.gpu_index, preview.processes, preview.blockers)
        action = f"Resize GPU {plan.gpu_index} to {plan.after.describe()}"
        self.confirmation.set_plan(has_plan=not plan.empty, destructive=plan.destructive, action=action)
        self._show_plan_cards(plan=True, apply=not plan.empty)
        self._update_blocked()

    def _on_preview_failed(self, exc: BaseException) -> None:
        self.plan_view.summary.setText("")
        self._show_error(exc)

    def _on_instance_type_chosen(self, instance_type: str) -> None:
        if self.context is None:
            return
        self._clear_plan()
        self.progress_view.hide()
        profile = self.context.profile
        try:
            plan = plan_provider_resize(profile.provider, instance_type)
        except GpuwsError as exc:
            self._show_error(exc)
            return
        self.provider_plan = plan
        before = profile.slice_profile or "current instance type"
        family = self.picker.cloud
        target = family.option(plan.instance_type) if family is not None else None
        if family is not None and target is not None:
            # The price change is shown here, above the typed confirmation.
            now = family.current
            self.comparison.show_change(
                (family.current_type, cloud_figures(now, family.now_price_per_hour) if now else None),
                (plan.instance_type, cloud_figures(target, target.price_per_hour)),
                after_hint=cloud_hint(target), price_source=cloud_price_source(family, target),
            )
        else:
            self.comparison.show_change((before, None), (plan.instance_type, None))
        self.plan_view.show_provider_plan(plan)
        self.processes_view.show_processes(None, [], [])
        self.processes_view.message.setText("The whole instance stops and starts again: every process on it ends.")
        self.confirmation.set_plan(has_plan=True, destructive=True,
                                   action=f"Change instance type to {plan.instance_type}")
        self._show_plan_cards(plan=True, apply=True)
        self._update_blocked()

    def _update_blocked(self) -> None:
        if self.applying:
            reason = "A resize is running."
        elif self.preview is not None and self.processes_view.blocking:
            reason = (f"GPU {self.preview.plan.gpu_index} is in use: tick \u201cStop these processes\u201d, "
                      "or stop them on the host and choose the target again.")
        else:
            reason = ""
        self.confirmation.set_blocked(reason)

    # -- applying ---------------------------------------------------------------------------------

    def apply(self) -> None:
        """Run the confirmed plan (called by the Apply button once it is enabled)."""
        if self.applying or self.context is None or not self.confirmation.confirmed:
            return
        profile = self.context.profile
        workspace = self._workspace()
        if self.preview is not None and not self.preview.plan.empty:
            runner = self._runner()
            if runner is None:
                self._show_error(GpuwsError("not connected to the host"))
                return
            plan = self.preview.plan
            coro: Coroutine[object, None, MigApplied | InstanceResized] = workspace.resize(
                profile.name, plan, stop_processes=self.processes_view.stop_requested,
                progress=self.relay.report, audit=self.audit_log, via="window", runner=runner,
            )
            total, first = len(plan.steps), f"resizing GPU {plan.gpu_index}: {plan.summary()}"
        elif self.provider_plan is not None:
            provider_plan = self.provider_plan
            coro = workspace.resize_instance(profile.name, f"type:{provider_plan.instance_type}",
                                             progress=self.relay.report, audit=self.audit_log, via="window")
            total, first = len(provider_plan.commands), f"changing the instance type to {provider_plan.instance_type}"
        else:
            return
        self._applying_on = profile.name
        self._set_applying(True)
        self.progress_view.show()
        self.progress_view.start(total, first)
        self.scroll_area.ensureWidgetVisible(self.progress_view)
        self._run(coro, self._on_applied, self._on_apply_failed, keep_generation=True)

    def _set_applying(self, applying: bool) -> None:
        self.applying = applying
        self.picker.set_busy(applying)
        self.refresh_button.setEnabled(not applying)
        self.processes_view.stop_checkbox.setEnabled(not applying)
        self.confirmation.field.setEnabled(not applying)
        self._update_blocked()

    def _finished_elsewhere(self) -> bool:
        """True when the user switched hosts while the resize ran (its outcome is in the history)."""
        here = self.context.profile.name if self.context else None
        if here == self._applying_on:
            return False
        self._set_applying(False)
        self.reload()
        return True

    def _workspace(self) -> Workspace:
        """The window's Workspace (the one door to a layout or instance change); a tab shown on its
        own (no hub) keeps one of its own for its host."""
        assert self.context is not None
        if self.context.hub is not None:
            return self.context.hub.workspace
        from gpuws.app.workspace import Workspace

        bridge = self.context.bridge
        if self._own_workspace is None:
            self._own_workspace = Workspace(lambda coro: bridge.run_async(coro), post=lambda f: bridge.post(f),
                                            stream=False)
        self._own_workspace.add_host(self.context.profile)
        return self._own_workspace

    def _on_applied(self, done: MigApplied | LayoutRun | InstanceResized) -> None:
        # The Workspace verb ended in `layout_changed` (price to every view, a re-probe); the tab's
        # own profile, the sidebar and this tab's reading follow here.
        context = self.context
        if context is not None and done.profile.name == context.profile.name:
            self._follow_new_price(done.profile)
            if context.hub is None:
                context.session.reprobe()
        if self._finished_elsewhere():
            return
        self._set_applying(False)
        if isinstance(done, MigApplied):
            kind = outcome_kind(done.result.kind)
            title, detail = mig_outcome_text(done.result)
        elif isinstance(done, LayoutRun):
            kind = outcome_kind(done.kind)
            title, detail = recover_outcome_text(done)
        else:
            kind = outcome_kind(done.kind)
            title, detail = provider_outcome_text(done)
        self.progress_view.finish(kind, title, detail)
        self._after_apply()

    def _layout_hook(self) -> Callable[[HostProfile], None]:
        """The after-verify step's hook (called on the loop thread): on the GUI thread, the host's
        price and slice follow the saved profile, and a re-probe refreshes the inventory, which
        restarts the telemetry stream on the new devices (the Workspace does that)."""
        assert self.context is not None
        context = self.context

        def changed(after: HostProfile) -> None:
            """Follow the new profile on the GUI thread (called on the loop thread)."""
            def follow() -> None:
                """Price, slice and inventory follow the verified layout."""
                if self.context is context:
                    self._follow_new_price(after)
                context.session.reprobe()  # Overview and Telemetry show the verified layout now

            context.bridge.post(follow, owner=self)

        return changed

    def _follow_new_price(self, after: HostProfile) -> None:
        """The host's price and slice are what the resize service computed (and saved): the
        sidebar and cost meter follow them at once, without a second computation or save."""
        if self.context is None or after.name != self.context.profile.name:
            return
        profile = self.context.profile
        if (after.price_per_hour, after.slice_profile, after.slice_prices) == (
            profile.price_per_hour, profile.slice_profile, profile.slice_prices
        ):
            return
        profile.price_per_hour, profile.slice_profile = after.price_per_hour, after.slice_profile
        profile.slice_prices = dict(after.slice_prices)
        self.price_changed.emit(profile)

    def _on_apply_failed(self, exc: BaseException) -> None:
        if self._finished_elsewhere():
            return
        self._set_applying(False)
        message = str(exc) if isinstance(exc, GpuwsError) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, ResizeRefused | PlanChanged | LayoutError):
            self.progress_view.finish(OutcomeKind.WARNING, "Refused: nothing on the host was changed", message)
        else:
            self.progress_view.finish(
                OutcomeKind.ERROR, "The resize stopped: the GPU's state is not known",
                f"{message}. Reconnect and check the layout (Refresh) before using the GPU.",
            )
        self._after_apply()

    def _after_apply(self) -> None:
        """The plan shown is spent: read the GPUs and the history again."""
        self._clear_plan()
        self.reload()

    # -- helpers ----------------------------------------------------------------------------------

    def _run(
        self,
        coro: Coroutine[object, None, T],
        on_success: Callable[[T], None],
        on_failure: Callable[[BaseException], None],
        *,
        keep_generation: bool = False,
    ) -> None:
        """Run `coro` on the loop thread; drop its result if the tab moved on meanwhile."""
        assert self.context is not None
        generation = self._generation

        def current() -> bool:
            """Whether the result is still wanted (same request, tab alive)."""
            # The tab may be gone by the time a slow read returns (window closed): then drop it.
            return shiboken6.isValid(self) and (keep_generation or generation == self._generation)

        self.context.bridge.run_async(
            coro,
            lambda value: on_success(value) if current() else None,
            lambda exc: on_failure(exc) if current() else None,
        )

    def _show_error(self, exc: BaseException) -> None:
        text = str(exc) if isinstance(exc, GpuwsError) else f"{type(exc).__name__}: {exc}"
        self.error_banner.set_text(text)
        self.error_banner.show()


def mig_outcome_text(result: ResizeResult) -> tuple[str, str]:
    """(title, detail) for the outcome banner: which state the GPU is in, in words."""
    gpu = result.plan.gpu_index
    after = result.after.describe() if result.after else "unknown"
    notes = list(result.warnings)
    if result.stopped_processes:
        notes.append("stopped pid(s) " + ", ".join(map(str, result.stopped_processes)))
    if result.kind is ResizeOutcome.VERIFIED:
        return (f"Target verified: GPU {gpu} is now {after}",
                "\n".join(["Read back with nvidia-smi mig -lgi / -lci and nvidia-smi -L.", *notes]))
    if result.kind is ResizeOutcome.ALREADY_AT_TARGET:
        return f"GPU {gpu} is already {after}: nothing was changed", ""
    error = f"Error: {result.error}" if result.error else ""
    if result.kind is ResizeOutcome.ROLLED_BACK:
        return (f"Resize failed \u2014 rolled back to the previous layout ({result.before.describe()}), verified",
                "\n".join([error, *notes]).strip())
    return (f"Rollback failed: GPU {gpu} is now {after}",
            "\n".join([error, "Check the GPU (nvidia-smi mig -lgi) before using it.", *notes]).strip())


def recover_outcome_text(run: LayoutRun) -> tuple[str, str]:
    """Title and detail of a finished recovery: its first GPU's text, then the others and what is left."""
    results = list(run.results.values())
    title, detail = mig_outcome_text(results[0])
    others = [f"GPU {index}: {r.outcome}" for index, r in list(run.results.items())[1:]]
    left = [f"GPU {p.gpu} \u2192 {p.target}" for p in run.remaining]
    extra = "; ".join(others) + (f"; not done: {', '.join(left)}" if left else "")
    return title, f"{detail}\n{extra}".strip() if extra else detail


def provider_outcome_text(result: InstanceResized) -> tuple[str, str]:
    """(title, detail) for the outcome banner after an instance-type change."""
    notes = [*result.warnings, *([f"Error: {result.error}"] if result.error else [])]
    if result.address_after and result.address_after != result.address_before:
        notes.insert(0, f"The address changed: {result.address_before} -> {result.address_after} (saved).")
    if result.gpu_seen:
        notes.insert(0, f"GPU seen: {result.gpu_seen}")
    if result.kind is ResizeOutcome.VERIFIED:
        return f"Instance type changed to {result.target}; the GPU matches it", "\n".join(notes)
    if result.kind is ResizeOutcome.ALREADY_AT_TARGET:
        return f"The instance already runs as {result.target}", "\n".join(notes)
    if result.kind is ResizeOutcome.ROLLED_BACK:
        return f"Instance type change failed \u2014 restarted with the previous type {result.before}", "\n".join(notes)
    return f"Provider change failed: {result.outcome}", "\n".join(notes)
