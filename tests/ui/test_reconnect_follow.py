"""Everything follows a reconnect: the window against a real sshd, Ctrl+R and a restarted sshd.

Before the fix, Host → Reconnect left the telemetry task streaming over the closed connection
(the hub thought the host was still watched), so no sample ever arrived again.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.paths import known_hosts_path
from gpuws.core.profiles import ProfileStore

pytestmark = [
    pytest.mark.gui,
    pytest.mark.sshd,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:unclosed file <_io.BufferedWriter name='[^']*sshd.log'>:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <_io.FileIO name='[^']*sshd.log'.*:pytest.PytestUnraisableExceptionWarning"
    ),
]


def _newest_sample_t(window: Any) -> float:
    latest = window.telemetry.store.latest("gpu1")
    return max((s.t for s in latest.values()), default=0.0)


def _samples_after(window: Any, qtbot: Any, t: float) -> None:
    qtbot.waitUntil(lambda: _newest_sample_t(window) > t, timeout=60000)


def test_telemetry_comes_back_after_reconnect_and_after_sshd_restarts(sshd: Any, make_window: Any,
                                                                     qtbot: Any) -> None:
    ProfileStore().add(HostProfile(name="gpu1", host="127.0.0.1", port=sshd.port, user=sshd.user,
                                   auth=AuthMethod.KEY, key_path=str(sshd.client_key)))
    known_hosts_path().write_text(sshd.known_hosts_line())
    window = make_window()
    window.reconnect_current()
    qtbot.waitUntil(lambda: window.sidebar.entry("gpu1").state == "connected", timeout=30000)
    _samples_after(window, qtbot, 0.0)

    # Host → Reconnect (Ctrl+R): a new connection replaces the old one; the stream follows it.
    first = window.sessions["gpu1"].connection
    window.reconnect_current()
    qtbot.waitUntil(lambda: window.sidebar.entry("gpu1").state == "connected"
                    and window.sessions["gpu1"].connection is not first, timeout=30000)
    _samples_after(window, qtbot, time.time())

    # sshd killed and restarted on the same port: the connection reconnects, samples come back.
    sshd.restart()
    restarted = time.time()
    _samples_after(window, qtbot, restarted)
    assert window.sidebar.entry("gpu1").state == "connected"
