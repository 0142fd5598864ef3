"""The banner for problems in the user's own profile files (profiles.toml, fleets.toml): the
same lines `gpuws hosts list` writes on stderr (file:line: key: message), with "Open file".

gpuws never moves or rewrites these files because of a hand edit, so the window says what is
wrong, where, and takes the user to the file; it goes away once the file is fixed.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QUrl, Signal
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget

from gpuws.ui.external import open_in_browser
from gpuws.ui.widgets import Banner, BannerKind

MAX_LINES = 3  # more would push the window past a 600 px screen (#35); the CLI lists them all


class FileProblemsBanner(QWidget):
    """Warnings about the profile files, one line each, and an "Open file" button."""

    open_requested = Signal(str)  # the path "Open file" opens

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.banner = Banner(BannerKind.WARNING, "", self)
        self.open_button = QPushButton("Open file", self)
        self.open_button.setToolTip("Open the file in the desktop's editor for it")
        self.open_button.clicked.connect(self._open)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 4)
        layout.addWidget(self.banner, 1)
        layout.addWidget(self.open_button)
        self._path: Path | None = None
        self.hide()

    @property
    def path(self) -> Path | None:
        """The file "Open file" opens (the first one with problems)."""
        return self._path

    def show_problems(self, problems: dict[Path, list[str]]) -> None:
        """Show the lines of every file that has any; hide when none has."""
        files = {path: lines for path, lines in problems.items() if lines}
        if not files:
            self._path = None
            self.hide()
            return
        self._path = next(iter(files))
        lines = [line for file_lines in files.values() for line in file_lines]
        shown = lines[:MAX_LINES] + ([f"… and {len(lines) - MAX_LINES} more (`gpuws hosts list` shows all)"]
                                     if len(lines) > MAX_LINES else [])
        names = " and ".join(path.name for path in files)
        self.banner.set_text(f"{names}: gpuws left your edits as they are; fix these and the hosts come back:\n"
                             + "\n".join(shown))
        self.show()

    def _open(self) -> None:
        if self._path is None:
            return
        self.open_requested.emit(str(self._path))
        if not open_in_browser(QUrl.fromLocalFile(str(self._path)).toString()):
            self.open_button.setToolTip(f"No program to open it here; the file is {self._path}")
