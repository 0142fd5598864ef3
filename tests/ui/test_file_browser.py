"""The file browser through a real sshd: list a directory, upload with a progress bar, download back."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from gpuws.remote.connection import HostConnection
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.file_browser import FileBrowser
from tests.remote.helpers import key_profile
from tests.support.sshd import SshdServer

pytestmark = [pytest.mark.gui, pytest.mark.sshd]


def test_upload_shows_progress_and_download_brings_the_same_bytes_back(
    sshd: SshdServer, bridge: AsyncBridge, qtbot: Any, tmp_path: Path
) -> None:
    remote_dir = tmp_path / "on-host"  # the sshd host is this machine: a directory of the test's own
    remote_dir.mkdir()
    (remote_dir / "existing.txt").write_text("hello")
    payload = os.urandom(6 * 1024 * 1024)
    source = tmp_path / "weights.bin"
    source.write_bytes(payload)

    conn = HostConnection(key_profile(sshd), known_host_key=sshd.host_public_key)
    bridge.run_async(conn.connect()).result(15)
    browser = FileBrowser(conn, bridge)
    qtbot.addWidget(browser)
    try:
        browser.navigate(str(remote_dir))
        qtbot.waitUntil(lambda: browser.tree.topLevelItemCount() == 1, timeout=10_000)
        assert browser.tree.topLevelItem(0).text(0) == "existing.txt"

        shown: list[int] = []
        browser.progress.valueChanged.connect(shown.append)
        browser.start_upload(source)
        assert browser.progress.isVisible() or browser.progress.isVisibleTo(browser)
        qtbot.waitUntil(lambda: "Copied 6.0 MiB" in browser.status.text(), timeout=30_000)
        assert (remote_dir / "weights.bin").read_bytes() == payload
        assert shown and shown == sorted(shown) and max(shown) == 1000  # the bar only moves forward, to the end
        assert not browser.progress.isVisibleTo(browser)
        qtbot.waitUntil(lambda: browser.tree.topLevelItemCount() == 2, timeout=10_000)

        back = tmp_path / "back.bin"
        browser.start_download(str(remote_dir / "weights.bin"), back)
        qtbot.waitUntil(lambda: f"to {back}" in browser.status.text(), timeout=30_000)
        assert back.read_bytes() == payload
    finally:
        browser.close()
        bridge.run_async(conn.close()).result(10)


def test_new_folder_delete_one_entry_and_escape(
    sshd: SshdServer, bridge: AsyncBridge, qtbot: Any, tmp_path: Path
) -> None:
    """Found: no delete/mkdir, "1 entries", Escape ignored."""
    from PySide6.QtCore import Qt

    remote_dir = tmp_path / "on-host"
    remote_dir.mkdir()
    (remote_dir / "only.txt").write_text("x")
    conn = HostConnection(key_profile(sshd), known_host_key=sshd.host_public_key)
    bridge.run_async(conn.connect()).result(15)
    browser = FileBrowser(conn, bridge)
    qtbot.addWidget(browser)
    try:
        assert not browser.sim_badge.isVisibleTo(browser) and "SIMULATED" not in browser.windowTitle()
        browser.navigate(str(remote_dir))
        qtbot.waitUntil(lambda: browser.status.text() == "1 entry", timeout=10_000)
        browser.make_dir("runs")
        qtbot.waitUntil(lambda: browser.status.text() == "2 entries", timeout=10_000)
        assert (remote_dir / "runs").is_dir()
        (remote_dir / "runs" / "inside.log").write_text("y")
        asked: list[str] = []
        browser.confirm = lambda q: asked.append(q) is None and False  # the user says Cancel
        browser.tree.setCurrentItem(browser.tree.topLevelItem(0))  # "runs/" (folders first)
        browser.ask_delete()
        assert asked and "runs" in asked[0] and (remote_dir / "runs").exists()
        browser.confirm = lambda q: True
        browser.ask_delete()
        qtbot.waitUntil(lambda: browser.status.text() == "1 entry", timeout=10_000)
        assert not (remote_dir / "runs").exists()
        browser.make_dir("a/b")
        qtbot.waitUntil(lambda: "not a usable name" in browser.status.text(), timeout=10_000)
        browser.show()
        qtbot.waitExposed(browser)
        qtbot.keyClick(browser, Qt.Key.Key_Escape)
        assert not browser.isVisible()
    finally:
        browser.close()
        bridge.run_async(conn.close()).result(10)


def test_the_demo_hosts_files_are_labelled_simulated(bridge: AsyncBridge, qtbot: Any) -> None:
    """Found: the Files window is not labelled SIMULATED on the demo."""
    from gpuws.core.models import HostProfile

    conn = HostConnection(HostProfile(name="demo", host="127.0.0.1", simulated=True))
    browser = FileBrowser(conn, bridge)
    qtbot.addWidget(browser)
    assert browser.sim_badge.isVisibleTo(browser) and "SIMULATED" in browser.windowTitle()


def test_progress_shows_rate_time_left_and_file_n_of_m_and_cancel_leaves_a_resumable_file(
    sshd: SshdServer, bridge: AsyncBridge, qtbot: Any, tmp_path: Path
) -> None:
    """Found: no progress beyond a bar, no folders; Cancel must leave a partial file the next copy continues."""
    import threading

    from gpuws.core.transfer import TransferProgress
    from gpuws.ui.file_browser import progress_text

    event = TransferProgress("a.bin", 2, 9, 10, 20, 12 * 1024 * 1024, 48 * 1024 * 1024, 1.0, 118e6, 65.0)
    assert progress_text(event) == "12.0 MiB of 48.0 MiB · 118 MB/s · 1:05 left · file 2 of 9"

    remote_dir = tmp_path / "on-host"
    (remote_dir / "run").mkdir(parents=True)
    payload = os.urandom(48 * 1024 * 1024)
    (remote_dir / "run" / "big.bin").write_bytes(payload)
    for i in range(3):
        (remote_dir / "run" / f"small{i}.txt").write_text(str(i))
    conn = HostConnection(key_profile(sshd), known_host_key=sshd.host_public_key)
    bridge.run_async(conn.connect()).result(15)
    browser = FileBrowser(conn, bridge)
    qtbot.addWidget(browser)
    here = tmp_path / "here"
    here.mkdir()
    try:
        # Cancel from the GUI once a quarter is in place; the loop thread waits for the GUI to have
        # cancelled, so the copy cannot finish first.
        original = browser._progress_from_loop
        cancelled = threading.Event()

        def cancel_at_a_quarter(event: TransferProgress) -> None:
            original(event)
            if event.done >= event.total // 4 and not cancelled.is_set():
                browser.bridge.post(lambda: (browser.cancel(), cancelled.set()))
                cancelled.wait(10)

        browser._progress_from_loop = cancel_at_a_quarter  # type: ignore[method-assign]
        future = browser.start_download(str(remote_dir / "run"), here)
        qtbot.waitUntil(lambda: "Cancelled" in browser.status.text(), timeout=30_000)
        partial = (here / "run" / "big.bin").stat().st_size
        # "Cancelled" means stopped: a streamed download wrote on as its bytes kept arriving, after the
        # window had said so and given the buttons back (found by CI: the partial file still grew).
        for _ in range(3):
            bridge.run_async(asyncio.sleep(0.05)).result(10)  # the loop has run whatever was pending
        assert (here / "run" / "big.bin").stat().st_size == partial
        assert browser.download_button.isEnabled()
        qtbot.waitUntil(future.done, timeout=10_000)
        assert 0 < partial < len(payload)
        assert (here / "run" / "big.bin").read_bytes() == payload[:partial]

        browser._progress_from_loop = original  # type: ignore[method-assign]
        shown: list[str] = []
        browser.progress.valueChanged.connect(lambda _v: shown.append(browser.progress.format()))
        browser.start_download(str(remote_dir / "run"), here)
        qtbot.waitUntil(lambda: "resumed at" in browser.status.text(), timeout=30_000)
        assert (here / "run" / "big.bin").read_bytes() == payload
        assert sorted(p.name for p in (here / "run").iterdir()) == ["big.bin", "small0.txt", "small1.txt",
                                                                     "small2.txt"]
        shown = [text for text in shown if text != "%p%"]  # the bar's own text before the first report
        assert shown and all(" left · file " in text and " of 4" in text for text in shown)
    finally:
        browser.close()
        bridge.run_async(conn.close()).result(10)
