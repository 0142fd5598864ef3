"""A real Xvfb X server for tests that need a real X11 window with a real screen size.

The server picks its own free display number (`-displayfd`), so tests on parallel workers never
race for one, as `xvfb-run -a` does (it guesses a number from the lock files in /tmp).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
from collections.abc import Iterator

from tests.support.processes import end

XVFB = shutil.which("Xvfb")


@contextlib.contextmanager
def xvfb(width: int, height: int, timeout_s: float = 30.0) -> Iterator[str]:
    """Run `Xvfb` with one screen of width x height (24-bit); yields its DISPLAY (":N")."""
    assert XVFB is not None, "needs Xvfb (scripts/install-deps.sh installs xvfb)"
    read_end, write_end = os.pipe()
    server = subprocess.Popen(
        [XVFB, "-displayfd", str(write_end), "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp",
         "-noreset"],
        pass_fds=(write_end,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(write_end)
    try:
        number = b""
        while not number.endswith(b"\n"):
            ready, _, _ = select.select([read_end], [], [], timeout_s)
            chunk = os.read(read_end, 16) if ready else b""
            if not chunk:
                server.kill()
                _, err = server.communicate()
                raise RuntimeError(f"Xvfb did not start: {err.decode(errors='replace')[-500:]}")
            number += chunk
        yield f":{int(number)}"
    finally:
        os.close(read_end)
        end(server)
        if server.stderr is not None:
            server.stderr.close()
