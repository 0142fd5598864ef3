"""A large file's bytes through one exec channel (gpuws.remote.stream_copy), against a real OpenSSH
sshd and the demo host: hostile names are passed as data, never run; names only SFTP can carry go
through SFTP; a host whose exec side sees other files than its SFTP side (the demo host's SFTP is
chrooted) is copied over SFTP; a login script that prints is noticed before any byte is written."""

from __future__ import annotations

import asyncio
import os
import pwd
import uuid
from pathlib import Path

import pytest

from gpuws.app.demo import key_from_known_hosts_line
from gpuws.remote import stream_copy
from gpuws.remote.connection import HostConnection
from gpuws.remote.files import copy_paths
from gpuws.sim.server import DemoHost, demo_profile
from tests.remote.helpers import key_profile, trust
from tests.remote.test_files import Route
from tests.support.sshd import SshdServer


def _names(marker: str) -> list[str]:
    """File names a shell would take as code if they ever reached it unquoted."""
    return [
        f"it's $(touch {marker}) `touch {marker}`; touch {marker} & | > <.bin",
        "-n", "--help", "*", "~root", "$HOME", '"double"', "sp ace", "ünïcødé ✓",
    ]


@pytest.mark.sshd
@pytest.mark.parametrize("to_host", [True, False], ids=["upload", "download"])
async def test_hostile_names_are_streamed_as_data_and_newlines_go_through_sftp(
    sshd: SshdServer, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, to_host: bool
) -> None:
    trust(sshd, isolated_home)
    route = Route("stream", monkeypatch)
    marker = f"gpuws-pwned-{uuid.uuid4().hex}"
    source = tmp_path / "src" / "set"
    source.mkdir(parents=True)
    streamed_names = _names(marker)
    sftp_names = ["two\nlines.bin", "back\\slash.bin", "bang!.bin", "tab\there.bin"]
    for i, name in enumerate(streamed_names + sftp_names):
        (source / name).write_bytes(os.urandom(64 * 1024 + i))
    # A path near the 4,096-byte limit is quoted whole too.
    deep = source
    while len(str(deep).encode()) < 3700:
        deep = deep / ("d" * 200)
    deep.mkdir(parents=True)
    (deep / "far.bin").write_bytes(os.urandom(1000))
    dest = tmp_path / "dest"
    dest.mkdir()
    async with HostConnection(key_profile(sshd)) as conn:
        result = await copy_paths(conn, [str(source)], str(dest), to_host=to_host, recursive=True)
    assert result.failed == ()
    copied = dest / "set"
    for name in streamed_names + sftp_names:
        assert (copied / name).read_bytes() == (source / name).read_bytes(), name
    far = copied / deep.relative_to(source) / "far.bin"
    assert far.read_bytes() == (deep / "far.bin").read_bytes()
    host_side = copied if to_host else source
    assert sorted(route.streamed) == sorted([str(host_side / n) for n in streamed_names]
                                            + [str(host_side / deep.relative_to(source) / "far.bin")])
    # Nothing ran: no marker file in the login directory (the exec's working directory) or here.
    for where in (Path(pwd.getpwuid(os.getuid()).pw_dir), Path.cwd(), tmp_path, source, copied):
        assert not (where / marker).exists()


async def test_a_host_whose_exec_side_sees_other_files_is_copied_over_sftp(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo host's SFTP is chrooted to its files folder, its commands run in its state folder:
    a stream would read a decoy and write beside it. The working directories differ, so SFTP copies."""
    route = Route("stream", monkeypatch)
    host = DemoHost(state_dir=tmp_path / "demo")
    info = await host.start()
    try:
        host.files_dir.mkdir(parents=True, exist_ok=True)
        real = os.urandom(300_000)
        (host.files_dir / "down.bin").write_bytes(real)
        (host.state_dir / "down.bin").write_bytes(b"decoy")  # what the exec side would have read
        up = tmp_path / "up.bin"
        up.write_bytes(os.urandom(200_000))
        conn = HostConnection(demo_profile(info), password=info.password,
                              known_host_key=key_from_known_hosts_line(info.known_hosts_line))
        async with conn:
            await copy_paths(conn, ["down.bin"], str(tmp_path / "got.bin"), to_host=False)
            await copy_paths(conn, [str(up)], "up.bin", to_host=True)
            await copy_paths(conn, [str(up)], "again.bin", to_host=True)  # the host is known by now
    finally:
        await host.stop()
    assert (tmp_path / "got.bin").read_bytes() == real
    assert (host.files_dir / "up.bin").read_bytes() == up.read_bytes()
    assert (host.files_dir / "again.bin").read_bytes() == up.read_bytes()
    assert not (host.state_dir / "up.bin").exists() and not (host.state_dir / "again.bin").exists()
    assert route.streamed == []


class _Channel:
    """What a `_Session` calls on its channel: close."""

    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize(("first", "started"), [
    (b"gpuws-stream\n/home/ana\nDATA", True),
    (b"Welcome to the cluster!\ngpuws-stream\n/home/ana\nDATA", False),  # a login script printed first
    (b"gpuws-stream\n/srv/elsewhere\nDATA", False),  # commands run where SFTP is not
    (b"This service allows sftp connections only.\n", False),
])
async def test_the_stream_starts_only_after_its_own_marker_and_the_same_directory(
    tmp_path: Path, first: bytes, started: bool
) -> None:
    target = tmp_path / "out.bin"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
    moved: list[int] = []
    session = stream_copy._Session(b"/home/ana", fd, 4, moved.append)
    channel = _Channel()
    session.connection_made(channel)  # type: ignore[arg-type]
    for i in range(0, len(first), 5):  # the header may arrive in pieces
        session.data_received(first[i:i + 5], None)
    os.close(fd)
    assert session.ready.done() and session.ready.result() is started
    assert target.read_bytes() == (b"DATA" if started else b"")
    assert sum(moved) == (4 if started else 0)
    assert channel.closed  # refused at once, or all 4 bytes wanted have come
    await asyncio.sleep(0)


def test_only_plain_printable_names_are_streamed() -> None:
    assert stream_copy.streamable("/data/run 1/it's $(x) `y`;*.bin")
    assert stream_copy.streamable("~/ünïcødé ✓")
    for name in ("a\nb", "a\\b", "a!b", "tab\t", "bad-\udcff-byte", "", "x" * 4096):
        assert not stream_copy.streamable(name), name


@pytest.mark.sshd
async def test_an_sftp_only_host_is_copied_over_sftp_after_one_try(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenSSH with `ForceCommand internal-sftp` runs SFTP for every command: no marker comes, so each
    copy tries the stream once (a download learns it at once; an upload after the start timeout)
    and sends its files over SFTP."""
    route = Route("stream", monkeypatch)
    server = SshdServer(tmp_path / "sshd", extra_config=("ForceCommand internal-sftp",))
    server.start()
    try:
        trust(server, isolated_home)
        host = tmp_path / "host"
        host.mkdir()
        for name in ("a.bin", "b.bin"):
            (host / name).write_bytes(os.urandom(300_000))
        here = tmp_path / "here"
        here.mkdir()
        async with HostConnection(key_profile(server)) as conn:
            # A download must not wait for the marker: with a start timeout of an hour, it would hang
            # (the guard ends it long before).
            monkeypatch.setattr(stream_copy, "START_TIMEOUT_S", 3600.0)
            await asyncio.wait_for(copy_paths(conn, [str(host / "a.bin"), str(host / "b.bin")], str(here),
                                              to_host=False), 300)
            monkeypatch.setattr(stream_copy, "START_TIMEOUT_S", 1.0)
            await copy_paths(conn, [str(here / "a.bin"), str(here / "b.bin")], str(host / "up") + "/", to_host=True)
    finally:
        server.stop()
    for name in ("a.bin", "b.bin"):
        assert (here / name).read_bytes() == (host / name).read_bytes() == (host / "up" / name).read_bytes()
    assert route.streamed == []
    assert len(route.failed) == 2  # one try per copy, then SFTP for the rest of it
    assert all(isinstance(e, stream_copy.StreamUnavailable) and e.for_host for e in route.failed)
