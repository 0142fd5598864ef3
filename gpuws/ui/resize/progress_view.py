"""Applying: a progress bar, the step log, and the outcome shown prominently and honestly.

Progress reports arrive on the asyncio loop thread; `ProgressRelay` re-emits them as a queued Qt
signal so that only the GUI thread touches the widgets.
"""

from __future__ import annotations

from enum import StrEnum

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QPaintEvent
from PySide6.QtWidgets import QFrame, QLabel, QPlainTextEdit, QProgressBar, QVBoxLayout, QWidget

from gpuws.app.resize import Progress, ResizeOutcome
from gpuws.ui import theme
from gpuws.ui.resize.common import Section, monospace_font, success_colour
from gpuws.ui.widgets import heading, paint_accent_panel

PHASE_TITLES = {
    "preflight": "Checking the GPU",
    "apply": "Applying the plan",
    "verify": "Verifying",
    "rollback": "Rolling back to the previous layout",
}


class ProgressRelay(QObject):
    """Carries `Progress` reports from the loop thread to the GUI thread."""

    received = Signal(object)

    def report(self, progress: Progress) -> None:
        """Call from any thread: only emits (the connected slot runs on the GUI thread)."""
        self.received.emit(progress)


class OutcomeKind(StrEnum):
    """How an outcome reads (its colour): success, information, warning or error."""

    SUCCESS = "success"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class OutcomeBanner(QFrame):
    """The result in large type on a tinted panel: green verified, amber rolled back, red failed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind = OutcomeKind.INFO
        self.title = heading("", 1.3, self)
        self.title.setWordWrap(True)
        self.detail = QLabel("", self)
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.TextFormat.PlainText)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 12, 14, 12)
        layout.setSpacing(4)
        layout.addWidget(self.title)
        layout.addWidget(self.detail)

    def show_outcome(self, kind: OutcomeKind, title: str, detail: str = "") -> None:
        """Show the outcome's title and detail in its kind's colour."""
        self.kind = kind
        self.title.setText(title)
        self.detail.setText(detail)
        self.detail.setVisible(bool(detail))
        self.show()
        self.update()

    def accent(self) -> QColor:
        """The colour of the outcome's kind in the current palette."""
        pal = self.palette()
        return {
            OutcomeKind.SUCCESS: success_colour,
            OutcomeKind.WARNING: theme.warning_colour,
            OutcomeKind.ERROR: theme.error_colour,
        }.get(self.kind, lambda p: p.color(p.ColorRole.Highlight))(pal)

    def paintEvent(self, event: QPaintEvent) -> None:
        """Qt: draw the tinted panel with the accent bar."""
        paint_accent_panel(self, self.accent(), border=1.5, tint=0.84, bar=6.0)


def outcome_kind(outcome: ResizeOutcome) -> OutcomeKind:
    """Verified target: success; restored previous layout: warning; anything else failed: error."""
    return {
        ResizeOutcome.VERIFIED: OutcomeKind.SUCCESS,
        ResizeOutcome.ALREADY_AT_TARGET: OutcomeKind.INFO,
        ResizeOutcome.ROLLED_BACK: OutcomeKind.WARNING,
    }.get(outcome, OutcomeKind.ERROR)


class ProgressView(Section):
    """Phase caption, progress bar, step log (monospace), and the outcome banner under them."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Progress", parent)
        self.phase = QLabel("", self)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 1)
        self.bar.setValue(0)
        self.bar.setTextVisible(True)
        self.log = QPlainTextEdit(self)
        self.log.setReadOnly(True)
        self.log.setFont(monospace_font(0.92))
        self.log.setMaximumBlockCount(2000)
        self.log.setFixedHeight(150)
        self.outcome = OutcomeBanner(self)
        self.outcome.hide()
        for widget in (self.outcome, self.phase, self.bar, self.log):
            self.body.addWidget(widget)
        self.finished = False

    def start(self, total: int, first_line: str) -> None:
        """Start a new progress log of `total` steps with `first_line`."""
        self.finished = False
        self.outcome.hide()
        self.log.clear()
        self.bar.setRange(0, max(total, 1))
        self.bar.setValue(0)
        self.phase.setText(PHASE_TITLES["preflight"])
        self.append(first_line)

    def on_progress(self, progress: Progress) -> None:
        """Slot for ProgressRelay.received (GUI thread)."""
        if self.finished:
            return
        self.phase.setText(PHASE_TITLES.get(progress.phase, progress.phase))
        if progress.total:
            if self.bar.maximum() != progress.total:
                self.bar.setRange(0, progress.total)  # the rollback plan has its own length
            self.bar.setValue(progress.done)
        count = f"{progress.done}/{progress.total} " if progress.total else ""
        self.append(f"{progress.phase:<9} {count}{progress.message}")

    def append(self, line: str) -> None:
        """Add a line to the log."""
        self.log.appendPlainText(line)

    def finish(self, kind: OutcomeKind, title: str, detail: str = "") -> None:
        """Stop following progress and show the outcome; the bar fills when the host was verified."""
        self.finished = True
        if kind in (OutcomeKind.SUCCESS, OutcomeKind.INFO, OutcomeKind.WARNING):
            self.bar.setValue(self.bar.maximum())
        self.phase.setText({
            OutcomeKind.SUCCESS: "Done", OutcomeKind.INFO: "Done",
            OutcomeKind.WARNING: "Rolled back", OutcomeKind.ERROR: "Stopped",
        }[kind])
        self.append(f"=> {title}")
        self.outcome.show_outcome(kind, title, detail)

