"""HostConnection against a real OpenSSH sshd: auth, host keys, jump hosts, reconnects."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from gpuws.core.paths import known_hosts_path
from gpuws.core.profiles import ProfileStore
from gpuws.remote.auth import AuthFailed
from gpuws.remote.connection import (
    ConnectionState,
    HostConnection,
    HostKeyQuestion,
    HostUnreachable,
    JumpHostError,
    NotConnected,
    ReconnectPolicy,
)
from gpuws.remote.hostkeys import HostKeyChanged, UnknownHostKey
from tests.remote.helpers import key_profile, ssh_keygen_fingerprint, trust
from tests.support.sshd import SshdServer, free_port, keygen

pytestmark = pytest.mark.sshd

FAST_RETRY = ReconnectPolicy(base_delay=0.2, max_delay=1.0, max_retries=20)


def host_fingerprint(server: SshdServer) -> str:
    return ssh_keygen_fingerprint(Path(f"{server.host_key}.pub"))


async def test_key_auth_runs_commands_with_hostile_arguments_literally(
    sshd: SshdServer, isolated_home: Path, tmp_path: Path
) -> None:
    trust(sshd, isolated_home)
    victim = tmp_path / "pwned"
    hostile = [f"$(touch {victim})", f"`touch {victim}`", f"; touch {victim}", "a b\n'c\"", "-n"]
    async with HostConnection(key_profile(sshd)) as conn:
        assert conn.state is ConnectionState.CONNECTED
        result = await conn.runner.run(["printf", "%s\\n", *hostile])
    assert result.ok
    assert result.stdout.split("\n")[: len(hostile) + 1] == [*hostile[:3], "a b", "'c\"", "-n"]
    assert not victim.exists()
    assert conn.state is ConnectionState.DISCONNECTED


async def test_wrong_key_is_auth_failed(sshd: SshdServer, isolated_home: Path, tmp_path: Path) -> None:
    trust(sshd, isolated_home)
    wrong = keygen(tmp_path / "wrong_key")
    states: list[ConnectionState] = []
    conn = HostConnection(key_profile(sshd, key_path=str(wrong)), on_state=lambda s, _d: states.append(s))
    with pytest.raises(AuthFailed, match="authentication failed"):
        await conn.connect()
    assert conn.state is ConnectionState.AUTH_FAILED
    assert states == [ConnectionState.CONNECTING, ConnectionState.AUTH_FAILED]


async def test_unknown_key_refused_then_accepted_with_accept_new(sshd: SshdServer) -> None:
    with pytest.raises(UnknownHostKey) as info:
        await HostConnection(key_profile(sshd)).connect()
    assert host_fingerprint(sshd) in str(info.value)
    assert "--accept-new" in str(info.value)
    assert not known_hosts_path().exists()

    async with HostConnection(key_profile(sshd), accept_new=True):
        pass
    recorded = known_hosts_path().read_text()
    assert recorded == sshd.known_hosts_line()  # the OpenSSH line, [host]:port form
    async with HostConnection(key_profile(sshd)) as conn:  # now known: no flag needed
        assert conn.state is ConnectionState.CONNECTED


async def test_confirm_callback_decides_on_an_unknown_key(sshd: SshdServer) -> None:
    asked: list[HostKeyQuestion] = []

    async def refuse(question: HostKeyQuestion) -> bool:
        asked.append(question)
        return False

    conn = HostConnection(key_profile(sshd), confirm_host_key=refuse)
    with pytest.raises(UnknownHostKey):
        await conn.connect()
    assert conn.state is ConnectionState.HOST_KEY_UNKNOWN
    assert asked[0].fingerprint == host_fingerprint(sshd) and asked[0].port == sshd.port
    assert host_fingerprint(sshd) in str(asked[0])

    async with HostConnection(key_profile(sshd), confirm_host_key=lambda q: True) as conn:
        assert conn.state is ConnectionState.CONNECTED
    assert known_hosts_path().read_text() == sshd.known_hosts_line()


async def test_changed_key_is_always_refused(sshd: SshdServer, isolated_home: Path) -> None:
    known_file = trust(sshd, isolated_home)
    old = host_fingerprint(sshd)
    sshd.restart(new_host_key=True)
    new = host_fingerprint(sshd)
    for accept_new in (False, True):
        conn = HostConnection(key_profile(sshd), accept_new=accept_new, confirm_host_key=lambda q: True)
        with pytest.raises(HostKeyChanged) as info:
            await conn.connect()
        message = str(info.value)
        assert old in message and new in message and old != new
        assert f"{known_file}:1" in message and "127.0.0.1" in message
        assert conn.state is ConnectionState.HOST_KEY_CHANGED
    assert not known_hosts_path().exists()  # nothing was recorded


async def test_hashed_known_hosts_entry_is_matched(sshd: SshdServer, isolated_home: Path) -> None:
    known_file = trust(sshd, isolated_home)
    subprocess.run(["ssh-keygen", "-H", "-f", str(known_file)], check=True, capture_output=True)
    assert known_file.read_text().startswith("|1|")
    async with HostConnection(key_profile(sshd)) as conn:
        assert conn.state is ConnectionState.CONNECTED


async def test_in_memory_known_key(sshd: SshdServer) -> None:
    async with HostConnection(key_profile(sshd), known_host_key=sshd.known_hosts_line()) as conn:
        assert (await conn.runner.run(["true"])).ok
    assert not known_hosts_path().exists()


async def test_unreachable_port(isolated_home: Path, sshd: SshdServer) -> None:
    conn = HostConnection(key_profile(sshd, port=free_port()), connect_timeout=5)
    with pytest.raises(HostUnreachable, match="cannot reach"):
        await conn.connect()
    assert conn.state is ConnectionState.UNREACHABLE
    with pytest.raises(NotConnected):
        await conn.runner.run(["true"])


async def test_jump_host_through_another_profile(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    store = ProfileStore()
    store.add(key_profile(sshd, name="bastion"))
    target = key_profile(sshd, name="inner", jump="bastion")
    async with HostConnection(target, profiles=store) as conn:
        result = await conn.runner.run(["sh", "-c", "echo $SSH_CLIENT"])
    # The inner session's client is the bastion's sshd forwarding from loopback.
    assert result.ok and result.stdout.startswith("127.0.0.1 ")


async def test_jump_host_loop_is_refused(sshd: SshdServer, tmp_path: Path) -> None:
    class LoopStore:
        def get(self, name: str) -> object:
            return key_profile(sshd, name=name, jump="a" if name == "b" else "b")

    conn = HostConnection(key_profile(sshd, name="a", jump="b"), profiles=LoopStore())  # type: ignore[arg-type]
    with pytest.raises(JumpHostError, match="loop: a -> b -> a"):
        await conn.connect()


async def test_reconnects_after_sshd_is_killed_and_restarted(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    states: list[ConnectionState] = []
    conn = HostConnection(key_profile(sshd), reconnect=FAST_RETRY, on_state=lambda s, _d: states.append(s))
    await conn.connect()
    try:
        sshd.kill_sessions()  # every session dies, then the listener: a host going away
        sshd.stop()
        await _wait_for(lambda: ConnectionState.RECONNECTING in states)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(sshd.start)
        await _wait_for(lambda: conn.state is ConnectionState.CONNECTED)
        assert (await conn.runner.run(["echo", "back"])).stdout == "back\n"
    finally:
        await conn.close()
    reconnecting = states.index(ConnectionState.RECONNECTING)
    assert ConnectionState.CONNECTED in states[reconnecting:]
    assert states[-1] is ConnectionState.DISCONNECTED


async def test_runner_waits_out_a_reconnect(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd), reconnect=FAST_RETRY) as conn:
        sshd.kill_sessions()  # drop the link, keep the listener
        result = await conn.runner.run(["echo", "after"], timeout=20)
        assert result.stdout == "after\n"


async def test_close_stops_reconnecting(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    conn = HostConnection(key_profile(sshd), reconnect=FAST_RETRY)
    await conn.connect()
    sshd.kill_sessions()
    sshd.stop()
    await _wait_for(lambda: conn.state is ConnectionState.RECONNECTING)
    await conn.close()
    assert conn.state is ConnectionState.DISCONNECTED
    sshd.start()
    await asyncio.sleep(1.5)
    assert conn.state is ConnectionState.DISCONNECTED


async def test_gives_up_after_max_retries(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    policy = ReconnectPolicy(base_delay=0.05, max_delay=0.1, max_retries=3)
    details: list[str] = []
    conn = HostConnection(key_profile(sshd), reconnect=policy, on_state=lambda _s, d: details.append(d))
    await conn.connect()
    sshd.kill_sessions()
    sshd.stop()
    await _wait_for(lambda: conn.state is ConnectionState.UNREACHABLE)
    assert "after 3 attempts" in details[-1]
    await conn.close()


def test_backoff_grows_is_capped_and_jittered() -> None:
    policy = ReconnectPolicy(base_delay=1.0, max_delay=8.0, jitter=0.5)
    assert all(0.5 <= policy.delay(1) <= 1.0 for _ in range(50))
    assert all(2.0 <= policy.delay(3) <= 4.0 for _ in range(50))
    assert all(4.0 <= policy.delay(10) <= 8.0 for _ in range(50))
    assert len({policy.delay(5) for _ in range(20)}) > 1


async def _wait_for(condition: object, timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)
