"""The typed confirmation: for a destructive plan, Apply is enabled only once the host name is typed."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QWidget

from gpuws.ui import theme
from gpuws.ui.resize.common import DangerButton, Section, set_text_colour
from gpuws.ui.widgets import muted_label


class TypedConfirmation(Section):
    """'Type HOST to confirm', the field, the Apply button, and why Apply is disabled when it is.

    The owner sets `expected` (the host name), calls `set_plan(...)` with what the plan needs and
    `set_blocked(reason)`; `apply_requested()` fires on Apply.
    """

    apply_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Confirm and apply", parent)
        self.expected = ""
        self.destructive = False
        self.has_plan = False
        self._blocked_reason = ""
        self.prompt = QLabel("", self)
        self.prompt.setWordWrap(True)
        self.prompt.setTextFormat(Qt.TextFormat.PlainText)
        self.field = QLineEdit(self)
        self.field.setClearButtonEnabled(True)
        self.field.textChanged.connect(lambda _t: self._update())
        self.field.returnPressed.connect(self._on_return)
        self.apply_button = DangerButton("Apply", self)
        self.apply_button.clicked.connect(self._on_apply)
        self.reason = muted_label("", self)
        self.reason.setWordWrap(True)
        row = QHBoxLayout()
        row.setSpacing(10)
        row.addWidget(self.field, 1)
        row.addWidget(self.apply_button)
        self.body.addWidget(self.prompt)
        self.body.addLayout(row)
        self.body.addWidget(self.reason)
        self.set_plan(has_plan=False, destructive=False, action="Apply")

    def set_plan(self, *, has_plan: bool, destructive: bool, action: str) -> None:
        """A new plan: clear what was typed (a confirmation never carries over to another plan)."""
        self.has_plan, self.destructive = has_plan, destructive
        self.apply_button.setText(action)
        self.field.clear()
        self.field.setVisible(destructive)
        self.field.setPlaceholderText(self.expected)
        if destructive:
            self.prompt.setText(
                f"This plan has destructive steps (marked in the plan). "
                f"Type the host name \u201c{self.expected}\u201d to confirm."
            )
            set_text_colour(self.prompt, theme.error_colour(self.palette()))
        else:
            self.prompt.setText("This plan only adds instances; nothing running is destroyed."
                                if has_plan else "Choose a target to see its plan.")
            set_text_colour(self.prompt, self.palette().color(self.palette().ColorRole.WindowText))
        self._update()

    def set_blocked(self, reason: str) -> None:
        """Disable Apply for a reason outside this card ('' when nothing else blocks it)."""
        self._blocked_reason = reason
        self._update()

    @property
    def confirmed(self) -> bool:
        return not self.destructive or (bool(self.expected) and self.field.text() == self.expected)

    def _update(self) -> None:
        if not self.has_plan:
            reason = "Nothing to apply."
        elif self._blocked_reason:
            reason = self._blocked_reason
        elif not self.confirmed:
            reason = "Type the host name exactly to enable the button."
        else:
            reason = ""
        self.apply_button.setEnabled(not reason)
        self.reason.setText(reason)
        self.reason.setVisible(bool(reason))

    def _on_return(self) -> None:
        if self.apply_button.isEnabled():
            self._on_apply()

    def _on_apply(self) -> None:
        if self.apply_button.isEnabled():
            self.apply_requested.emit()
