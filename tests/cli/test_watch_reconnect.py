"""`gpuws watch` rides through a restart of sshd on the same port, and gives up with status 5.

The CLI runs as a real process against a real OpenSSH sshd (the simulated nvidia-smi on its PATH);
the test restarts sshd after the first samples and reads the JSON lines as they come.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.paths import known_hosts_path
from gpuws.core.profiles import ProfileStore
from tests.support.sshd import SshdServer

pytestmark = [pytest.mark.sshd, pytest.mark.slow]


def _save_profile(server: SshdServer) -> None:
    ProfileStore().add(HostProfile(name="rig", host="127.0.0.1", port=server.port, user=server.user,
                                   auth=AuthMethod.KEY, key_path=str(server.client_key)))
    known_hosts_path().write_text(server.known_hosts_line())


def _watch(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuws", "watch", "rig", "--json", "--interval", "0.2", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
    )


def _line(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"watch ended early: {proc.wait(30)} {proc.stderr.read() if proc.stderr else ''}"
    obj = json.loads(line)
    assert isinstance(obj, dict)
    return obj


def test_watch_reconnects_after_sshd_restarts_and_keeps_counting(sshd: SshdServer) -> None:
    _save_profile(sshd)
    with _watch("--count", "8", "--reconnect-timeout", "120") as proc:
        first = [_line(proc) for _ in range(2)]
        gpus = {o["gpu"] for o in first}
        sshd.restart()  # same port, same host key: every session dies, the listener comes back
        rest: list[dict[str, Any]] = []
        while True:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                break
            rest.append(json.loads(line))
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    lines = first + rest
    events = [o for o in lines if "event" in o]
    samples = [o for o in lines if "event" not in o]
    assert [e["event"] for e in events] == ["disconnected", "reconnected"]
    lost, back = events
    assert set(lost) == {"event", "t", "reason"} and lost["reason"]
    assert set(back) == {"event", "t"} and back["t"] >= lost["t"]
    # Samples before the loss, then after it; never an `event` key in a sample.
    order = [("event" in o) for o in lines]
    assert order.index(True) > 0 and any(not e for e in order[order.index(True) + 2:])
    assert all("gpu" in s and "util_gpu_pct" in s for s in samples)
    # --count counts samples per GPU across the reconnect: exactly 8 each.
    gpus = {s["gpu"] for s in samples} | gpus
    for gpu in gpus:
        assert sum(1 for s in samples if s["gpu"] == gpu and s.get("mig") is None) >= 8


def test_watch_gives_up_with_status_5_after_the_reconnect_timeout(sshd: SshdServer) -> None:
    _save_profile(sshd)
    with _watch("--reconnect-timeout", "2") as proc:
        _line(proc)
        sshd.stop()
        code = proc.wait(90)
        assert proc.stdout is not None and proc.stderr is not None
        lines = [json.loads(line) for line in proc.stdout.read().splitlines()]
        err = proc.stderr.read()
    assert code == 5, err
    assert [o["event"] for o in lines if "event" in o] == ["disconnected"]
    assert err.startswith("gpuws: error: ") and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(("change", "status"), [("login", 3), ("host key", 4)])
def test_watch_stops_at_once_when_the_host_comes_back_refusing_it(sshd: SshdServer, change: str, status: int) -> None:
    """The host restarts and no longer takes the key (status 3), or shows another host key (4).
    Retrying cannot fix either: watch said it was "reconnecting" until --reconnect-timeout and
    then exited 5, "unreachable", which is not what happened."""
    _save_profile(sshd)
    with _watch("--reconnect-timeout", "600") as proc:
        _line(proc)
        if change == "login":
            sshd.authorized_keys.write_text("")
            sshd.restart()
        else:
            sshd.restart(new_host_key=True)
        try:
            code = proc.wait(60)  # well before the 600 s timeout: it is not waited out
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"watch kept retrying after the host refused its {change}")
        assert proc.stdout is not None and proc.stderr is not None
        lines = [json.loads(line) for line in proc.stdout.read().splitlines()]
        err = proc.stderr.read()
    assert code == status, err
    assert [o["event"] for o in lines if "event" in o] == ["disconnected"]
    assert err.startswith("gpuws: error: ") and "Traceback" not in err
