"""Run controls (Quick / Full, Start, Cancel), the progress bar and the live log of a run."""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QButtonGroup,
    QHBoxLayout,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpuws.ui.bench.verdict_style import check_name, figure_text
from gpuws.ui.widgets import muted_label

MODES = (("quick", "Quick", "About a minute on a modern GPU"),
         ("full", "Full", "Longer repeats and a longer stress run, up to five minutes"))
MAX_LOG_LINES = 5000


def describe_event(event: Mapping[str, object]) -> str | None:
    """One runner event as a line of the live log (None for events not worth a line)."""
    kind = event.get("type")
    if kind == "progress":
        return f"[{event.get('step')}/{event.get('total')}] {event.get('message') or event.get('check') or ''}"
    if kind == "log":
        level = str(event.get("level") or "info")
        prefix = "" if level == "info" else f"{level}: "
        return f"    {prefix}{event.get('message') or ''}"
    if kind == "result":
        check = str(event.get("check") or "?")
        where = "" if event.get("gpu") is None else f" (GPU {event['gpu']}"
        if where and event.get("peer") is not None:
            where += f" \u2192 {event['peer']}"
        where += ")" if where else ""
        status = event.get("status")
        value = event.get("value")
        if status == "ok" and isinstance(value, (int, float)) and not isinstance(value, bool):
            unit = event.get("unit")
            figure = figure_text(float(value), unit if isinstance(unit, str) else None)
            return f"    {check_name(check)}{where}: {figure}"
        if status == "ok":
            return f"    {check_name(check)}{where}: done"
        return f"    {check_name(check)}{where}: {status} \u2014 {event.get('reason') or 'no reason given'}"
    if kind == "summary":
        duration = event.get("duration_s")
        took = f" in {float(duration):.1f} s" if isinstance(duration, (int, float)) else ""
        return f"runner finished{took}"
    if kind == "fatal":
        return f"could not start: {event.get('reason') or 'unknown reason'}"
    return None


class LiveLog(QPlainTextEdit):
    """The runner's progress, logs and figures as they arrive (read-only, bounded)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(MAX_LOG_LINES)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.setPlaceholderText("The runner's progress appears here while a benchmark runs.")


class RunPanel(QWidget):
    """Mode choice, Start and Cancel, progress; log lines go out through `log_line`."""

    start_requested = Signal(str)  # mode: "quick" or "full"
    cancel_requested = Signal()
    log_cleared = Signal()
    log_line = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.running = False
        self._can_start = False
        self.mode_group = QButtonGroup(self)
        self.mode_buttons: dict[str, QToolButton] = {}
        for i, (mode, label, tip) in enumerate(MODES):
            button = QToolButton(self)
            button.setText(label)
            button.setToolTip(tip)
            button.setCheckable(True)
            button.setChecked(i == 0)
            self.mode_group.addButton(button, i)
            self.mode_buttons[mode] = button
        self.start_button = QPushButton("Start benchmark", self)
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(lambda: self.start_requested.emit(self.mode))
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Stop the run; its processes on the host are stopped and its files removed")
        self.cancel_button.clicked.connect(self._on_cancel)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setTextVisible(True)
        self.progress.setFormat("")
        self.status_label = muted_label("", self)
        self.status_label.setWordWrap(True)

        controls = QHBoxLayout()
        controls.setSpacing(6)
        for button in self.mode_buttons.values():
            controls.addWidget(button)
        controls.addSpacing(10)
        controls.addWidget(self.start_button)
        controls.addWidget(self.cancel_button)
        controls.addSpacing(10)
        controls.addWidget(self.progress, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(controls)
        layout.addWidget(self.status_label)
        self._sync_buttons()

    @property
    def mode(self) -> str:
        return next(mode for mode, button in self.mode_buttons.items() if button.isChecked())

    def set_mode(self, mode: str) -> None:
        self.mode_buttons[mode].setChecked(True)

    def set_can_start(self, can_start: bool, why_not: str = "") -> None:
        """Whether Start is possible now (a connected host, no other run); `why_not` is its tooltip."""
        self._can_start = can_start
        self.start_button.setToolTip("" if can_start else why_not)
        if not self.running:
            self.status_label.setText("" if can_start else why_not)
        self._sync_buttons()

    def begin(self, host: str, mode: str) -> None:
        """A run started: clear the log, show busy progress until the first step arrives."""
        self.running = True
        self.log_cleared.emit()
        self.progress.setRange(0, 0)  # busy until the runner reports its steps
        self.progress.setFormat("")
        self.status_label.setText(f"Sending the {mode} benchmark to {host}\u2026")
        self.append_line(f"{mode} benchmark on {host}")
        self._sync_buttons()

    def add_event(self, event: Mapping[str, object]) -> None:
        """Show one runner event: progress steps move the bar, everything else goes to the log."""
        if event.get("type") == "progress":
            total, step = _int(event.get("total")), _int(event.get("step"))
            if total and step is not None:
                # Step k has started: k - 1 are done. The last step ("done") fills the bar.
                done = step if step >= total else step - 1
                self.progress.setRange(0, total)
                self.progress.setValue(max(0, min(done, total)))
                self.progress.setFormat(f"step {min(step, total)} of {total}")
            message = str(event.get("message") or event.get("check") or "")
            if message and message != "done":
                self.status_label.setText(f"Running: {message}")
        line = describe_event(event)
        if line is not None:
            self.append_line(line)

    def finish(self, message: str, *, completed: bool) -> None:
        """The run ended (completed, failed or cancelled): stop the bar and say how."""
        self.running = False
        if completed:
            self.progress.setRange(0, 1)
            self.progress.setValue(1)
            self.progress.setFormat("done")
        else:
            maximum = max(self.progress.maximum(), 1)
            self.progress.setRange(0, maximum)
            self.progress.setFormat("stopped")
        self.status_label.setText(message)
        self.append_line(message)
        self._sync_buttons()

    def append_line(self, line: str) -> None:
        self.log_line.emit(line)

    def _on_cancel(self) -> None:
        self.cancel_button.setEnabled(False)  # once; the run reports back when it has stopped
        self.status_label.setText("Cancelling: stopping the benchmark on the host\u2026")
        self.cancel_requested.emit()

    def _sync_buttons(self) -> None:
        self.start_button.setEnabled(self._can_start and not self.running)
        self.cancel_button.setEnabled(self.running)
        for button in self.mode_buttons.values():
            button.setEnabled(not self.running)


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
