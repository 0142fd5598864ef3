"""The health-check service both front ends call: run the passive checks on a host. Qt-free.

`check_health` runs the read-only script of `gpuws.core.health.collect` over the host's
connection and judges what it printed. `gpuws health`, `gpuws bench --check` and the window's
Health panel all go through here.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuws.core.health import HostHealth, evaluate, script_argv
from gpuws.core.runner import CommandRunner

DEFAULT_TIMEOUT_S = 10.0  # the "in under 10 seconds"
DCGM_TIMEOUT_S = 120.0  # dcgmi diag -r 1 takes seconds, its start-up sometimes more


async def check_health(runner: CommandRunner, host: str, *, expected: Mapping[str, object] | None = None,
                       cuda: str | None = None, dcgm: bool = False, timeout: float | None = None) -> HostHealth:
    """Run the passive health checks on the host behind `runner`; `CommandTimeout` past `timeout`."""
    limit = timeout if timeout is not None else (DCGM_TIMEOUT_S if dcgm else DEFAULT_TIMEOUT_S)
    result = await runner.run(script_argv(dcgm), timeout=limit)
    return evaluate(host, result.stdout, expected=expected, cuda=cuda)
