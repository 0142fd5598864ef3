"""Clipboard text beyond Latin-1 both ways between the RFB client and a real TigerVNC Xvnc, through
Extended Clipboard (UTF-8), with xclip as the host's clipboard user."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuws.core.rfb.decoders import CursorShape, UpdateResult
from gpuws.remote.rfb import RfbCallbacks, RfbClient
from tests.support.waiting import until
from tests.support.xvnc import xvnc

pytestmark = [pytest.mark.xdist_group("x-display")]
HOST_TEXT = "on the host: 3 € — 日本語 ✓\nsecond line"
LOCAL_TEXT = "copied here: Grüße → Ελληνικά 🙂\nline two"


async def test_utf8_text_goes_both_ways(tmp_path: Path) -> None:
    assert shutil.which("xclip"), "install the test packages (scripts/install-deps.sh test)"
    with xvnc(tmp_path) as server:
        client = await RfbClient.open("127.0.0.1", server.port, "")
        got: list[str] = []

        def ignore(_x: UpdateResult | CursorShape) -> None:
            return None

        reader = asyncio.ensure_future(client.run(RfbCallbacks(on_update=ignore, on_cursor=ignore,
                                                               on_clipboard=got.append)))
        xclip = None
        try:
            await until(lambda: client.clipboard_caps is not None)
            # Host -> here: xclip owns the host's CLIPBOARD, Xvnc announces it and sends it when asked.
            xclip = subprocess.Popen(["xclip", "-selection", "clipboard", "-loops", "3"], env=server.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            assert xclip.stdin is not None
            xclip.stdin.write(HOST_TEXT.encode())
            xclip.stdin.close()
            await until(lambda: HOST_TEXT in got)
            xclip.kill()
            xclip.wait()
            # Here -> host: Xvnc then owns the host's CLIPBOARD and hands xclip the text.
            client.send_clipboard(LOCAL_TEXT)

            async with asyncio.timeout(30):  # xclip waits while Xvnc asks this client for the text
                while await asyncio.to_thread(server.run, "xclip", "-o", "-selection", "clipboard") != LOCAL_TEXT:
                    await asyncio.sleep(0.05)
            assert not reader.done()
        finally:
            if xclip is not None and xclip.poll() is None:
                xclip.kill()
                xclip.wait()
            reader.cancel()
            await client.close()
