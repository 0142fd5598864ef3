"""`gpuws watch` against a host that floods its output keeps its memory bounded (issue 28).

A real sshd whose `nvidia-smi` (and `python3`, so the agent path floods too) prints 300 MB of
valid-looking XML, one 300 MB line, or 200 MB on stderr. `gpuws watch` runs as a child process and
its peak RSS is read from the kernel (wait4's ru_maxrss), over several reconnects.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.paths import known_hosts_path
from gpuws.core.profiles import ProfileStore
from tests.support.sshd import REPO_ROOT, SshdServer

pytestmark = pytest.mark.sshd

PEAK_LIMIT_KIB = 150 * 1024

_XML_FLOOD = ("printf '<?xml version=\"1.0\" ?>\\n<nvidia_smi_log>\\n'; "
              "yes '<gpu id=\"00000000:01:00.0\"><product_name>NVIDIA H100</product_name></gpu>' "
              "| head -c 300000000")
FLOODS = {
    "xml": _XML_FLOOD,
    "one-line": "head -c 300000000 /dev/zero | tr '\\000' x",
    "stderr": "head -c 200000000 /dev/zero | tr '\\000' x >&2",
}


def flooding_host(tmp_path: Path, flood: str) -> SshdServer:
    """A real sshd whose nvidia-smi and python3 print `flood` (a shell snippet) and exit 0."""
    bin_dir = tmp_path / "flood" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("nvidia-smi", "python3"):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\ncat >/dev/null 2>&1 </dev/null\n{flood}\n")
        script.chmod(0o755)
    server = SshdServer(tmp_path / "sshd", env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    server.start()
    ProfileStore().add(HostProfile(name="bad", host="127.0.0.1", port=server.port, user=server.user,
                                   auth=AuthMethod.KEY, key_path=str(server.client_key)))
    known_hosts_path().write_text(server.known_hosts_line())
    return server


# The kernel's peak RSS of a process includes the image it was forked from (Linux keeps the
# high-water mark of the pre-exec memory): gpuws forked straight from a test worker that has
# grown to hundreds of MiB would be charged for the worker. So a small launcher, itself forked
# from the worker, forks gpuws and reports gpuws' own peak (wait4's ru_maxrss) on a pipe.
_LAUNCHER = """
import os, sys
report = int(os.environ.pop("GPUWS_TEST_PEAK_FD"))
pid = os.fork()
if pid == 0:
    os.close(report)
    os.execv(sys.executable, [sys.executable, "-m", "gpuws", *sys.argv[1:]])
_, status, usage = os.wait4(pid, 0)
os.write(report, str(usage.ru_maxrss).encode())
sys.exit(os.waitstatus_to_exitcode(status))
"""


def peak_rss_kib(argv: list[str]) -> tuple[int, int, str]:
    """Run `gpuws ARGV` as a child; its exit status, peak RSS (KiB, from the kernel) and stderr."""
    read_end, write_end = os.pipe()
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), GPUWS_TEST_PEAK_FD=str(write_end))
    try:
        with subprocess.Popen([sys.executable, "-c", _LAUNCHER, *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env, pass_fds=(write_end,)) as launcher:
            os.close(write_end)
            write_end = -1
            assert launcher.stderr is not None
            err = launcher.stderr.read().decode("utf-8", "replace")
            status = launcher.wait()
        with os.fdopen(read_end, "rb") as report:
            read_end = -1
            peak = int(report.read() or b"0")
    finally:
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)
    return status, peak, err


@pytest.mark.parametrize("kind", sorted(FLOODS))
def test_watch_against_a_flooding_host_stays_bounded(tmp_path: Path, kind: str) -> None:
    server = flooding_host(tmp_path, FLOODS[kind])
    try:
        # A few reconnects within the timeout: memory must not grow with each one either.
        status, peak, err = peak_rss_kib(["watch", "bad", "--count", "2", "--interval", "1",
                                          "--reconnect-timeout", "6"])
    finally:
        server.stop()
    assert "Traceback" not in err
    assert status in (1, 5), err
    assert peak < PEAK_LIMIT_KIB, f"peak RSS {peak // 1024} MiB"
