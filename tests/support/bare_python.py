"""A python3 with nothing but the standard library, like a bare GPU host's.

Debian's /usr/bin/python3 is not bare on a machine with the test packages: websockify depends on
python3-numpy. A venv of it (no system site-packages) is.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

SYSTEM_PYTHON = "/usr/bin/python3"


def make_bare_python(where: Path) -> str:
    """Create a venv of Debian's python3 under `where` and return its interpreter's path."""
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True)
    return str(where / "bin" / "python3")
