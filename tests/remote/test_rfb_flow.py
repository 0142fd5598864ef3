"""The RFB client's flow control against a real TigerVNC Xvnc: it asks for what vncviewer asks for,
ContinuousUpdates and Fence, so the server pushes each change without a request per update, and the
server's fences (its measure of how fast this client reads) are answered."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from gpuws.core.rfb.decoders import CursorShape, UpdateResult
from gpuws.remote.rfb import RfbCallbacks, RfbClient
from tests.support.waiting import until
from tests.support.xvnc import xvnc

pytestmark = [pytest.mark.xdist_group("x-display")]


async def test_changes_arrive_without_a_request_each_and_fences_are_answered(tmp_path: Path) -> None:
    assert shutil.which("xsetroot"), "install the test packages (scripts/install-deps.sh test)"
    with xvnc(tmp_path) as server:
        client = await RfbClient.open("127.0.0.1", server.port, "")
        updates: list[UpdateResult] = []

        def cursor(_shape: CursorShape) -> None:
            return None

        reader = asyncio.ensure_future(client.run(RfbCallbacks(on_update=updates.append, on_cursor=cursor,
                                                               on_clipboard=lambda _t: None)))
        try:
            await until(lambda: client.continuous and client.fences_answered > 0 and updates, poll=0.02)
            fb = client.framebuffer
            assert fb is not None
            asked = client.requests_sent
            # The root window's colour changes five times; each new colour reaches the framebuffer.
            for colour in ("#102030", "#405060", "#708090", "#a0b0c0", "#d0e0f0"):
                await asyncio.to_thread(server.run, "xsetroot", "-solid", colour)
                bgr = [int(colour[5:7], 16), int(colour[3:5], 16), int(colour[1:3], 16)]
                await until(lambda bgr=bgr: fb.pixels[300, 400, :3].tolist() == bgr, poll=0.02)  # type: ignore[misc]
            assert client.requests_sent == asked, "an update was asked for: continuous updates are off"
            assert not reader.done()
        finally:
            reader.cancel()
            await client.close()

