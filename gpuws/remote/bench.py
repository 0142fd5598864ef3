"""Running the on-host benchmark over a `CommandRunner`: send, stream, cancel, clean up.

The runner (the package `gpuws/agent/bench/`, with `bench_kernels.cu` for the nvcc backend) goes
to the host as one zip (a zipapp built in memory, `runner_zip`), base64 on stdin, into a fresh
`mktemp -d` directory that a small POSIX sh wrapper removes when the run ends; the host's `python3`
decodes it and runs it (`python3 gpuws_bench.pyz`), so nothing is installed there. A killed process
group cannot run its own traps, so after a cancel or timeout the directory the wrapper announced is
also removed with a second command. Nothing stays on the host.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import re
import zipfile
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from typing import Any

from gpuws.core.bench.results import BenchRun, now_iso
from gpuws.core.errors import GpuwsError
from gpuws.core.runner import CommandRunner

EventCallback = Callable[[dict[str, Any]], None]
MODES = ("quick", "full", "check")
# "check" is the quick run sized so that `gpuws bench NAME --check` (or the window's "Check this
# host") is done in under two minutes, connection and report included.
DEFAULT_TIMEOUT = {"quick": 90.0, "full": 330.0, "check": 85.0}
# Time beyond the runner's own limit for sending it, nvcc, and its last words.
GRACE_S = 30.0
CLEANUP_TIMEOUT_S = 15.0
PYTHON_RE = re.compile(r"^[A-Za-z0-9_./+-]{1,200}$")
WORKDIR_RE = re.compile(r"^/(?:[A-Za-z0-9._-]+/)*gpuws-bench\.[A-Za-z0-9]{6,}$")

# $1 = the Python interpreter, $2 = byte length of the base64 zip on stdin. The host's own Python
# decodes it (no base64 tool needed). The runner is started in the background so that a TERM/HUP
# to this shell is handled at once.
WRAPPER = r"""
py=$1; n=$2; shift 2
command -v "$py" >/dev/null 2>&1 || { printf '{"type":"fatal","reason":"no %s on the host"}\n' "$py"; exit 127; }
d=$(mktemp -d "${TMPDIR:-/tmp}/gpuws-bench.XXXXXXXX") || { echo '{"type":"fatal","reason":"mktemp failed"}'; exit 97; }
pid=
trap 'rm -rf "$d"' EXIT
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; exit 143' TERM HUP INT
printf '{"type":"workdir","path":"%s"}\n' "$d"
head -c "$n" | "$py" -c 'import base64, sys; sys.stdout.buffer.write(base64.b64decode(sys.stdin.buffer.read()))' \
  > "$d/gpuws_bench.pyz" || { echo '{"type":"fatal","reason":"could not write the runner to the host"}'; exit 97; }
"$py" "$d/gpuws_bench.pyz" --json --workdir "$d" "$@" </dev/null &
pid=$!
wait "$pid"
"""
# The package's name inside the zip (its modules import each other relatively).
ZIP_PACKAGE = "gpuws_bench"
ZIP_MAIN = f"import sys\n\nfrom {ZIP_PACKAGE}.runner import main\n\nsys.exit(main())\n"


class BenchError(GpuwsError):
    """The benchmark could not be started on the host."""


@cache
def runner_zip() -> bytes:
    """The benchmark runner as one zipapp: the modules and CUDA C source of `gpuws.agent.bench` as
    the package `gpuws_bench`, and a `__main__.py` that runs it. Built in memory, once."""
    package = resources.files("gpuws.agent.bench")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("__main__.py", ZIP_MAIN)
        for item in sorted(package.iterdir(), key=lambda p: p.name):
            if item.is_file() and item.name.endswith((".py", ".cu")):
                archive.writestr(f"{ZIP_PACKAGE}/{item.name}", item.read_bytes())
    return out.getvalue()


def runner_payload() -> str:
    """What goes on the wrapper's stdin: the zip in base64 (the runners take text)."""
    return base64.b64encode(runner_zip()).decode("ascii")


def remote_argv(mode: str, timeout: float, expected: Mapping[str, Any] | None,
                payload_bytes: int, extra: tuple[str, ...] = (), python: str = "python3") -> list[str]:
    """The argv run on the host (a fixed sh script; every value is a separate argument)."""
    if not PYTHON_RE.match(python) or python.startswith("-"):
        raise BenchError(f"not a usable interpreter name: {python!r}")
    args = [f"--{mode}", "--timeout", f"{timeout:g}"]
    if expected:
        args += ["--expected", json.dumps(dict(expected), separators=(",", ":"))]
    return ["sh", "-c", WRAPPER, "gpuws-bench", python, str(payload_bytes), *args, *extra]


async def run_benchmark(
    runner: CommandRunner,
    mode: str = "quick",
    *,
    host: str = "host",
    expected: Mapping[str, Any] | None = None,
    on_event: EventCallback | None = None,
    timeout: float | None = None,
    extra_args: tuple[str, ...] = (),
    python: str = "python3",
) -> BenchRun:
    """Run the benchmark on the host behind `runner` and return the run (not yet scored or saved).

    `on_event` gets every runner event (progress, log, result, summary) as it arrives. An
    overall `timeout` (default by mode) bounds the whole run: the runner stops itself at that
    limit, and the command is killed `GRACE_S` later if it has not. On timeout the run comes back
    with `timed_out=True`; on cancel the remote process group is stopped, its temporary
    directory removed, and `CancelledError` propagates. `python` is the host's interpreter
    (a name on its PATH or an absolute path).
    """
    if mode not in MODES:
        raise BenchError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    limit = float(timeout if timeout is not None else DEFAULT_TIMEOUT[mode])
    if limit <= 0:
        raise BenchError("timeout must be positive")
    payload = runner_payload()
    argv = remote_argv("quick" if mode == "check" else mode, limit, expected, len(payload), extra_args, python)
    run = BenchRun(host=host, mode=mode, started_at=now_iso(), expected=dict(expected) if expected else None)
    workdir: list[str] = []

    def handle(line: str) -> None:
        event = _parse(line)
        kind = event.get("type")
        if kind == "workdir":
            path = str(event.get("path") or "")
            if WORKDIR_RE.match(path):
                workdir.append(path)
            return
        if kind == "fatal":
            run.error = str(event.get("reason") or "the runner could not start")
        elif kind == "result":
            run.results.append(event)
        elif kind == "summary":
            run.summary = event
        elif kind == "log":
            run.logs.append(event)
        if on_event is not None:
            on_event(event)

    try:
        async with asyncio.timeout(limit + GRACE_S):
            async with contextlib.aclosing(runner.stream(argv, input=payload)) as lines:  # type: ignore[type-var]
                async for line in lines:
                    handle(line)
    except TimeoutError:
        run.timed_out = True
        run.error = f"no answer from the runner within {limit + GRACE_S:g} s; it was stopped"
        await _remove_workdir(runner, workdir)
        return run
    except asyncio.CancelledError:
        await _remove_workdir(runner, workdir)
        raise
    except GpuwsError as exc:  # the connection died mid-run: keep what arrived, say why
        run.error = str(exc)
    if not run.summary and run.error is None:
        run.error = "the runner ended without a summary (killed, or crashed)"
    if run.summary.get("timed_out"):
        run.timed_out = True
    if run.error is not None or not run.summary:
        await _remove_workdir(runner, workdir)
    return run


async def _remove_workdir(runner: CommandRunner, workdir: list[str]) -> None:
    """Remove the run's directory on the host (the wrapper's trap cannot run after SIGKILL)."""
    for path in workdir:
        with contextlib.suppress(Exception):  # best effort: the host may be gone
            await asyncio.shield(runner.run(["rm", "-rf", "--", path], timeout=CLEANUP_TIMEOUT_S))


def _parse(line: str) -> dict[str, Any]:
    """One output line as an event; anything that is not a JSON object is kept as a log line."""
    text = line.strip()
    if text.startswith("{"):
        try:
            event = json.loads(text)
        except ValueError:
            event = None
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            return event
    return {"type": "log", "level": "info", "message": text[:2000]}
