"""Streaming telemetry from one host over a `CommandRunner`.

`TelemetryStream` first tries the on-host NVML agent (`python3 -` with the agent script on
stdin; protocol 2: static facts once, then only changed values per sample, decoded by
`gpuws.core.telemetry.agent_wire.AgentDecoder`); when the host has no python3 or no working NVML it falls back
to streaming `nvidia-smi --query-gpu=... --format=csv,noheader,nounits -lms N`. Either way it
yields `SampleBatch`es of the same `GpuSample` model and says which source is in use.

Agent timestamps come from the host's clock; the host/local clock difference is measured at
start (`date +%s.%N`, the exchange with the shortest round trip, half of it as the offset) and
removed. nvidia-smi rows are stamped with the local receive time, so need no correction.

Cancelling the iteration (or closing it) stops the remote process: the runner kills it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from importlib import resources
from typing import Any, Final, Literal

from gpuws.core.errors import GpuwsError, NoNvidiaDriver, ParseError
from gpuws.core.nvsmi.query_csv import parse_query_csv, parse_query_line
from gpuws.core.nvsmi.xml_inventory import is_simulated_xml
from gpuws.core.runner import CommandRunner, CommandTimeout
from gpuws.core.telemetry.agent_wire import PROTOCOL, AgentDecoder
from gpuws.core.telemetry.sample import (
    SOURCE_NVIDIA_SMI,
    SOURCE_NVML,
    GpuSample,
    SampleBatch,
)
from gpuws.core.telemetry.smi_query import QUERY_FIELDS, invalid_field_in, sample_from_query_row
from gpuws.remote.budget import SMALL_ANSWER

Prefer = Literal["auto", "nvml", "nvidia-smi"]
PREFER_CHOICES: Final = ("auto", "nvml", "nvidia-smi")
MIN_HZ: Final = 0.2
MAX_HZ: Final = 20.0
HELLO_TIMEOUT_S: Final = 30.0  # NVML init on a large host can take seconds
ONE_SHOT_TIMEOUT_S: Final = 30.0


class TelemetryError(GpuwsError):
    """Telemetry could not be read from a host."""


class TelemetryStreamEnded(TelemetryError):
    """The remote sampler stopped (connection dropped or the process died)."""


class TelemetryNoDriver(TelemetryError, NoNvidiaDriver):
    """nvidia-smi is missing on the host: retrying will not help."""


class AgentUnavailable(TelemetryError):
    """The NVML agent cannot run on this host (no python3, no pynvml, NVML not working)."""


def agent_source() -> str:
    """The agent script sent to the host's python3."""
    return resources.files("gpuws.agent").joinpath("telemetry_agent.py").read_text(encoding="utf-8")


async def measure_clock_skew(runner: CommandRunner, tries: int = 3) -> float:
    """Host clock minus local clock, in seconds, from the quickest of `tries` round trips.

    Skews smaller than that round trip are reported as 0: they are within the measurement's error.
    """
    best: tuple[float, float] | None = None  # (rtt, skew)
    for _ in range(tries):
        before = time.time()
        result = await runner.run(["date", "+%s.%N"], timeout=10)
        after = time.time()
        host_t = _parse_date(result.stdout) if result.ok else None
        if host_t is None:
            continue
        rtt = after - before
        if best is None or rtt < best[0]:
            best = (rtt, host_t - (before + after) / 2)
    if best is None:
        return 0.0
    rtt, skew = best
    # `date` runs late in the round trip (after sshd and the shell start), so the midpoint rule is
    # biased by up to half the round trip: a skew within the round trip is below what this can
    # measure, and correcting by it would shift every timestamp by that bias.
    return skew if abs(skew) > rtt else 0.0


def _parse_date(text: str) -> float | None:
    value = text.strip()
    try:
        return float(value)
    except ValueError:
        # A `date` without %N (BusyBox, BSD) prints "1700000000.N" or "1700000000.%N".
        head = value.split(".", 1)[0]
        return float(head) if head.isdigit() else None


class TelemetryStream:
    """Async iterator of `SampleBatch` from one host.

    Use as `async with stream: async for batch in stream: ...` so that leaving the loop early
    (break, error, cancel) stops the remote sampler at once rather than when garbage is collected.
    """

    def __init__(
        self,
        runner: CommandRunner,
        hz: float = 1.0,
        prefer: Prefer | str = "auto",
        *,
        python: str = "python3",
        nvidia_smi: str = "nvidia-smi",
        simulated: bool | None = None,
        measure_skew: bool = True,
        stored_rows: bool = True,
    ) -> None:
        """`stored_rows`: batches carry their rows as the telemetry store keeps them; off for a
        reader with no store (`gpuws watch`), which then imports no numpy."""
        if not MIN_HZ <= hz <= MAX_HZ:
            raise TelemetryError(f"sample rate must be between {MIN_HZ:g} and {MAX_HZ:g} Hz, not {hz:g}")
        if prefer not in PREFER_CHOICES:
            raise TelemetryError(f"source must be one of {', '.join(PREFER_CHOICES)}, not {prefer!r}")
        self.runner = runner
        self.hz = hz
        self.prefer = prefer
        self.python = python
        self.nvidia_smi = nvidia_smi
        self._simulated_hint = simulated
        self._measure_skew = measure_skew
        self._stored_rows = stored_rows
        self.source: str | None = None  # "nvml" or "nvidia-smi" once streaming
        self.simulated = bool(simulated)
        self.fallback_reason: str | None = None  # why the agent was not used
        self.skew_s = 0.0  # host clock minus local clock
        self.driver: str | None = None
        self._gpu_count = 1  # rows per nvidia-smi period, from the first one-shot query
        self._batches: AsyncGenerator[SampleBatch, None] | None = None

    def __aiter__(self) -> AsyncIterator[SampleBatch]:
        if self._batches is None:
            self._batches = self._run()
        return self._batches

    async def aclose(self) -> None:
        """Stop streaming (the runner stops the remote process)."""
        if self._batches is not None:
            await self._batches.aclose()

    async def __aenter__(self) -> TelemetryStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self) -> AsyncGenerator[SampleBatch, None]:
        if self.prefer != SOURCE_NVIDIA_SMI:
            agent = self._agent_batches()
            try:
                async for batch in agent:
                    yield batch
                return
            except AgentUnavailable as exc:
                if self.prefer == SOURCE_NVML:
                    raise
                self.fallback_reason = str(exc)
            finally:
                await agent.aclose()
        smi = self._smi_batches()
        try:
            async for batch in smi:
                yield batch
        finally:
            await smi.aclose()

    # --- the NVML agent ---------------------------------------------------------------------

    async def _agent_batches(self) -> AsyncGenerator[SampleBatch, None]:
        if self._measure_skew:
            self.skew_s = await measure_clock_skew(self.runner)
        argv = [self.python, "-", "--hz", f"{self.hz:g}"]
        lines = self.runner.stream(argv, input=agent_source()).__aiter__()
        try:
            hello = await self._agent_hello(lines)
            self.source = SOURCE_NVML
            self.simulated = hello.get("simulated") is True
            self.driver = hello["driver"] if isinstance(hello.get("driver"), str) else None
            decoder = AgentDecoder(hello.get("fields") or [], skew_s=self.skew_s, simulated=self.simulated,
                                   stored_rows=self._stored_rows)
            feed = decoder.feed
            async for line in lines:
                if line.strip():
                    batch = feed(line)
                    if batch is not None:
                        yield batch
            raise TelemetryStreamEnded("the telemetry agent on the host stopped")
        finally:
            await _close(lines)

    async def _agent_hello(self, lines: AsyncIterator[str]) -> dict[str, Any]:
        while True:
            try:
                line = await asyncio.wait_for(lines.__anext__(), HELLO_TIMEOUT_S)
            except (StopAsyncIteration, FileNotFoundError):
                raise AgentUnavailable(f"the host's {self.python} did not run the telemetry agent") from None
            except TimeoutError:
                raise AgentUnavailable("the telemetry agent did not start in time") from None
            if not line.strip():
                continue
            try:
                message = _json_line(line)
            except ParseError as exc:
                raise AgentUnavailable(str(exc)) from None
            kind = message.get("type")
            if kind == "unavailable":
                reason = message.get("reason")
                raise AgentUnavailable(f"NVML unavailable on the host: {str(reason)[:200]}")
            if kind != "hello" or message.get("protocol") != PROTOCOL:
                raise AgentUnavailable("the telemetry agent spoke an unknown protocol")
            return message

    # --- the nvidia-smi fallback ------------------------------------------------------------

    async def _smi_batches(self) -> AsyncGenerator[SampleBatch, None]:
        usable, detect = asyncio.ensure_future(self._usable_fields()), asyncio.ensure_future(self._detect_simulated())
        try:
            fields, simulated = await asyncio.gather(usable, detect)
        finally:
            # gather leaves the other one running when one fails: it would go on reading the host.
            usable.cancel()
            detect.cancel()
        self.simulated = simulated
        self.source = SOURCE_NVIDIA_SMI
        query = [self.nvidia_smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
        period_ms = max(50, round(1000.0 / self.hz))
        lines = self.runner.stream([*query, "-lms", str(period_ms)]).__aiter__()
        pending: list[GpuSample] = []
        batch_t = 0.0
        try:
            async for line in lines:
                row = parse_query_line(line, fields)
                if row is None:
                    continue
                now = time.time()
                sample = sample_from_query_row(row, t=now, simulated=self.simulated)
                if sample is None:
                    continue
                if pending and any(p.gpu == sample.gpu for p in pending):
                    yield self._smi_batch(pending, batch_t)
                    pending = []
                if not pending:
                    batch_t = now
                sample.t = batch_t
                pending.append(sample)
                if len(pending) >= self._gpu_count:
                    yield self._smi_batch(pending, batch_t)
                    pending = []
            raise TelemetryStreamEnded("nvidia-smi on the host stopped streaming")
        finally:
            await _close(lines)

    def _smi_batch(self, samples: list[GpuSample], t: float) -> SampleBatch:
        return SampleBatch(t, samples, SOURCE_NVIDIA_SMI, self.simulated)

    async def _usable_fields(self) -> list[str]:
        """Run the query once: drop any field this driver refuses, and count the GPUs."""
        fields = list(QUERY_FIELDS)
        for _ in QUERY_FIELDS:
            argv = [self.nvidia_smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
            try:
                result = await self.runner.run(argv, timeout=ONE_SHOT_TIMEOUT_S, max_output=SMALL_ANSWER)
            except CommandTimeout:
                raise TelemetryError("nvidia-smi on the host did not answer in time") from None
            except FileNotFoundError:  # a LocalRunner; over SSH this is exit status 127
                raise TelemetryNoDriver("no NVIDIA driver found on the host (nvidia-smi is missing)") from None
            if result.ok:
                self._gpu_count = max(1, len(parse_query_csv(result.stdout, fields)))
                return fields
            output = f"{result.stdout}\n{result.stderr}"
            bad = invalid_field_in(output)
            if bad in fields and bad not in ("index", "uuid"):
                fields.remove(bad)
                continue
            if result.exit_status == 127 or "not found" in output.lower():
                raise TelemetryNoDriver("no NVIDIA driver found on the host (nvidia-smi is missing)")
            first = next((ln.strip() for ln in output.splitlines() if ln.strip()), "no output")
            raise TelemetryError(f"nvidia-smi failed on the host: {first[:200]}")
        raise TelemetryError("nvidia-smi on the host refused every telemetry field")

    async def _detect_simulated(self) -> bool:
        if self._simulated_hint is not None:
            return self._simulated_hint
        try:
            result = await self.runner.run([self.nvidia_smi, "-q", "-x"], timeout=ONE_SHOT_TIMEOUT_S,
                                           max_output=SMALL_ANSWER)
        except (CommandTimeout, FileNotFoundError):
            return False
        return result.ok and is_simulated_xml(result.stdout)


def _json_line(line: str) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        raise ParseError(f"telemetry agent sent a line that is not JSON: {line[:60]!r}") from None
    except RecursionError:  # json recurses per nesting level: "[[[[..." from a hostile host
        raise ParseError("telemetry agent sent a JSON line nested too deeply") from None
    if not isinstance(message, dict):
        raise ParseError("telemetry agent sent a JSON line that is not an object")
    return message


async def _close(lines: AsyncIterator[str]) -> None:
    aclose = getattr(lines, "aclose", None)
    if aclose is not None:
        await aclose()


def describe_source(stream: TelemetryStream) -> str:
    """One line for people: which source is in use (and why the agent is not)."""
    if stream.source is None:
        return "starting"
    if stream.source == SOURCE_NVML:
        return "NVML agent"
    why = f" ({stream.fallback_reason})" if stream.fallback_reason else ""
    return f"nvidia-smi{why}"
