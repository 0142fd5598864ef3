"""One tunnel opener (#23): the window's Session tab opens a TensorBoard tunnel the way
`gpuws tunnel --preset tensorboard` does, starting TensorBoard on the host when none runs.

Found: only the CLI started TensorBoard; the tab opened a tunnel to nothing ("nothing is
listening"). The host is a real sshd; its `tensorboard` is a stand-in on the host's PATH that
serves a page on the port it is given (the real one is not installed here).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.session import SessionLedger
from gpuws.core.tunnels import Preset
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.tabs import HostContext
from gpuws.ui.tabs.session import SessionTab
from tests.support.sshd import SshdServer, free_port
from tests.ui.test_session_tab import FakeSession, Opened, _workspace

pytestmark = [pytest.mark.gui, pytest.mark.sshd, pytest.mark.slow]


def _fake_tensorboard(bin_dir: Path, logs: Path) -> Path:
    """`tensorboard --logdir=D --host=H --port=P`: serves `logs` on P and writes its pid."""
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "index.html").write_text("TensorBoard stand-in")
    pid_file = logs / "pid"
    script = bin_dir / "tensorboard"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in --port=*) port="${a#--port=}";; esac; done\n'
        f'echo $$ > "{pid_file}"\n'
        f'exec "{sys.executable}" -m http.server "$port" --bind 127.0.0.1 --directory "{logs}"\n'
    )
    script.chmod(0o755)
    return pid_file


def test_the_tab_starts_tensorboard_when_none_runs(qtbot: Any, bridge: AsyncBridge, sshd: SshdServer,
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuws.remote.connection import HostConnection

    pid_file = _fake_tensorboard(tmp_path / "simhost" / "bin", tmp_path / "tb")
    opened = Opened()
    monkeypatch.setattr("gpuws.ui.external.open_in_browser", opened.open)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    profile = HostProfile(name="rig", host="127.0.0.1", port=sshd.port, user=sshd.user, auth=AuthMethod.KEY,
                          key_path=str(sshd.client_key))
    conn = HostConnection(profile, known_host_key=sshd.host_public_key)
    bridge.run_async(conn.connect()).result(15)
    workspace = _workspace(bridge, SessionLedger(tmp_path / "open.json"))
    tab = SessionTab(workspace=workspace)
    qtbot.addWidget(tab)
    try:
        tab.set_host(HostContext(profile, FakeSession(profile, conn), bridge))  # type: ignore[arg-type]
        tab.preset_combo.setCurrentIndex(tab.preset_combo.findData(Preset.TENSORBOARD.value))
        tab.remote_spin.setValue(free_port())  # nothing listens there yet
        tab.local_spin.setValue(free_port())
        tab.open_tunnel()
        qtbot.waitUntil(lambda: tab.tunnel_table.rowCount() == 1, timeout=90_000)
        (tunnel,) = workspace.host("rig").tunnels  # type: ignore[union-attr]
        assert not tunnel.last_error, tunnel.last_error
        assert opened.urls == [tunnel.url]
        with urllib.request.urlopen(tunnel.url, timeout=10) as response:
            assert response.read() == b"TensorBoard stand-in"
        bridge.run_async(tunnel.close()).result(10)
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        bridge.run_async(conn.close()).result(10)
        workspace.close()
