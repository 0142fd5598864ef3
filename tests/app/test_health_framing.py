"""The health script's framing, run by a real `sh` against an `nvidia-smi` that prints a real
capture without its final newline (issue 32: the end marker was glued to `</nvidia_smi_log>` and
health said "XML is truncated" where `probe` read the same output fine)."""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path

import pytest

from gpuws.app.health import check_health
from gpuws.core.health import HealthVerdict
from gpuws.core.runner import LocalRunner
from gpuws.remote.probe import probe
from tests.support.real_fixtures import REAL_FIXTURES

CAPTURE = REAL_FIXTURES / "nvidia-smi-xml" / "tesla-p100-pcie-x2-v8.xml"


def _runner(tmp_path: Path, final_newline: bool) -> LocalRunner:
    """A runner whose PATH starts with a fake `nvidia-smi` printing the real capture for `-q -x`
    (and nothing, successfully, for anything else)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    xml = tmp_path / "capture.xml"
    xml.write_text(CAPTURE.read_text().rstrip("\n") + ("\n" if final_newline else ""))
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f'#!/bin/sh\nif [ "$1" = "-q" ]; then cat {shlex.quote(str(xml))}; fi\nexit 0\n')
    fake.chmod(0o755)
    return LocalRunner({**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"})


@pytest.mark.parametrize("final_newline", [True, False], ids=["with-final-newline", "without"])
def test_health_reads_nvidia_smi_output_with_or_without_a_final_newline(tmp_path: Path, final_newline: bool) -> None:
    runner = _runner(tmp_path, final_newline)
    health = asyncio.run(check_health(runner, "box"))
    assert not [f for f in health.findings if f.check == "nvidia-smi"], health.findings
    assert [g.name for g in health.gpus] == ["Tesla P100-PCIE-12GB", "Tesla P100-PCIE-12GB_2"]
    assert health.driver_version == "375.66"
    # Whatever the kernel log of this machine says, the GPUs themselves read healthy.
    assert {g.verdict for g in health.gpus} <= {HealthVerdict.HEALTHY, HealthVerdict.INCONCLUSIVE}
    inventory = asyncio.run(probe(runner))  # the same output, read by probe
    assert [g.name for g in inventory.gpus] == [g.name for g in health.gpus]
