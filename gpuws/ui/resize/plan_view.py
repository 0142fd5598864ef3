"""The exact plan as commands: monospace, selectable, copyable as a shell script."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication, QTextOption
from PySide6.QtWidgets import QPlainTextEdit, QPushButton, QWidget

from gpuws.core.resize.plan import Plan
from gpuws.core.resize.provider import ProviderPlan
from gpuws.ui.resize.common import Section, monospace_font
from gpuws.ui.widgets import Badge, muted_label

MAX_VISIBLE_LINES = 22


def mig_plan_script(plan: Plan) -> str:
    """The plan as a commented script: '# 1. what it does  [destructive]' then the command."""
    if plan.empty:
        return f"# GPU {plan.gpu_index} is already {plan.after.describe()}: nothing to run."
    lines = [f"# GPU {plan.gpu_index}: {plan.before.describe()} -> {plan.after.describe()}"]
    for number, step in enumerate(plan.steps, start=1):
        flags = "  [destructive]" if step.destructive else ""
        lines += [f"# {number}. {step.description}{flags}", step.command]
    return "\n".join(lines)


def provider_plan_script(plan: ProviderPlan) -> str:
    """Provider commands with credentials shown as NAME=*** (never their values)."""
    lines = [f"# change the instance type to {plan.instance_type} via {plan.kind} (run here, not on the host)"]
    for number, command in enumerate(plan.commands, start=1):
        lines += [f"# {number}. {command.action}  [destructive]", command.display(plan.env_names)]
    return "\n".join(lines)


class PlanView(Section):
    """Header with the step count and a DESTRUCTIVE badge, the commands, and a Copy button."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Plan", parent)
        self.summary = muted_label("", self)
        self.destructive_badge = Badge("DESTRUCTIVE", "error", self)
        self.destructive_badge.hide()
        self.copy_button = QPushButton("Copy commands", self)
        self.copy_button.clicked.connect(self.copy)
        self.title_row.insertWidget(1, self.destructive_badge)
        self.title_row.addWidget(self.summary)
        self.title_row.addWidget(self.copy_button)
        self.commands = QPlainTextEdit(self)
        self.commands.setReadOnly(True)
        self.commands.setFont(monospace_font())
        self.commands.setWordWrapMode(QTextOption.WrapMode.NoWrap)
        self.body.addWidget(self.commands)
        self.destructive = False

    def show_mig_plan(self, plan: Plan) -> None:
        """Show the commands of a MIG plan and how many are destructive."""
        destructive_steps = sum(1 for s in plan.steps if s.destructive)
        summary = "nothing to do" if plan.empty else (
            f"{len(plan.steps)} commands" + (f", {destructive_steps} destructive" if destructive_steps else ""))
        self._show(mig_plan_script(plan), summary, plan.destructive)

    def show_provider_plan(self, plan: ProviderPlan) -> None:
        """Show the provider commands (the instance stops)."""
        self._show(provider_plan_script(plan), f"{len(plan.commands)} provider commands; the instance stops", True)

    def clear(self) -> None:
        """Show no plan."""
        self.destructive = False
        self.commands.clear()
        self.summary.setText("")
        self.destructive_badge.hide()

    def text(self) -> str:
        """The commands shown, as text."""
        return self.commands.toPlainText()

    def copy(self) -> None:
        """Copy the commands to the clipboard."""
        clipboard = QGuiApplication.clipboard()
        if clipboard is not None:
            clipboard.setText(self.text())

    def _show(self, script: str, summary: str, destructive: bool) -> None:
        self.destructive = destructive
        self.commands.setPlainText(script)
        self.summary.setText(summary)
        self.destructive_badge.setVisible(destructive)
        # Tall enough for the whole plan up to a limit: the commands are the point of this card.
        lines = min(script.count("\n") + 1, MAX_VISIBLE_LINES)
        margin = 2 * int(self.commands.document().documentMargin()) + 8
        self.commands.setFixedHeight(lines * self.commands.fontMetrics().lineSpacing() + margin)
