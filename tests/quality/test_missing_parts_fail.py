"""Issue 36: in the test command (GPUWS_TEST_SESSION=1) a test whose part is missing fails with
the reason; outside it, it is skipped with the reason. Checked on real tests of the suite, run in
a pytest of their own with a PATH that holds neither `ssh` nor Xvfb."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NEEDS_SSH = "tests/core/test_sshconfig_parity.py::test_resolution_equals_ssh_dash_g_field_by_field[0]"
NEEDS_XVFB = "tests/ui/test_window_fits_screen.py::test_every_view_stays_within_a_900x600_screen[False-False]"


def run_alone(test: str, tmp_path: Path, *, in_test_command: bool) -> str:
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "GPUWS_TEST_SESSION"}
    env.update(PATH=str(empty), PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
    if in_test_command:
        env["GPUWS_TEST_SESSION"] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "-rfs", "--basetemp",
                           str(tmp_path / "t"), test], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("test", "reason"), [(NEEDS_SSH, "no OpenSSH client `ssh`"), (NEEDS_XVFB, "no Xvfb")])
def test_a_missing_part_fails_in_the_test_command_and_skips_outside_it(test: str, reason: str,
                                                                       tmp_path: Path) -> None:
    # Found: no Xvfb or no `ssh` skipped silently in the test command.
    inside = run_alone(test, tmp_path, in_test_command=True)
    assert "1 error" in inside and reason in inside, inside[-2000:]  # failed at setup, with the reason
    outside = run_alone(test, tmp_path, in_test_command=False)
    assert "1 skipped" in outside and reason in outside, outside[-2000:]
