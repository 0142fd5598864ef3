"""Host keys as OpenSSH decides them, against a real sshd offering ed25519, ecdsa and rsa keys and a
CA-signed host certificate (issue 13)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuws.core.profiles import ProfileStore
from gpuws.remote.connection import HostConnection
from gpuws.remote.hostkeys import HostKeyChanged, HostKeyRevoked, KnownHosts, UnknownHostKey
from tests.remote.helpers import key_profile, ssh_keygen_fingerprint
from tests.support.sshd import SshdServer, keygen

pytestmark = pytest.mark.sshd


@pytest.fixture
def multi_sshd(tmp_path: Path) -> Iterator[SshdServer]:
    server = SshdServer(tmp_path / "sshd", extra_host_key_kinds=("ecdsa", "rsa"))
    yield server
    server.stop()


def known_file(home: Path, text: str) -> Path:
    path = home / ".ssh" / "known_hosts"
    path.write_text(text)
    return path


def ca_line(pattern: str, ca: Path, marker: str = "@cert-authority") -> str:
    kind, blob = Path(f"{ca}.pub").read_text().split()[:2]
    return f"{marker} {pattern} {kind} {blob}\n"


def wrong_line(server: SshdServer, tmp_path: Path, kind: str) -> tuple[str, Path]:
    wrong = keygen(tmp_path / f"wrong_{kind}", kind)
    key_type, blob = Path(f"{wrong}.pub").read_text().split()[:2]
    return f"[127.0.0.1]:{server.port} {key_type} {blob}\n", wrong


@pytest.mark.parametrize("right_kind", ["ecdsa", "rsa"])
async def test_right_line_then_wrong_ed25519_line_is_refused_as_openssh_does(
    multi_sshd: SshdServer, isolated_home: Path, tmp_path: Path, right_kind: str
) -> None:
    # In file order gpuws asked for ecdsa/rsa first and connected; OpenSSH prefers ed25519 and refuses.
    multi_sshd.start()
    bad, wrong = wrong_line(multi_sshd, tmp_path, "ed25519")
    path = known_file(isolated_home, multi_sshd.known_hosts_line(right_kind) + bad)
    with pytest.raises(HostKeyChanged) as info:
        await HostConnection(key_profile(multi_sshd), known_hosts=KnownHosts([path])).connect()
    message = str(info.value)
    assert ssh_keygen_fingerprint(Path(f"{wrong}.pub")) in message  # the recorded (wrong) one
    assert ssh_keygen_fingerprint(Path(f"{multi_sshd.host_key}.pub")) in message  # the presented one
    assert f"{path}:2" in message


def test_algorithms_follow_openssh_order_not_file_order(multi_sshd: SshdServer, isolated_home: Path) -> None:
    path = known_file(isolated_home, "".join(multi_sshd.known_hosts_line(k) for k in ("rsa", "ecdsa", "ed25519")))
    algs = KnownHosts([path]).preferred_algorithms("127.0.0.1", multi_sshd.port)
    # As ssh's order_hostkeyalgs: the recorded types' certificate algorithms, then their plain ones.
    assert algs == ["ssh-ed25519-cert-v01@openssh.com", "ecdsa-sha2-nistp256-cert-v01@openssh.com",
                    "rsa-sha2-512-cert-v01@openssh.com", "rsa-sha2-256-cert-v01@openssh.com",
                    "ssh-ed25519", "ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256"]


async def test_all_right_lines_connect(multi_sshd: SshdServer, isolated_home: Path) -> None:
    multi_sshd.start()
    path = known_file(isolated_home, "".join(multi_sshd.known_hosts_line(k) for k in ("rsa", "ecdsa", "ed25519")))
    async with HostConnection(key_profile(multi_sshd), known_hosts=KnownHosts([path])) as conn:
        assert (await conn.runner.run(["true"])).ok


async def test_any_recorded_key_that_does_not_match_is_a_refusal(
    multi_sshd: SshdServer, isolated_home: Path, tmp_path: Path
) -> None:
    # Only an rsa line, and it is wrong: whatever the server presents, the host is refused.
    multi_sshd.start()
    bad, _ = wrong_line(multi_sshd, tmp_path, "rsa")
    path = known_file(isolated_home, bad)
    with pytest.raises(HostKeyChanged, match=r"known_hosts:1"):
        await HostConnection(key_profile(multi_sshd), known_hosts=KnownHosts([path])).connect()


async def test_ca_signed_host_certificate_is_accepted(multi_sshd: SshdServer, isolated_home: Path,
                                                      tmp_path: Path) -> None:
    ca = keygen(tmp_path / "ca")
    multi_sshd.certify_host_key(ca, principals="127.0.0.1,gpu1")
    multi_sshd.start()
    path = known_file(isolated_home, ca_line("127.0.0.1,[127.0.0.1]:*", ca))
    async with HostConnection(key_profile(multi_sshd), known_hosts=KnownHosts([path])) as conn:
        assert (await conn.runner.run(["true"])).ok


async def test_ca_line_for_other_hosts_does_not_trust(multi_sshd: SshdServer, isolated_home: Path,
                                                      tmp_path: Path) -> None:
    ca = keygen(tmp_path / "ca")
    multi_sshd.certify_host_key(ca)
    multi_sshd.start()
    path = known_file(isolated_home, ca_line("*.example.com", ca))
    with pytest.raises(UnknownHostKey):
        await HostConnection(key_profile(multi_sshd), known_hosts=KnownHosts([path])).connect()


@pytest.mark.parametrize(("principals", "validity"), [("gpu1,other", "-5m:+1h"), ("127.0.0.1", "-2d:-1d")])
async def test_certificate_for_other_principals_or_expired_is_refused(
    multi_sshd: SshdServer, isolated_home: Path, tmp_path: Path, principals: str, validity: str
) -> None:
    ca = keygen(tmp_path / "ca")
    multi_sshd.certify_host_key(ca, principals=principals, validity=validity)
    multi_sshd.start()
    path = known_file(isolated_home, ca_line("*", ca))
    with pytest.raises(HostKeyRevoked, match="not valid for this host"):
        await HostConnection(key_profile(multi_sshd), known_hosts=KnownHosts([path])).connect()


@pytest.mark.parametrize("revoke", ["ca", "host"])
async def test_revoked_wins_over_a_trusted_ca(multi_sshd: SshdServer, isolated_home: Path, tmp_path: Path,
                                              revoke: str) -> None:
    ca = keygen(tmp_path / "ca")
    multi_sshd.certify_host_key(ca)
    multi_sshd.start()
    revoked = ca_line("*", ca if revoke == "ca" else multi_sshd.host_key, marker="@revoked")
    path = known_file(isolated_home, ca_line("*", ca) + revoked)
    with pytest.raises(HostKeyRevoked, match="revoked"):
        await HostConnection(key_profile(multi_sshd), known_hosts=KnownHosts([path])).connect()


async def test_revoked_plain_host_key_is_refused_without_talk_of_a_certificate(
    sshd: SshdServer, isolated_home: Path
) -> None:
    # A plain host key, recorded and also @revoked: asyncssh refuses it before our gate sees it, and
    # the refusal named a "host certificate" the host never offered.
    line = sshd.known_hosts_line()
    path = known_file(isolated_home, line + "@revoked " + line)
    with pytest.raises(HostKeyRevoked) as info:
        await HostConnection(key_profile(sshd), known_hosts=KnownHosts([path])).connect()
    message = str(info.value)
    assert "revoked" in message and f"{path}:2" in message
    assert message.startswith("host key of")  # was: "host certificate of ... uses a revoked key"


async def test_user_at_host_port_jump_chain_needs_no_profiles(sshd: SshdServer, isolated_home: Path) -> None:
    # As `ssh -J u@h:p,ssh://u@h:p target`: address hops log in with the default identity.
    (isolated_home / ".ssh" / "known_hosts").write_text(sshd.known_hosts_line())
    shutil.copy(sshd.client_key, isolated_home / ".ssh" / "id_ed25519")
    hop = f"{sshd.user}@127.0.0.1:{sshd.port}"
    target = key_profile(sshd, name="inner", jump=f"{hop},ssh://{hop}")
    store = ProfileStore()  # empty: no jump host has a profile
    async with HostConnection(target, profiles=store) as conn:
        result = await conn.runner.run(["sh", "-c", "echo $SSH_CLIENT"])
        assert len(conn._conns) == 3  # followed hop by hop: two jump hosts, then the target
    assert result.ok and result.stdout.startswith("127.0.0.1 ")


def _negotiated_host_key_algorithm(server: SshdServer) -> list[str]:
    return [line.split("kex: host key algorithm:", 1)[1].split()[0]
            for line in server.log_path.read_text().splitlines() if "kex: host key algorithm:" in line]


@pytest.mark.parametrize("recorded", ["plain", "none"])
async def test_certificate_algorithms_are_offered_first_as_openssh_does(
    tmp_path: Path, isolated_home: Path, recorded: str
) -> None:
    """Issue 28: with a host certificate on the server and its plain key in known_hosts (no CA
    line), OpenSSH negotiates the certificate algorithm and checks the certificate's key as a plain
    key; gpuws negotiated plain ssh-ed25519. An unknown host is asked about by its plain key."""
    server = SshdServer(tmp_path / "sshd", extra_config=("LogLevel DEBUG1",))
    server.certify_host_key(keygen(tmp_path / "ca"), principals="somewhere-else")  # a CA nobody trusts
    server.start()
    try:
        path = known_file(isolated_home, server.known_hosts_line() if recorded == "plain" else "")
        if recorded == "plain":
            async with HostConnection(key_profile(server), known_hosts=KnownHosts([path])) as conn:
                assert (await conn.runner.run(["true"])).ok
        else:
            with pytest.raises(UnknownHostKey) as info:
                await HostConnection(key_profile(server), known_hosts=KnownHosts([path])).connect()
            assert ssh_keygen_fingerprint(Path(f"{server.host_key}.pub")) in str(info.value)
        assert _negotiated_host_key_algorithm(server)[:1] == ["ssh-ed25519-cert-v01@openssh.com"]
    finally:
        server.stop()
