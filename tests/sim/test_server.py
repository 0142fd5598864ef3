"""The demo SSH server end to end, with a real asyncssh client."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import asyncssh
import pytest

from gpuws.sim.server import DemoHost, DemoHostInfo


async def _connect(info: DemoHostInfo) -> asyncssh.SSHClientConnection:
    known = asyncssh.import_known_hosts(info.known_hosts_line + "\n")
    return await asyncssh.connect(
        info.host, info.port, username=info.user, password=info.password, known_hosts=known,
        client_keys=None, agent_path=None,
    )


async def _started(tmp_path: Path) -> tuple[DemoHost, DemoHostInfo]:
    host = DemoHost(gpus="h100,a100", state_dir=tmp_path / "demo")
    return host, await host.start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_demo_host_end_to_end(tmp_path: Path) -> None:
    async def scenario() -> None:
        host, info = await _started(tmp_path)
        try:
            data = json.loads(info.to_json())
            assert data["simulated"] is True and data["host_key_fingerprint"].startswith("SHA256:")
            async with await _connect(info) as conn:
                result = await conn.run("nvidia-smi -L", check=True)
                assert result.stdout.splitlines()[0].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")

                # A script on stdin, as the agent and runner send theirs.
                result = await conn.run("python3 - 7", input="import sys, pynvml\n"
                                        "print(sys.argv[1], pynvml.GPUWS_SIMULATED)\n")
                assert result.stdout.strip() == "7 True"

                # Streaming, then cancelled: the emulator process must be gone afterwards.
                proc = await conn.create_process("echo $$; exec nvidia-smi --query-gpu=index "
                                                  "--format=csv,noheader -lms 200")
                pid = int(await proc.stdout.readline())
                assert (await proc.stdout.readline()).strip() == "0"
                assert _alive(pid)
                proc.close()
                await proc.wait_closed()
                for _ in range(50):
                    if not _alive(pid):
                        break
                    await asyncio.sleep(0.1)
                assert not _alive(pid), "streaming nvidia-smi outlived its channel"

                # SFTP is chrooted to <state_dir>/files.
                (Path(info.state_dir) / "files" / "hello.txt").write_text("hi")
                async with conn.start_sftp_client() as sftp:
                    assert "hello.txt" in await sftp.listdir("/")
                    assert "hello.txt" in await sftp.listdir("/../..")
                    assert "sim" not in await sftp.listdir("/..")

                # Forwarding: loopback only.
                async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                    writer.write(await reader.readline())
                    await writer.drain()
                    writer.close()

                server = await asyncio.start_server(echo, "127.0.0.1", 0)
                port = server.sockets[0].getsockname()[1]
                reader, writer = await conn.open_connection("127.0.0.1", port)
                writer.write(b"ping\n")
                assert await reader.readline() == b"ping\n"
                writer.close()
                server.close()
                await server.wait_closed()
                with pytest.raises(asyncssh.ChannelOpenError):
                    await conn.open_connection("192.0.2.1", 80)
        finally:
            await host.stop()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_wrong_password_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        host, info = await _started(tmp_path)
        try:
            known = asyncssh.import_known_hosts(info.known_hosts_line + "\n")
            with pytest.raises(asyncssh.PermissionDenied):
                await asyncssh.connect(info.host, info.port, username=info.user, password="wrong",
                                       known_hosts=known, client_keys=None, agent_path=None)
        finally:
            await host.stop()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_host_key_survives_restart(tmp_path: Path) -> None:
    async def scenario() -> tuple[str, str]:
        host, first = await _started(tmp_path)
        await host.stop()
        host, second = await _started(tmp_path)
        await host.stop()
        return first.host_key_fingerprint, second.host_key_fingerprint

    a, b = asyncio.run(scenario())
    assert a == b
