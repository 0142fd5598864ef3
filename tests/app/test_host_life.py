"""Live state that stays true (#23), driven through the demo host as a process of its own: killed,
frozen (SIGSTOP/SIGCONT) and restarted on the same port. Qt-free: the Workspace on an event loop.

Time is scaled: the connection's own fast retries are 2 quick tries and the slow pace is one try
every 2 s (60 s in the app), so an outage of several slow tries stands for the 3-minute reboot.
Before #23 nothing kept trying after the connection's own retries: the host stayed "Unreachable -
gave up reconnecting" after it was back, and a frozen host stayed "Connected".
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuws.app.demo import key_from_known_hosts_line
from gpuws.app.hosts import HostLink, RetryPace
from gpuws.app.telemetry import TelemetryService
from gpuws.app.tunnels import TunnelRequest
from gpuws.app.workspace import TUNNEL_HOST_DOWN, TUNNEL_HOST_STALE, Change, Workspace
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.states import ConnectionState
from gpuws.core.telemetry.alerts import AlertKind
from gpuws.core.tunnels import Preset, TunnelState
from gpuws.remote.connection import ReconnectPolicy
from gpuws.remote.tunnels import Tunnel
from gpuws.sim.server import kill_leftovers
from tests.support import demo_process
from tests.support.sshd import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PACE = RetryPace(fast=1, fast_delay_s=0.3, slow_s=2.0)
HZ = 4.0
PASSWORD = "same-password-after-a-reboot"


class Owner:
    """The Workspace's owner: its thread is the test's; the work runs on an event loop thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.posted: queue.Queue[Callable[[], None]] = queue.Queue()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def post(self, func: Callable[[], None]) -> None:
        self.posted.put(func)

    def wait_until(self, condition: Callable[[], bool], timeout: float = 60.0) -> None:
        """Run what was posted (on this, the owner's thread) until `condition` holds."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError("condition not met in time")
            with contextlib.suppress(queue.Empty):
                self.posted.get(timeout=0.05)()

    def close(self) -> None:
        async def settle() -> None:  # cancelled feeds clean up (stop their host processes) first
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            await asyncio.wait(others, timeout=15) if others else None

        asyncio.run_coroutine_threadsafe(settle(), self.loop).result(20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _newest(ws: Workspace) -> float:
    return max((s.t for s in ws.telemetry.store.latest("rig").values()), default=0.0)


def _flowing_since(ws: Workspace, t: float) -> bool:
    return ws.state("rig") is ConnectionState.CONNECTED and _newest(ws) > t and ws.streaming("rig")


@contextlib.contextmanager
def _opened(tmp_path: Path, pace: RetryPace, reconnect: ReconnectPolicy | None = None,
            ) -> Iterator[tuple[Workspace, Owner, dict[str, Any]]]:
    port = free_port()
    proc, info = demo_process.start(port, tmp_path / "host", PASSWORD)
    owner = Owner()
    ws = Workspace(owner.spawn, post=owner.post, telemetry=TelemetryService(hz=HZ))
    profile = HostProfile(name="rig", host="127.0.0.1", port=port, user=info["user"], auth=AuthMethod.PASSWORD,
                          simulated=True)
    link = HostLink(profile, owner.spawn, owner.post, password=PASSWORD, pace=pace,
                    known_host_key=key_from_known_hosts_line(info["known_hosts_line"]),
                    connection_options={"reconnect": reconnect or ReconnectPolicy(base_delay=0.1, max_delay=0.2,
                                                                                  max_retries=2),
                                        "keepalive_interval": 1.0, "connect_timeout": 5.0})
    ws.attach(link)
    ws.connect("rig")
    state = {"proc": proc, "port": port, "dir": tmp_path / "host"}
    try:
        owner.wait_until(lambda: _flowing_since(ws, 0.0))
        yield ws, owner, state
    finally:
        closed = ws.close("rig")
        if closed is not None:
            closed.result(15)
        ws.close(timeout=5)
        owner.close()
        demo_process.stop(state["proc"])


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[Workspace, Owner, dict[str, Any]]]:
    with _opened(tmp_path, PACE) as opened:
        yield opened


def test_retry_now_tries_at_once_instead_of_at_the_slow_pace(tmp_path: Path) -> None:
    hour = RetryPace(fast=1, fast_delay_s=0.3, slow_s=3600.0)  # the next slow try would be an hour away
    with _opened(tmp_path, hour) as (ws, owner, state):
        demo_process.stop(state["proc"])
        owner.wait_until(lambda: ws.state("rig") is ConnectionState.UNREACHABLE
                         and "trying again in 3600 s" in ws.host("rig").detail)  # type: ignore[union-attr]
        state["proc"], _ = demo_process.start(state["port"], state["dir"], PASSWORD)
        back = time.time()
        ws.retry_now("rig")  # the user's "Retry now"
        owner.wait_until(lambda: _flowing_since(ws, back))


def test_every_countdown_counts(tmp_path: Path) -> None:
    """#35: "retry 6/10 in 11.4 s" stayed the same for 15 s and "trying again in 60 s" from 130 s
    to 220 s: the text was made once, when the wait began. The window's one-second clock
    (`check_stale`) reads them again; here it is called as often as the owner polls."""
    hour = RetryPace(fast=1, fast_delay_s=0.3, slow_s=3600.0)
    fast = ReconnectPolicy(base_delay=3.0, max_delay=3.0, max_retries=1)
    with _opened(tmp_path, hour, fast) as (ws, owner, state):
        def detail() -> str:
            ws.check_stale()  # the window's clock
            record = ws.host("rig")
            return record.detail if record is not None else ""

        demo_process.stop(state["proc"])
        retry = "connection lost; retry 1/1 in "
        owner.wait_until(lambda: detail().startswith(retry))
        first = detail()
        owner.wait_until(lambda: detail().startswith(retry) and detail() != first, timeout=2.5)  # it counts
        owner.wait_until(lambda: "trying again in 3600 s" in detail())
        owner.wait_until(lambda: "trying again in 3599 s" in detail(), timeout=3.0)  # a second later
        assert ws.state("rig") is ConnectionState.UNREACHABLE and detail().endswith("(or Retry now)")


def test_a_killed_host_restarted_on_the_same_port_after_the_outage_comes_back_with_data(
        host: tuple[Workspace, Owner, dict[str, Any]]) -> None:
    ws, owner, state = host
    with _tunnel(ws, owner) as tunnel:
        _killed_and_back(ws, owner, state, tunnel)


def _killed_and_back(ws: Workspace, owner: Owner, state: dict[str, Any], tunnel: Tunnel) -> None:
    port = state["port"]
    details: list[tuple[ConnectionState, str]] = []
    ws.subscribe(lambda change, name: details.append((ws.state(name), ws.host(name).detail))  # type: ignore[union-attr]
                 if change is Change.STATE else None)
    demo_process.stop(state["proc"])  # killed: the port refuses connections

    # The connection's own fast retries are spent and the link is on the slow pace, saying why in words.
    slow = f"connection refused on port {port}; trying again in {PACE.slow_s:.0f} s"
    owner.wait_until(lambda: any(s is ConnectionState.UNREACHABLE and d.startswith(slow) for s, d in details))
    record = ws.host("rig")
    assert record is not None and record.link is not None and record.link.error is not None
    assert record.link.error.error_class == "HostUnreachable"  # the class, for the details only
    # The unreachable alert says it in words too (was "CommandTimeout: date timed out after 10 s").
    owner.wait_until(lambda: any(a.kind is AlertKind.HOST_UNREACHABLE and f"connection refused on port {port}"
                                 in a.message for a in ws.telemetry.alert_log.active()))
    # Several slow tries later (the reboot), still trying: never "gave up".
    outage_ends = time.monotonic() + 3 * PACE.slow_s
    owner.wait_until(lambda: time.monotonic() > outage_ends)
    assert ws.state("rig") is ConnectionState.UNREACHABLE and "gave up" not in ws.host("rig").detail  # type: ignore[union-attr]
    assert ws.tunnel_text("rig", tunnel) == TUNNEL_HOST_DOWN

    state["proc"], _ = demo_process.start(port, state["dir"], PASSWORD)  # back on the same port
    back = time.time()
    owner.wait_until(lambda: _flowing_since(ws, back))  # connected, data flowing, nobody pressed anything
    assert not [a for a in ws.telemetry.alert_log.active() if a.kind is AlertKind.HOST_UNREACHABLE]
    owner.wait_until(lambda: ws.tunnel_text("rig", tunnel) == "open")  # the tunnel is back with its host


@contextlib.contextmanager
def _tunnel(ws: Workspace, owner: Owner) -> Iterator[Tunnel]:
    """A tunnel from here through the host to a service listening on the host's side."""
    async def serve() -> asyncio.Server:
        return await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)

    async def stop(server: asyncio.Server) -> None:
        server.close()
        await server.wait_closed()

    server = owner.spawn(serve()).result(10)
    try:
        opened = ws.open_tunnel("rig", TunnelRequest(Preset.CUSTOM, remote=server.sockets[0].getsockname()[1]))
        owner.wait_until(opened.done)
        tunnel = opened.result()
        assert tunnel.state is TunnelState.OPEN and ws.tunnel_text("rig", tunnel) == "open"
        yield tunnel
        owner.wait_until(ws.close_tunnel("rig", tunnel).done)
    finally:
        owner.spawn(stop(server)).result(10)


def test_a_frozen_host_turns_stale_and_fresh_again(host: tuple[Workspace, Owner, dict[str, Any]]) -> None:
    ws, owner, state = host
    with _tunnel(ws, owner) as tunnel:
        _frozen_and_thawed(ws, owner, state, tunnel)


def _frozen_and_thawed(ws: Workspace, owner: Owner, state: dict[str, Any], tunnel: Tunnel) -> None:
    state["proc"].send_signal(signal.SIGSTOP)
    owner.wait_until(lambda: "rig" in ws.check_stale())
    record = ws.host("rig")
    assert record is not None and record.state is ConnectionState.CONNECTED  # the link has not dropped yet
    assert record.status_text.startswith("Stale (no data for ")
    assert not ws.telemetry.store.status("rig").online  # the readouts grey out
    # The tunnel itself still thinks it is open; what the row says is the host's truth (was "open").
    assert tunnel.state is TunnelState.OPEN
    assert ws.tunnel_text("rig", tunnel) == TUNNEL_HOST_STALE

    state["proc"].send_signal(signal.SIGCONT)
    resumed = time.time()
    owner.wait_until(lambda: _flowing_since(ws, resumed) and not ws.check_stale())
    assert ws.host("rig").status_text == "Connected"  # type: ignore[union-attr]
    assert ws.tunnel_text("rig", tunnel) == "open"


def test_stale_after_three_missed_sample_intervals_by_the_workspace_clock() -> None:
    """Deterministic: the clock is injected, the feed a recorded future."""
    from gpuws.core.telemetry.sample import GpuSample, SampleBatch
    from tests.app.test_workspace import Conn, Spawned

    ws = Workspace(Spawned(), telemetry=TelemetryService(hz=1.0), clock=lambda: 1000.0)
    heard: list[Change] = []
    ws.subscribe(lambda change, _host: heard.append(change))
    ws.add_host(HostProfile(name="lab", host="h"))
    ws.connection_changed("lab", Conn())
    ws.state_changed("lab", ConnectionState.CONNECTED)
    ws.telemetry.store.ingest("lab", SampleBatch(1000.0, [GpuSample(t=1000.0, gpu=0)], "nvml"))
    assert ws.check_stale(1002.9) == [] and ws.host("lab").stale_s is None  # type: ignore[union-attr]
    heard.clear()
    assert ws.check_stale(1003.5) == ["lab"]  # three intervals of 1 s missed
    assert ws.host("lab").status_text == "Stale (no data for 4 s)" and heard == [Change.STATE]  # type: ignore[union-attr]
    ws.telemetry.store.ingest("lab", SampleBatch(1004.0, [GpuSample(t=1004.0, gpu=0)], "nvml"))
    assert ws.check_stale(1004.2) == [] and ws.host("lab").status_text == "Connected"  # type: ignore[union-attr]


def test_jupyter_is_found_or_started_again_after_the_host_restarts(
        host: tuple[Workspace, Owner, dict[str, Any]]) -> None:
    """#35: after a restart the Jupyter tunnel row stayed "failed — nothing is listening on
    127.0.0.1:PORT": the server died with the host and was neither found again nor started,
    though opening it the first time does both. Now it is, as on first open, and the row says so;
    the local URL (same port, the new server's token) answers."""
    import urllib.request

    ws, owner, state = host
    opened = ws.open_tunnel("rig", TunnelRequest(Preset.JUPYTER))
    owner.wait_until(opened.done)
    tunnel = opened.result()
    assert ws.tunnel_text("rig", tunnel) == "open" and tunnel.has_token
    local = tunnel.local_port

    demo_process.stop(state["proc"])  # the host goes, and its Jupyter with it
    owner.wait_until(lambda: ws.state("rig") is ConnectionState.UNREACHABLE)
    state["proc"], _ = demo_process.start(state["port"], state["dir"], PASSWORD)
    owner.wait_until(lambda: ws.tunnel_text("rig", tunnel).startswith("open — "), timeout=90)
    assert ws.tunnel_text("rig", tunnel) == "open — Jupyter started again after the host came back"
    assert tunnel.local_port == local  # the same local URL
    with urllib.request.urlopen(tunnel.url, timeout=20) as answer:  # through the tunnel, with the token
        assert answer.status == 200
    assert len(ws.host("rig").tunnels) == 1  # type: ignore[union-attr]
    owner.wait_until(ws.close_tunnel("rig", tunnel).done)


# A stand-in for TensorBoard (not installed on the test machine): an HTTP server on its --port, as
# `tensorboard --logdir=D --host=127.0.0.1 --port=P` serves.
_TENSORBOARD = f"""#!/bin/sh
for arg; do case "$arg" in --port=*) port="${{arg#--port=}}";; esac; done
exec "{sys.executable}" -m http.server --bind 127.0.0.1 "$port"
"""


def _rebooted(ws: Workspace, owner: Owner, state: dict[str, Any], tunnel: Tunnel) -> str:
    """The host reboots: the demo host and everything it started end (a kill -9 of the demo host
    alone leaves what it started detached running, which a reboot would not), then it is back; what
    `tunnel`'s row says once it is open again with a note."""
    demo_process.stop(state["proc"])
    kill_leftovers(state["dir"])
    owner.wait_until(lambda: ws.state("rig") is ConnectionState.UNREACHABLE)
    state["proc"], _ = demo_process.start(state["port"], state["dir"], PASSWORD)
    owner.wait_until(lambda: ws.tunnel_text("rig", tunnel).startswith("open — "), timeout=120)
    return ws.tunnel_text("rig", tunnel)


def test_tensorboard_is_started_again_after_the_host_reboots(
        host: tuple[Workspace, Owner, dict[str, Any]]) -> None:
    """#35: a tunnel whose TensorBoard gpuws started finds it gone after a reboot and starts it
    again, as on first open, on the same local port, and says so."""
    import urllib.request

    ws, owner, state = host
    stand_in = state["dir"] / "bin" / "tensorboard"
    stand_in.write_text(_TENSORBOARD)
    stand_in.chmod(0o755)
    opened = ws.open_tunnel("rig", TunnelRequest(Preset.TENSORBOARD, remote=free_port(), logdir="runs"))
    owner.wait_until(opened.done)
    tunnel = opened.result()
    assert ws.tunnel_text("rig", tunnel) == "open"
    local = tunnel.local_port

    assert _rebooted(ws, owner, state, tunnel) == "open — TensorBoard started again after the host came back"
    assert tunnel.local_port == local
    with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=20) as answer:
        assert answer.status == 200
    owner.wait_until(ws.close_tunnel("rig", tunnel).done)


@pytest.mark.xdist_group("x-display")  # it starts an Xvnc: never beside another test that picks a display
def test_the_desktop_is_started_again_after_the_host_reboots(
        host: tuple[Workspace, Owner, dict[str, Any]]) -> None:
    """#35: the desktop's tunnel (kept by the Workspace with `desktop.reopener`, as Start desktop
    keeps it) finds its Xvnc gone after a reboot, starts the desktop again on the same local
    port, and says so; a VNC server answers there."""
    import socket

    from gpuws.app import desktop
    from gpuws.core.secrets import SecretStore

    ws, owner, state = host
    record = ws.host("rig")
    assert record is not None and record.connection is not None
    secrets = SecretStore()
    session = owner.spawn(desktop.open_desktop(record.connection, geometry="1024x768", secrets=secrets)).result(90)
    kept: list[Tunnel] = []
    owner.post(lambda: kept.append(ws.add_tunnel("rig", session.tunnel,
                                                 reopen=desktop.reopener("1024x768", secrets))))
    owner.wait_until(lambda: bool(kept))
    tunnel = kept[0]
    assert ws.tunnel_text("rig", tunnel) == "open"
    local = tunnel.local_port
    try:
        assert _rebooted(ws, owner, state, tunnel) == "open — the desktop started again after the host came back"
        assert tunnel.local_port == local
        with socket.create_connection(("127.0.0.1", local), timeout=20) as vnc:
            assert vnc.recv(12).startswith(b"RFB 003.")  # Xvnc's greeting, through the same port
    finally:
        owner.wait_until(ws.close_tunnel("rig", tunnel).done)
        kill_leftovers(state["dir"])


def test_a_tunnel_whose_service_went_with_the_host_does_not_say_open(
        host: tuple[Workspace, Owner, dict[str, Any]]) -> None:
    """#35: a tunnel said "open" after its host came back though nothing answered on the host side
    any more (a connection to it got EOF): "open" only once the host side answers again."""
    ws, owner, state = host

    async def serve() -> asyncio.Server:
        return await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)

    async def stop(server: asyncio.Server) -> None:
        server.close()
        await server.wait_closed()

    server = owner.spawn(serve()).result(10)
    opened = ws.open_tunnel("rig", TunnelRequest(Preset.CUSTOM, remote=server.sockets[0].getsockname()[1]))
    owner.wait_until(opened.done)
    tunnel = opened.result()
    assert ws.tunnel_text("rig", tunnel) == "open"
    demo_process.stop(state["proc"])
    owner.wait_until(lambda: ws.state("rig") is ConnectionState.UNREACHABLE)
    owner.spawn(stop(server)).result(10)  # the service is gone with the host
    state["proc"], _ = demo_process.start(state["port"], state["dir"], PASSWORD)
    owner.wait_until(lambda: ws.state("rig") is ConnectionState.CONNECTED)
    owner.wait_until(lambda: ws.tunnel_text("rig", tunnel).startswith("failed"), timeout=30)
    assert "nothing is listening" in ws.tunnel_text("rig", tunnel)
    owner.wait_until(ws.close_tunnel("rig", tunnel).done)


def test_a_host_back_after_an_outage_is_not_stale_before_its_first_new_sample() -> None:
    """#35: just after a reconnect the header said "Stale (no data for 56 s)" beside a new sample:
    the age was counted from the last sample before the drop, not from the new stream's start."""
    from gpuws.core.telemetry.sample import GpuSample, SampleBatch
    from tests.app.test_workspace import Conn, Spawned

    now = [1000.0]
    ws = Workspace(Spawned(), telemetry=TelemetryService(hz=1.0), clock=lambda: now[0])
    ws.add_host(HostProfile(name="lab", host="h"))
    ws.connection_changed("lab", Conn())
    ws.state_changed("lab", ConnectionState.CONNECTED)
    ws.telemetry.store.ingest("lab", SampleBatch(1000.0, [GpuSample(t=1000.0, gpu=0)], "nvml"))
    now[0] = 1001.0
    ws.state_changed("lab", ConnectionState.RECONNECTING)  # the drop: the stream stops
    now[0] = 1056.0
    ws.state_changed("lab", ConnectionState.CONNECTED)  # back: a new stream begins now
    assert ws.check_stale(1056.6) == []
    record = ws.host("lab")
    assert record is not None and record.status_text == "Connected"
    assert record.shown_state == (ConnectionState.CONNECTED, "")
    assert ws.check_stale(1060.0) == ["lab"]  # the new stream's own three intervals, then stale
    assert record.shown_state == (ConnectionState.RECONNECTING, "Stale (no data for 4 s)")


def test_a_script_opens_its_host_on_a_workspace_through_the_same_link() -> None:
    """Found: the CLI connected on its own (`cli/connecting.py`, `app/targets.py`), the window
    through `HostSession`: connect-and-probe was written three times."""
    from gpuws.app.targets import open_host

    async def go() -> None:
        async with open_host("demo") as (workspace, record):
            assert record.link is not None and workspace.host("demo") is record
            assert record.state is ConnectionState.CONNECTED and record.inventory is not None
            assert record.inventory.gpus and record.inventory.simulated
        assert record.state is ConnectionState.DISCONNECTED  # closed on the way out

    asyncio.run(go())


def test_a_scripts_first_connect_that_fails_is_its_error() -> None:
    from gpuws.app.errors import ExitStatus, classify
    from gpuws.app.targets import open_target
    from gpuws.core.profiles import ProfileStore

    port = free_port()  # nothing listens
    ProfileStore().add(HostProfile(name="down", host="127.0.0.1", port=port, user="nobody"))

    async def go() -> BaseException:
        try:
            async with open_target("down"):
                raise AssertionError("connected to a closed port")
        except Exception as exc:
            return exc

    error = asyncio.run(go())
    found = classify(error)
    assert found.exit is ExitStatus.UNREACHABLE and found.reason == f"connection refused on port {port}"
