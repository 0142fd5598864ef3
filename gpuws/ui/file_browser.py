"""A simple remote file browser: list a directory on the host, go in and up, download and upload
files and folders.

All SFTP work runs on the loop thread (`gpuws.app.files`, as `gpuws cp`); its `TransferProgress`
events come back through `AsyncBridge.post`, at most ten times a second, so a fast transfer never
floods the GUI: the bar shows bytes, rate, time left and file N of M. Cancel cancels the transfer's
future; the partial file is resumed by the next transfer of the same file or folder.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gpuws.app.files import (
    CopyOptions,
    CopyPlan,
    RemoteEntry,
    TransferProgress,
    TransferResult,
    copy,
    list_dir,
    make_dir,
    remove,
)
from gpuws.core.simulation import SIM_LABEL
from gpuws.core.terminal import printable
from gpuws.core.transfer import eta_text, rate_text, shown_path
from gpuws.core.transfer import size_text as size_text
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.widgets import Badge, muted_label

if TYPE_CHECKING:
    from gpuws.app.hostio import HostConnection


def entries_text(count: int) -> str:
    """'1 entry', '3 entries', 'Empty folder'."""
    if count == 0:
        return "Empty folder"
    return "1 entry" if count == 1 else f"{count} entries"


def progress_text(event: TransferProgress) -> str:
    """The bar's text: '12.0 MiB of 48.0 MiB · 118 MB/s · 0:01 left · file 2 of 9'."""
    files = f" · file {event.file_index} of {event.file_count}" if event.file_count > 1 else ""
    return (f"{size_text(event.done)} of {size_text(event.total)} · {rate_text(event.rate)} · "
            f"{eta_text(event.eta)} left{files}")


class FileBrowser(QWidget):
    """Browse one host's files over SFTP. `connection` is a connected HostConnection."""

    def __init__(self, connection: HostConnection, bridge: AsyncBridge, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.connection = connection
        self.bridge = bridge
        self.path = "~"
        self.entries: list[RemoteEntry] = []
        self._transfer: concurrent.futures.Future[TransferResult] | None = None
        self._runs = 0  # transfers started; the one cancelled is said "Cancelled" once it has stopped
        self._started: set[int] = set()  # runs whose copy began on the loop (a write may follow)
        self._cancelling: int | None = None
        self._last_progress = 0.0
        self._note = ""  # the last transfer's outcome, kept on the status line after the re-listing
        # Asked before a delete; tests replace it (a real dialog would block them).
        self.confirm: Callable[[str], bool] = self._confirm_dialog
        simulated = bool(getattr(connection.profile, "simulated", False))
        self.setWindowTitle(f"Files on {connection.profile.name}" + (f" ({SIM_LABEL})" if simulated else ""))

        layout = QVBoxLayout(self)
        nav = QHBoxLayout()
        self.up_button = QPushButton("Up", self)
        self.up_button.clicked.connect(self.go_up)
        self.path_edit = QLineEdit(self)
        self.path_edit.setPlaceholderText("path on the host")
        self.path_edit.returnPressed.connect(lambda: self.navigate(self.path_edit.text()))
        self.refresh_button = QPushButton("Refresh", self)
        self.refresh_button.clicked.connect(lambda: self.navigate(self.path))
        self.sim_badge = Badge(SIM_LABEL, parent=self)
        self.sim_badge.setToolTip("The demo host's files are on this computer, in the simulator's folder")
        self.sim_badge.setVisible(simulated)
        nav.addWidget(self.sim_badge)
        nav.addWidget(self.up_button)
        nav.addWidget(self.path_edit, 1)
        nav.addWidget(self.refresh_button)
        layout.addLayout(nav)

        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["Name", "Size", "Modified"])
        self.tree.setRootIsDecorated(False)
        self.tree.setColumnWidth(0, 280)
        self.tree.itemDoubleClicked.connect(self._on_activated)
        layout.addWidget(self.tree, 1)

        actions = QHBoxLayout()
        self.download_button = QPushButton("Download…", self)
        self.download_button.clicked.connect(self.ask_download)
        self.upload_button = QPushButton("Upload…", self)
        self.upload_button.clicked.connect(self.ask_upload)
        self.upload_folder_button = QPushButton("Upload folder…", self)
        self.upload_folder_button.clicked.connect(self.ask_upload_folder)
        self.progress = QProgressBar(self)
        self.progress.setVisible(False)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.mkdir_button = QPushButton("New folder…", self)
        self.mkdir_button.clicked.connect(self.ask_make_dir)
        self.delete_button = QPushButton("Delete…", self)
        self.delete_button.clicked.connect(self.ask_delete)
        actions.addWidget(self.download_button)
        actions.addWidget(self.upload_button)
        actions.addWidget(self.upload_folder_button)
        actions.addWidget(self.mkdir_button)
        actions.addWidget(self.delete_button)
        actions.addWidget(self.progress, 1)
        actions.addWidget(self.cancel_button)
        layout.addLayout(actions)
        self.status = muted_label("", self)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # names from the host are plain text
        layout.addWidget(self.status)
        delete = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.tree)
        delete.activated.connect(self.ask_delete)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Qt: Escape closes the window unless a transfer runs."""
        # Escape closes the window (it is a top-level tool window), unless a transfer runs.
        if event.key() == Qt.Key.Key_Escape and self._transfer is None:
            self.close()
            return
        super().keyPressEvent(event)

    # -- listing --------------------------------------------------------------------------------

    def navigate(self, path: str) -> None:
        """List the remote folder `path` (off the GUI thread) and show it."""
        self.status.setText(f"Listing {path}…")
        self.bridge.run_async(list_dir(self.connection, path), self._on_listed, self._on_error)

    def go_up(self) -> None:
        """Show the parent folder."""
        if self.path not in ("/", "~"):
            self.navigate(self.path.rstrip("/").rsplit("/", 1)[0] or "/")

    def _on_listed(self, result: tuple[str, list[RemoteEntry]]) -> None:
        self.path, self.entries = result
        self.path_edit.setText(self.path)
        self.tree.clear()
        for entry in self.entries:
            modified = datetime.fromtimestamp(entry.mtime).strftime("%Y-%m-%d %H:%M") if entry.mtime else ""
            item = QTreeWidgetItem([entry.name + ("/" if entry.is_dir else ""),
                                    "" if entry.is_dir else size_text(entry.size), modified])
            item.setData(0, Qt.ItemDataRole.UserRole, entry.path)
            item.setTextAlignment(1, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.tree.addTopLevelItem(item)
        note, self._note = self._note, ""
        self.status.setText(entries_text(len(self.entries)) + (f" · {note}" if note else ""))

    def _on_activated(self, item: QTreeWidgetItem, _column: int) -> None:
        entry = self._entry(item)
        if entry is not None and entry.is_dir:
            self.navigate(entry.path)

    def _entry(self, item: QTreeWidgetItem | None) -> RemoteEntry | None:
        if item is None:
            return None
        path = item.data(0, Qt.ItemDataRole.UserRole)
        return next((e for e in self.entries if e.path == path), None)

    def _on_error(self, exc: BaseException) -> None:
        self._end_transfer()
        self.status.setText(str(exc))

    # -- new folder, delete ---------------------------------------------------------------------

    def ask_make_dir(self) -> None:
        """Ask for a name and create that folder here."""
        name, ok = QInputDialog.getText(self, "New folder", f"Name of the new folder in {self.path}:")
        if ok and name.strip():
            self.make_dir(name)

    def make_dir(self, name: str) -> concurrent.futures.Future[str]:
        """Create folder `name` in the folder shown; the listing follows."""
        self.status.setText(f"Creating {name}…")
        return self.bridge.run_async(make_dir(self.connection, self.path, name), self._after_change, self._on_error)

    def ask_delete(self) -> None:
        """Delete the selected file or folder, after asking."""
        entry = self._entry(self.tree.currentItem())
        if entry is None:
            self.status.setText("Select a file or folder to delete.")
            return
        what = f"the folder {entry.name} and everything in it" if entry.is_dir else entry.name
        if self.confirm(f"Delete {what} on {self.connection.profile.name}? This cannot be undone."):
            self.delete(entry)

    def delete(self, entry: RemoteEntry) -> concurrent.futures.Future[None]:
        """Delete `entry` on the host; the listing follows."""
        self.status.setText(f"Deleting {entry.name}…")
        return self.bridge.run_async(remove(self.connection, entry.path, is_dir=entry.is_dir),
                                     self._after_change, self._on_error)

    def _after_change(self, _result: object) -> None:
        self.navigate(self.path)

    def _confirm_dialog(self, question: str) -> bool:
        answer = QMessageBox.question(self, "Delete", question,
                                      QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                                      QMessageBox.StandardButton.Cancel)
        return answer == QMessageBox.StandardButton.Yes

    # -- transfers ------------------------------------------------------------------------------

    def ask_download(self) -> None:
        """Ask where to save the selected file or folder, then download it."""
        entry = self._entry(self.tree.currentItem())
        if entry is None:
            self.status.setText("Select a file or folder to download.")
            return
        if entry.is_dir:
            target = QFileDialog.getExistingDirectory(self, "Download the folder into", str(Path.home()))
        else:
            target, _ = QFileDialog.getSaveFileName(self, "Download to", str(Path.home() / entry.name))
        if target:
            self.start_download(entry.path, Path(target))

    def ask_upload(self) -> None:
        """Ask for a local file, then upload it into the folder shown."""
        source, _ = QFileDialog.getOpenFileName(self, "Upload a file", str(Path.home()))
        if source:
            self.start_upload(Path(source))

    def ask_upload_folder(self) -> None:
        """Ask for a local folder, then upload it (with everything in it) into the folder shown."""
        source = QFileDialog.getExistingDirectory(self, "Upload a folder", str(Path.home()))
        if source:
            self.start_upload(Path(source))

    def start_download(self, remote: str, local: Path) -> concurrent.futures.Future[TransferResult]:
        """Download the file or folder `remote` to `local` (into it, if a folder), with progress and Cancel."""
        plan = CopyPlan(self.connection.profile.name, (remote,), str(local), to_host=False)
        return self._start(copy(self.connection, plan, progress=self._progress_from_loop,
                                options=CopyOptions(recursive=True)), f"Downloading {printable(remote)}")

    def start_upload(self, local: Path) -> concurrent.futures.Future[TransferResult]:
        """Upload the file or folder `local` into the folder shown, with progress and Cancel."""
        plan = CopyPlan(self.connection.profile.name, (str(local),), self.path.rstrip("/") + "/", to_host=True)
        return self._start(copy(self.connection, plan, progress=self._progress_from_loop,
                                options=CopyOptions(recursive=True)), f"Uploading {printable(local.name)}")

    def cancel(self) -> None:
        """Cancel the running transfer; "Cancelled" (and the buttons back) once it has stopped."""
        if self._transfer is None:
            return
        self._transfer.cancel()
        self._transfer = None
        if self._runs not in self._started:  # never began on the loop: nothing was or will be written
            self._say_cancelled()
            return
        # A streamed download writes as its bytes arrive, until the copy's task has run its
        # cancellation: a copy started again before that would resume from a size still growing.
        self._cancelling = self._runs
        self.cancel_button.setVisible(False)
        self.status.setText("Cancelling…")

    def _stopped(self, run: int) -> None:
        """On the GUI thread, once run `run`'s copy has ended on the loop (however it ended)."""
        self._started.discard(run)
        if run == self._cancelling:
            self._say_cancelled()

    def _say_cancelled(self) -> None:
        """The cancelled copy has stopped: the buttons back, and where the next copy resumes."""
        self._cancelling = None
        self._end_transfer()
        self.status.setText("Cancelled; the next copy of this file continues where it stopped.")

    def _start(self, coro: Coroutine[object, None, TransferResult], text: str
               ) -> concurrent.futures.Future[TransferResult]:
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setFormat("%p%")
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self.download_button.setEnabled(False)
        self.upload_button.setEnabled(False)
        self.upload_folder_button.setEnabled(False)
        self.status.setText(text + "…")
        self._runs += 1
        run = self._runs

        async def copying() -> TransferResult:
            """The copy, then `_stopped` posted to the GUI thread however it ended."""
            self._started.add(run)  # set.add is atomic: read by cancel() on the GUI thread
            try:
                return await coro
            finally:
                self.bridge.post(lambda: self._stopped(run), owner=self)

        self._transfer = self.bridge.run_async(copying(), self._on_done, self._on_error)
        return self._transfer

    def _progress_from_loop(self, event: TransferProgress) -> None:
        # Called on the loop thread: throttle, then hop to the GUI thread.
        now = time.monotonic()
        if now - self._last_progress < 0.1 and event.done < event.total:
            return
        self._last_progress = now
        self.bridge.post(lambda: self._show_progress(event))

    def _show_progress(self, event: TransferProgress) -> None:
        if self._transfer is not None:
            self.progress.setValue(int(1000 * event.fraction))
            self.progress.setFormat(progress_text(event))

    def _on_done(self, result: TransferResult) -> None:
        self._end_transfer()
        resumed = f" (resumed at {size_text(result.resumed_from)})" if result.resumed_from else ""
        files = f" ({result.files} files)" if result.files != 1 or result.dirs else ""
        self._note = f"Copied {size_text(result.size)}{files} to {result.destination}{resumed}"
        if result.failed:
            path, why = result.failed[0]
            more = f" and {len(result.failed) - 1} more" if len(result.failed) > 1 else ""
            self._note += f"; not copied: {shown_path(path, 80)}: {why}{more}"
        self.status.setText(self._note)
        self.navigate(self.path)

    def _end_transfer(self) -> None:
        self._transfer = None
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)
        self.download_button.setEnabled(True)
        self.upload_button.setEnabled(True)
        self.upload_folder_button.setEnabled(True)
