"""Remote output is bounded: a command writing past its cap is stopped with an error naming the host
and the command, for whole outputs and for streamed lines (issue 13), against a real sshd."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from gpuws.remote.connection import HostConnection
from gpuws.remote.ssh_runner import DEFAULT_MAX_LINE, DEFAULT_MAX_OUTPUT, RemoteOutputTooLarge, SshRunner
from gpuws.remote.telemetry import TelemetryStream
from tests.remote.helpers import key_profile, trust, wait_gone
from tests.support.sshd import SshdServer

pytestmark = pytest.mark.sshd

FLOOD = ["sh", "-c", "yes gpuws-flood-output | head -c 8000000; sleep 0"]


async def test_output_past_the_cap_stops_the_command_and_names_host_and_command(
    sshd: SshdServer, isolated_home: Path
) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd, name="gpu1")) as conn:
        runner = SshRunner(conn, max_output=1024 * 1024)
        with pytest.raises(RemoteOutputTooLarge) as info:
            await runner.run(FLOOD)
        message = str(info.value)
        assert "sh on gpu1" in message and "1 MiB" in message and "\n" not in message
        assert runner.budget.held == 0  # the stopped command's bytes went back to the budget
        assert (await runner.run(["echo", "still here"])).stdout == "still here\n"  # the connection lives
    assert wait_gone("gpuws-flood-output") == []


async def test_a_streamed_line_past_the_cap_is_an_error(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd, name="gpu1")) as conn:
        runner = SshRunner(conn, max_line=64 * 1024)
        lines: list[str] = []
        with pytest.raises(RemoteOutputTooLarge, match="a line longer than 65536 bytes"):
            async for line in runner.stream(["sh", "-c", "echo first; head -c 1000000 /dev/zero | tr '\\0' x"]):
                lines.append(line)
        assert lines == ["first"]
        assert runner.budget.held == 0


def test_default_caps() -> None:
    assert DEFAULT_MAX_OUTPUT == 64 * 1024 * 1024 and DEFAULT_MAX_LINE == 1024 * 1024


async def test_one_budget_is_shared_by_the_commands_of_a_connection(sshd: SshdServer, isolated_home: Path,
                                                                   tmp_path: Path) -> None:
    """Two commands at once may not hold more than the connection's budget between them."""
    trust(sshd, isolated_home)
    release = tmp_path / "release"  # sshd runs on this machine: the commands see this file
    # Each writes 2 MB, then waits for `release`: neither can end before the other has written,
    # so they overlap by construction (not by a sleep); the test releases them after the first ends.
    half = ["sh", "-c", "head -c 2000000 /dev/zero | tr '\\000' x; i=0; "
            f"while [ ! -e {release} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done"]
    async with HostConnection(key_profile(sshd, name="gpu1")) as conn:
        runner = SshRunner(conn, max_output=3 * 1024 * 1024)
        runs = [asyncio.ensure_future(runner.run(half)) for _ in range(2)]
        done, _ = await asyncio.wait(runs, return_when=asyncio.FIRST_COMPLETED)
        # The first to end is the one refused: 4 MB held at once is over the 3 MiB budget.
        assert [isinstance(run.exception(), RemoteOutputTooLarge) for run in done] == [True]
        release.touch()
        results = await asyncio.gather(*runs, return_exceptions=True)
        assert sum(isinstance(r, RemoteOutputTooLarge) for r in results) == 1
        assert runner.budget.held == 0


async def test_output_is_counted_in_bytes_and_stderr_too(sshd: SshdServer, isolated_home: Path) -> None:
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd, name="gpu1")) as conn:
        runner = SshRunner(conn, max_output=1024 * 1024)
        # 600,000 two-byte characters: 1.2 MB, though only 600,000 characters.
        wide = ["sh", "-c", "yes é | head -c 1200000 >&2"]
        with pytest.raises(RemoteOutputTooLarge, match="an error output longer than 1 MiB"):
            await runner.run(wide)
        # A first stderr line of any length is not buffered whole (it is counted like the rest).
        with pytest.raises(RemoteOutputTooLarge):
            await runner.run(["sh", "-c", "head -c 3000000 /dev/zero | tr '\\000' x >&2"])


async def test_a_flooding_prometheus_is_cut_off_by_the_same_budget() -> None:
    """Issue 28: one byte budget for every remote read path, HTTP answers included."""
    import http.server
    import threading

    from gpuws.remote.prometheus import PrometheusClient, PrometheusError

    class Flood(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            with contextlib.suppress(OSError):  # the client stopped reading
                self.wfile.write(b'{"status": "success", "data": {"result": [' + b"0," * 5_000_000)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flood)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        async with PrometheusClient(f"http://127.0.0.1:{server.server_address[1]}", name="lab",
                                    max_output=1024 * 1024) as client:
            with pytest.raises(PrometheusError, match="answered more than 1 MiB"):
                await client.query("up")
            assert client.budget.held == 0
    finally:
        server.shutdown()
        server.server_close()


async def test_one_command_can_take_a_tighter_cap_from_the_connection_budget(
    sshd: SshdServer, isolated_home: Path
) -> None:
    """A per-command `max_output` stops that command early; its bytes still count on the connection."""
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd, name="gpu1")) as conn:
        runner = SshRunner(conn, max_output=3 * 1024 * 1024)
        with pytest.raises(RemoteOutputTooLarge, match="an output longer than 1 MiB"):
            await runner.run(FLOOD, max_output=1024 * 1024)
        assert runner.budget.held == 0
        # A per-command cap above the connection's is the connection's.
        with pytest.raises(RemoteOutputTooLarge, match="an output longer than 3 MiB"):
            await runner.run(FLOOD, max_output=DEFAULT_MAX_OUTPUT)
        assert (await runner.run(["echo", "ok"], max_output=16)).stdout == "ok\n"
        assert runner.budget.held == 0


@pytest.mark.parametrize("flood", ["yes '<gpu><product_name>NVIDIA H100</product_name></gpu>'",
                                   "yes x >&2"])
async def test_telemetry_reads_a_flooding_nvidia_smi_under_a_small_cap(
    sshd: SshdServer, isolated_home: Path, tmp_path: Path, flood: str
) -> None:
    """`nvidia-smi -q -x` and `--query-gpu` answers are small: a host flooding them is stopped at
    4 MiB (issue 28: `gpuws watch` held up to the whole 64 MiB connection budget per reconnect)."""
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n{flood} | head -c 100000000\n")
    script.chmod(0o755)
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd, name="gpu1")) as conn:
        runner = SshRunner(conn)
        stream = TelemetryStream(runner, prefer="nvidia-smi", nvidia_smi=str(script), measure_skew=False)
        with pytest.raises(RemoteOutputTooLarge, match="longer than 4 MiB"):
            async with stream:
                async for _ in stream:
                    pass
        assert runner.budget.held == 0
