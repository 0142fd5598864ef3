"""The viewer gets the VNC password through a 0600 file that is gone once the viewer is done."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gpuws.app.desktop import DesktopSession, launch_viewer
from gpuws.core.desktop import RunningDesktop, Viewer, obfuscated_password

# Stands in for vncviewer's `-passwd FILE`: reports the file's mode and whether it holds the password.
READER = """
import os, stat, sys
path, expected, out = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3]
mode = stat.S_IMODE(os.stat(path).st_mode)
with open(out, "w") as f:
    f.write(f"{mode:o} {open(path, 'rb').read() == expected}")
"""


class _Tunnel:
    local_port = 5999
    url = "vnc://127.0.0.1:5999"


def test_password_file_is_0600_and_removed(tmp_path: Path) -> None:
    password = "s3cretPw"
    report = tmp_path / "report.txt"
    session = DesktopSession(RunningDesktop(display=1, port=5901, reused=False), _Tunnel(), password)  # type: ignore[arg-type]
    assert password not in repr(session)

    def find(port: int, password_file: str) -> Viewer:
        assert port == 5999
        argv = [sys.executable, "-c", READER, password_file, obfuscated_password(password).hex(), str(report)]
        return Viewer(argv, True, "test viewer")

    launched: Any = launch_viewer(session, find)
    assert launched is not None and launched.password_file is not None
    path = Path(launched.password_file)
    launched.process.wait(30)
    assert report.read_text() == "600 True"
    assert launched.cleanup() is True  # the viewer exited: the file goes
    assert not path.exists()
