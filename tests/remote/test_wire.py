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
