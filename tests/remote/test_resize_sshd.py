"""MIG resize end to end through a real OpenSSH sshd with the emulator as `nvidia-smi`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.remote.connection import HostConnection
from gpuws.remote.resize import ROLLED_BACK, TARGET_VERIFIED, MigResizer
from gpuws.sim.state import Fault, SimStateStore
from tests.remote.helpers import key_profile, trust
from tests.support.sshd import SshdServer

pytestmark = [pytest.mark.sshd, pytest.mark.slow]


async def test_resize_over_ssh_verifies_and_rolls_back(sshd: SshdServer, isolated_home: Path, tmp_path: Path) -> None:
    store = SimStateStore(tmp_path / "simhost" / "state")
    with store.update() as state:
        for gpu in state.gpus:
            gpu.set_load(0.0)
    trust(sshd, isolated_home)
    async with HostConnection(key_profile(sshd)) as conn:
        resizer = MigResizer(conn.runner)
        result = await resizer.resize(0, "2x3g.40gb")  # GPU 0: the H100 80GB
        assert result.outcome == TARGET_VERIFIED, result.log
        assert (await resizer.read_state(0)).mig_device_names == ("3g.40gb", "3g.40gb")
        with store.update() as state:
            state.gpu(0).inject_fault(Fault.SILENT_NOOP)
        failed = await resizer.resize(0, "4g.40gb,3g.40gb")
        assert failed.outcome == ROLLED_BACK and failed.after is not None
        assert failed.after.describe() == "2x3g.40gb"
        assert (await resizer.resize(0, "full")).outcome == TARGET_VERIFIED
