"""Import hosts from ~/.ssh/config: a preview with a checkbox per host, and what was skipped and why."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gpuws.core.errors import GpuwsError
from gpuws.core.models import HostProfile
from gpuws.ui.widgets import Banner, BannerKind, heading, muted_label


class ImportSshConfigDialog(QDialog):
    """Shows what `import_ssh_config(path)` found. Hosts whose name is already taken start unchecked."""

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        path: Path | None = None,
        existing_names: Iterable[str] = (),
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Import from SSH config")
        self.setMinimumSize(560, 380)
        self._taken = set(existing_names)
        self.profiles: list[HostProfile] = []
        self.skipped: list[tuple[str, str]] = []
        self.error: str | None = None

        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        self._layout = layout
        self.source_label = muted_label("")
        layout.addWidget(heading("Hosts found", 1.1, self))
        layout.addWidget(self.source_label)

        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["Name", "Host", "User", "Port", "Jump", "Note"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        layout.addWidget(self.tree, 1)

        self.skipped_title = heading("Skipped", 1.0, self)
        self.skipped_list = QTreeWidget(self)
        self.skipped_list.setHeaderLabels(["Entry", "Reason"])
        self.skipped_list.setRootIsDecorated(False)
        self.skipped_list.setMaximumHeight(120)
        layout.addWidget(self.skipped_title)
        layout.addWidget(self.skipped_list)

        self.error_banner = Banner(BannerKind.ERROR, "", self)
        self.error_banner.hide()
        layout.addWidget(self.error_banner)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.import_button = self.buttons.addButton("Import selected", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self.tree.itemChanged.connect(lambda *_: self._update_button())
        self._load(path)

    def selected_profiles(self) -> list[HostProfile]:
        """The checked hosts, in the order shown."""
        chosen = []
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item is not None and item.checkState(0) == Qt.CheckState.Checked:
                chosen.append(self.profiles[i])
        return chosen

    def _load(self, path: Path | None) -> None:
        from gpuws.core.sshconfig import import_ssh_config

        shown = path or Path("~/.ssh/config")
        self.source_label.setText(f"From {shown}")
        try:
            result = import_ssh_config(path)
        except (GpuwsError, OSError) as exc:
            self.error = str(exc)
            self.error_banner.set_text(f"Could not read {shown}: {exc}")
            self.error_banner.show()
            self._update_button()
            return
        self.profiles = list(result.profiles)
        # What gpuws does not follow for an imported host (Match exec, LocalCommand) is listed too.
        self.skipped = list(result.skipped) + [(host, f"imported; {note}") for host, note in result.notes]
        self.tree.blockSignals(True)
        for p in self.profiles:
            clash = p.name in self._taken
            item = QTreeWidgetItem(
                [p.name, p.host, p.user or "", str(p.port), p.jump or "", "already exists" if clash else ""]
            )
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(0, Qt.CheckState.Unchecked if clash else Qt.CheckState.Checked)
            if clash:
                item.setToolTip(0, "A host with this name exists; it would not be overwritten.")
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled)
            self.tree.addTopLevelItem(item)
        self.tree.blockSignals(False)
        for col in range(self.tree.columnCount()):
            self.tree.resizeColumnToContents(col)
        for entry, reason in self.skipped:
            self.skipped_list.addTopLevelItem(QTreeWidgetItem([entry, reason]))
        self.skipped_list.resizeColumnToContents(0)
        has_skipped = bool(self.skipped)
        self.skipped_title.setVisible(has_skipped)
        self.skipped_list.setVisible(has_skipped)
        if not self.profiles:
            self.tree.hide()
            self._layout.insertWidget(2, QLabel("No importable hosts were found."))
        self._update_button()

    def _update_button(self) -> None:
        count = len(self.selected_profiles()) if self.profiles else 0
        self.import_button.setEnabled(count > 0)
        self.import_button.setText(f"Import {count} host{'s' if count != 1 else ''}")
