"""The one telemetry retry loop: a host's samples that ride through drops and reconnects.

`follow_telemetry` yields sample batches from a `TelemetryStream` over a connection (anything
with a `.runner`). When the stream is lost (the connection dropped, sshd restarted, the sampler
died) it yields one `StreamLost`, restarts the stream with backoff and yields `StreamBack` when
samples flow again. Both front ends read it: `gpuws watch` directly (it also revives the
connection once the connection's own retries gave up, and gives up itself past
`reconnect_timeout`: `ConnectionLost`), and the window through `TelemetryService.watch`, whose
host connection the Workspace keeps up instead (`revive=False`, no timeout). Failures retrying
cannot fix (auth, host keys, no driver, a source the host cannot provide) are raised at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Final

import asyncssh

from gpuws.core.errors import ConnectionLost
from gpuws.core.runner import CommandTimeout, raise_if_cancelling
from gpuws.core.states import ConnectionState
from gpuws.core.telemetry.sample import SampleBatch
from gpuws.remote.connection import HostUnreachable, NotConnected, ReconnectPolicy
from gpuws.remote.ssh_runner import RemoteCommandError
from gpuws.remote.telemetry import TelemetryStream, TelemetryStreamEnded, describe_source

__all__ = ["FeedEvent", "StreamBack", "StreamLost", "TelemetryStream", "describe_source", "follow_telemetry"]

DEFAULT_RECONNECT_TIMEOUT_S: Final = 300.0
# A lost stream is retried at most this far apart, so samples resume soon after the host is back.
RETRY_POLICY: Final = ReconnectPolicy(base_delay=0.5, max_delay=5.0, jitter=0.2)

# What a dropped link or a restarted host looks like from here: worth retrying.
_TRANSIENT = (TelemetryStreamEnded, RemoteCommandError, HostUnreachable, NotConnected, CommandTimeout,
              TimeoutError, OSError, EOFError, asyncssh.Error)
# The connection's own retries are over (or it never came up): reconnect it ourselves.
_GAVE_UP = (ConnectionState.UNREACHABLE, ConnectionState.DISCONNECTED)


@dataclass(frozen=True)
class StreamLost:
    """Samples stopped at `t` (epoch seconds) because of `reason`."""

    t: float
    reason: str


@dataclass(frozen=True)
class StreamBack:
    """Samples flow again from `t` (epoch seconds)."""

    t: float


FeedEvent = SampleBatch | StreamLost | StreamBack


async def follow_telemetry(
    connection: Any,
    *,
    hz: float,
    prefer: str = "auto",
    simulated: bool | None = None,
    reconnect_timeout: float | None = DEFAULT_RECONNECT_TIMEOUT_S,
    policy: ReconnectPolicy = RETRY_POLICY,
    stream_factory: Callable[..., TelemetryStream] = TelemetryStream,
    clock: Callable[[], float] = time.time,
    on_stream: Callable[[TelemetryStream], None] | None = None,
    revive: bool = True,
) -> AsyncGenerator[FeedEvent, None]:
    """Batches of `connection`'s host until cancelled, with loss/back events across reconnects.

    `on_stream` is told each new stream (to describe its source to people). `reconnect_timeout`
    None: never give up. `revive`: reconnect the connection once its own retries gave up.
    """
    lost: StreamLost | None = None
    attempt = 0
    while True:
        reason = "the telemetry stream ended"
        stream = stream_factory(connection.runner, hz=hz, prefer=prefer, simulated=simulated)
        if on_stream is not None:
            on_stream(stream)
        try:
            # While the stream is lost, an attempt may not outlast the reconnect timeout.
            deadline = None if lost is None or reconnect_timeout is None else (
                asyncio.get_running_loop().time() + _left(lost, clock, reconnect_timeout))
            async with asyncio.timeout(deadline) as limit, stream:
                async for batch in stream:
                    if lost is not None:
                        lost, attempt = None, 0
                        limit.reschedule(None)
                        yield StreamBack(clock())
                    yield batch
        except _TRANSIENT as exc:
            reason = str(exc) or type(exc).__name__
        raise_if_cancelling()  # Ctrl-C (or an unwatch) ends it even when a stream's cleanup swallowed it
        if lost is None:
            lost = StreamLost(clock(), reason[:300])
            yield lost
        left = math.inf if reconnect_timeout is None else _left(lost, clock, reconnect_timeout)
        if left <= 0:
            raise ConnectionLost(f"{connection.profile.name}: no telemetry for {reconnect_timeout:g} s "
                                 f"(last: {lost.reason})")
        _raise_failure(connection)
        attempt += 1
        await asyncio.sleep(min(policy.delay(attempt), left))
        _raise_failure(connection)
        if revive and getattr(connection, "state", None) in _GAVE_UP:
            with contextlib.suppress(HostUnreachable, NotConnected, RemoteCommandError, OSError):
                await connection.connect()


def _raise_failure(connection: object) -> None:
    """The connection's own reconnect met a wrong key or a refused login: waiting would not change
    that, and the caller's exit status (or state) should say which it was."""
    failure = getattr(connection, "failure", None)
    if failure is not None:
        raise failure


def _left(lost: StreamLost, clock: Callable[[], float], reconnect_timeout: float) -> float:
    return reconnect_timeout - (clock() - lost.t)
