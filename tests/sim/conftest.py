"""Fixtures for the simulated GPU host tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuws.sim import nvidia_smi
from gpuws.sim.state import SimStateStore
from tests.support.real_fixtures import REAL_FIXTURES

FIXTURES = REAL_FIXTURES


@pytest.fixture
def sim_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimStateStore:
    """A fresh default simulated host whose state dir is $GPUWS_SIM_STATE."""
    state_dir = tmp_path / "simstate"
    monkeypatch.setenv("GPUWS_SIM_STATE", str(state_dir))
    store = SimStateStore(state_dir)
    store.load()
    return store


SmiRunner = Callable[..., tuple[int, str, str]]


@pytest.fixture
def smi(sim_store: SimStateStore, capsys: pytest.CaptureFixture[str]) -> SmiRunner:
    """Run the emulator in-process: smi("-L") -> (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = nvidia_smi.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run
