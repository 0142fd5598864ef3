"""The connection flow in the window against a real OpenSSH sshd: host keys, states, inventory."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication

from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.paths import known_hosts_path
from gpuws.core.profiles import ProfileStore
from gpuws.ui.formatting import TIMES
from gpuws.ui.hostkey_dialog import HostKeyDialog

pytestmark = [
    pytest.mark.gui,
    pytest.mark.sshd,
    # tests/support/sshd.py leaves its log handle open (reported to the lead); ignore only that.
    pytest.mark.filterwarnings("ignore:unclosed file <_io.BufferedWriter name='[^']*sshd.log'>:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <_io.FileIO name='[^']*sshd.log'.*:pytest.PytestUnraisableExceptionWarning"
    ),
]


@pytest.fixture(autouse=True)
def isolated_home(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(isolated_home))  # ~/.ssh/known_hosts is the test's own
    return isolated_home


def _profile(sshd: Any) -> HostProfile:
    return HostProfile(name="gpu1", host="127.0.0.1", port=sshd.port, user=sshd.user, auth=AuthMethod.KEY,
                       key_path=str(sshd.client_key))  # fmt: skip


def _fingerprint(public_key: Path) -> str:
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(public_key)],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return out.split()[1]


def _open_dialogs() -> list[HostKeyDialog]:
    return [w for w in QApplication.topLevelWidgets() if isinstance(w, HostKeyDialog) and w.isVisible()]


def test_unknown_key_asks_then_connects_and_shows_inventory(sshd: Any, make_window: Any, qtbot: Any) -> None:
    ProfileStore().add(_profile(sshd))
    window = make_window()
    window.reconnect_current()
    qtbot.waitUntil(lambda: bool(_open_dialogs()), timeout=15000)
    assert window.sidebar.entry("gpu1").state == "host_key_unknown"
    dialog = _open_dialogs()[0]
    assert dialog.fingerprint_label.text() == _fingerprint(Path(f"{sshd.host_key}.pub"))
    dialog.remember_button.click()
    qtbot.waitUntil(lambda: window.sidebar.entry("gpu1").state == "connected", timeout=20000)
    session = window.sessions["gpu1"]
    assert session.inventory is not None and session.inventory.gpus
    assert session.inventory.simulated  # the emulator behind sshd labels itself
    assert TIMES in window.sidebar.entry("gpu1").summary
    overview = window.detail.tab_widgets[0]
    assert len(overview.gpu_cards) == len(session.inventory.gpus)
    assert overview.simulated_banner.isVisibleTo(window)
    kind, blob = sshd.host_public_key.split()[:2]
    assert f"{kind} {blob}" in known_hosts_path().read_text()  # remembered


def test_changed_key_is_refused_with_both_fingerprints(
    sshd: Any, make_window: Any, qtbot: Any, isolated_home: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kind, blob = Path(f"{other}.pub").read_text().split()[:2]
    known = isolated_home / ".ssh" / "known_hosts"
    known.write_text(f"# comment\n[127.0.0.1]:{sshd.port} {kind} {blob}\n")
    ProfileStore().add(_profile(sshd))
    window = make_window()
    window.reconnect_current()
    qtbot.waitUntil(lambda: window.sidebar.entry("gpu1").state == "host_key_changed", timeout=15000)
    panel = window.detail.key_changed_panel
    assert panel.isVisibleTo(window)
    assert _fingerprint(Path(f"{other}.pub")) in panel.text()
    assert _fingerprint(Path(f"{sshd.host_key}.pub")) in panel.text()
    assert f"{known}:2" in panel.text()
    assert not _open_dialogs()  # a changed key is never offered for acceptance
    assert window.sessions["gpu1"].inventory is None
