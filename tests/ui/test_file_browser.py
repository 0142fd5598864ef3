"""The file browser through a real sshd: list a directory, upload with a progress bar, download back."""

from __future__ import annotations

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
