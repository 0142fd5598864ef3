"""The connection's packets against a real OpenSSH sshd (gpuws.remote.wire): no MSG_IGNORE in front
of every packet under AES-GCM, and asyncssh's packet log still complete when it is turned on."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from gpuws.remote.connection import HostConnection
from tests.remote.helpers import key_profile, trust
from tests.support.sshd import SshdServer

pytestmark = pytest.mark.sshd


@pytest.fixture
def packet_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    asyncssh.set_debug_level(3)
    caplog.set_level(logging.DEBUG, logger="asyncssh")
    try:
        yield caplog
    finally:
        asyncssh.set_debug_level(1)


def _sent(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The names of the packets asyncssh logged as sent ("MSG_CHANNEL_DATA (94)", ...)."""
    return [str(r.args[1]) for r in caplog.records
            if isinstance(r.args, tuple) and len(r.args) == 4 and r.args[0] == "Sent"]


async def test_no_ignore_packet_before_each_packet_and_the_packet_log_still_works(
        sshd: SshdServer, isolated_home: Path, packet_log: pytest.LogCaptureFixture) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd)) as conn:
        ssh = await conn.ssh(10.0)
        assert ssh.get_extra_info("send_cipher") == "aes128-gcm@openssh.com"
        packet_log.clear()  # from here on: the connection as gpuws uses it, after the login
        result = await conn.runner.run(["cat"], input="x" * 100_000)
    assert result.ok and result.stdout == "x" * 100_000
    sent = _sent(packet_log)
    # Logged as before: the channel's data went out, and is in the log.
    assert any(name.startswith("MSG_CHANNEL_DATA") for name in sent), sent
    # asyncssh alone puts an empty MSG_IGNORE before every packet after the key exchange (a CBC
    # countermeasure); under AES-GCM none is sent once connected.
    assert not [name for name in sent if name.startswith("MSG_IGNORE")], sent


async def test_channel_data_sealed_by_the_fast_path_reaches_sshd_intact_across_re_keys(
        sshd: SshdServer, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 MiB up a channel with a re-key every MiB: sshd checks every packet's tag and sequence, so a
    wrong byte, count or key after a re-key ends the connection; the host's SHA-256 of what it
    read is the source's. The fast path sealed the data, under more than one key."""
    import asyncio
    import hashlib
    import os

    from gpuws.remote import wire

    keys: set[int] = set()
    sealed = [0]
    real_send = wire._FastData.send

    def spy(self: wire._FastData, args: tuple[bytes, ...], handler: object) -> bool:
        done = real_send(self, args, handler)
        if done:
            sealed[0] += 1
            keys.add(id(self._cipher))
        return done

    monkeypatch.setattr(wire._FastData, "send", spy)
    data = os.urandom(8 * 1024 * 1024)
    async with asyncssh.connect("127.0.0.1", sshd.port, username=sshd.user, client_keys=[str(sshd.client_key)],
                                known_hosts=None, encryption_algs=["aes128-gcm@openssh.com"],
                                rekey_bytes=1024 * 1024) as ssh:
        wire.coalesce_writes(ssh)
        wire.lean_packets(ssh)
        process = await ssh.create_process("sha256sum", encoding=None)
        for at in range(0, len(data), 256 * 1024):
            process.stdin.write(data[at:at + 256 * 1024])
            await process.stdin.drain()
        process.stdin.write_eof()
        out = await asyncio.wait_for(process.stdout.read(), 60)
        await process.wait()
    assert out.split()[0].decode() == hashlib.sha256(data).hexdigest()
    assert sealed[0] >= len(data) // (32 * 1024)  # every data packet (32 KiB at most, sshd's limit)
    assert len(keys) >= 4  # re-keyed along the way, and the fast path went on under each new key
