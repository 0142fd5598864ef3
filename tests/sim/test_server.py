"""The demo SSH server end to end, with a real asyncssh client."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
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


def test_password_survives_restart_with_the_state_dir(tmp_path: Path) -> None:
    # Found: a restart on the same --state-dir kept the host key but made a new password, so a
    # saved profile could never reconnect.
    async def scenario() -> None:
        host, first = await _started(tmp_path)
        await host.stop()
        host, second = await _started(tmp_path)
        try:
            assert second.password == first.password
            assert second.host_key_fingerprint == first.host_key_fingerprint
            saved = dataclasses.replace(first, port=second.port, known_hosts_line=second.known_hosts_line)
            async with await _connect(saved) as conn:  # what the saved profile knows: its password
                assert (await conn.run("echo ok", check=True)).stdout.strip() == "ok"
        finally:
            await host.stop()
        assert oct((tmp_path / "demo" / "demo_password").stat().st_mode & 0o777) == "0o600"

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_the_simulated_jupyter_dies_with_a_killed_demo_host(tmp_path: Path) -> None:
    # Found: the simulated Jupyter the demo host started outlived it.
    from tests.support.sshd import free_port

    state = tmp_path / "state"
    repo = Path(__file__).resolve().parents[2]
    demo = subprocess.Popen([sys.executable, "-m", "gpuws", "demo-host", "--state-dir", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": str(repo)})
    jupyter_pid = 0
    try:
        info = DemoHostInfo(**{k: v for k, v in json.loads(demo.stdout.readline()).items() if k != "simulated"})
        port = free_port()

        async def start_jupyter() -> None:
            async with await _connect(info) as conn:
                await conn.run(f"JUPYTER_TOKEN=t setsid nohup jupyter lab --port={port} >/dev/null 2>&1 "
                               "</dev/null &", check=True)

        asyncio.run(asyncio.wait_for(start_jupyter(), 30))
        runtime = state / "sim" / "jupyter-runtime"
        for _ in range(300):
            entries = list(runtime.glob("*.json")) if runtime.exists() else []
            if entries:
                jupyter_pid = int(json.loads(entries[0].read_text())["pid"])
                break
            time.sleep(0.1)
        assert jupyter_pid and _running(jupyter_pid)
        demo.kill()  # SIGKILL: no chance to clean up
        demo.wait()
        for _ in range(300):
            if not _running(jupyter_pid):
                break
            time.sleep(0.1)
        assert not _running(jupyter_pid), "the simulated Jupyter outlived its demo host"
    finally:
        demo.kill()
        demo.wait()
        assert demo.stdout is not None
        demo.stdout.close()
        if jupyter_pid and _running(jupyter_pid):
            os.kill(jupyter_pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a detached process may wait to be reaped by a busy init)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] not in ("Z", "X")
