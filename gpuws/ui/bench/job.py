"""One benchmark run on the asyncio loop thread, reporting to the GUI thread through Qt signals.

`BenchJob.start` submits the run through `AsyncBridge.run_async`; runner events arrive on the
loop thread and are re-emitted as the queued `event_received` signal, so widgets only ever see
them on the GUI thread. `cancel()` cancels the asyncio task: `run_benchmark` then stops the remote
process group and removes its temporary directory before the job reports back, so "cancelled"
on screen means nothing is left running on the host.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from gpuws.app.workspace import Workspace
from gpuws.core.bench.results import BenchRun, ResultStore
from gpuws.core.errors import GpuwsError
from gpuws.core.runner import CommandRunner
from gpuws.ui.bench.history import HostHistory, load_history
from gpuws.ui.bridge import AsyncBridge

log = logging.getLogger(__name__)


@dataclass
class JobResult:
    """How a run ended. `run` is None when it was cancelled (nothing is kept then)."""

    host: str
    mode: str
    run: BenchRun | None
    history: HostHistory | None = None  # the host's history including `run`
    saved_path: Path | None = None
    save_error: str | None = None
    check_report: Path | None = None  # the provider report of a "check" run (Markdown; JSON beside it)

    @property
    def cancelled(self) -> bool:
        return self.run is None


class BenchJob(QObject):
    """A benchmark of one host: run it, keep it in the store, and load what to compare it with."""

    event_received = Signal(object)  # one runner event (a dict), on the GUI thread

    def __init__(self, host: str, mode: str, workspace: Workspace, store: ResultStore, *,
                 runner: CommandRunner | None = None, expected: Mapping[str, object] | None = None,
                 timeout: float | None = None, python: str = "python3", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.mode = mode
        self._workspace = workspace  # the run is its verb `bench` (runner: the host's, or this one)
        self._runner = runner
        self._store = store
        self._expected = dict(expected) if expected else None
        self._timeout = timeout
        self._python = python
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[object] | None = None
        self._cancel_requested = False
        self.future: concurrent.futures.Future[JobResult] | None = None

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    def start(self, bridge: AsyncBridge, on_done: Callable[[JobResult], None],
              on_failure: Callable[[BaseException], None]) -> None:
        """Run on the bridge's loop; `on_done`/`on_failure` are called on the GUI thread.
        NotConnected at once when the host is not connected."""
        work = self._workspace.bench(self.host, self.mode, runner=self._runner, expected=self._expected,
                                     on_event=self._forward, timeout=self._timeout, python=self._python)
        try:
            self.future = bridge.run_async(self._main(work), on_done, on_failure)
        except BaseException:
            work.close()  # never started: no "never awaited" warning
            raise

    def cancel(self) -> None:
        """Stop the run (GUI thread). The job still reports back, with `cancelled` set."""
        # Flag first, then look for the task: either this sees the task, or `_main` sees the flag.
        self._cancel_requested = True
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    # -- loop thread ------------------------------------------------------------------------------

    async def _main(self, work: Coroutine[object, object, BenchRun]) -> JobResult:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        try:
            if self._cancel_requested:
                work.close()
                raise asyncio.CancelledError
            run = await work
        except asyncio.CancelledError:
            if not self._cancel_requested:
                raise  # the app is shutting down: not ours to swallow
            if self._task is not None:
                self._task.uncancel()
            return JobResult(self.host, self.mode, None)
        return await asyncio.to_thread(self._keep, run)

    def _keep(self, run: BenchRun) -> JobResult:
        """Save the run and load the history it is compared with (blocking: an executor thread)."""
        result = JobResult(self.host, self.mode, run)
        try:
            history = load_history(self._store, self.host)
        except (GpuwsError, OSError) as exc:
            log.warning("benchmark history of %s could not be read: %s", self.host, exc)
            history = HostHistory(self.host)
        result.history = history.with_run(run)
        from gpuws.app.bench import keep_run

        kept = keep_run(run, self._store)  # saved, and a check's provider report written, as by `gpuws bench`
        result.saved_path = kept.saved_path
        error = kept.save_error
        if isinstance(error, GpuwsError):
            result.save_error = str(error)
        elif error is not None:
            result.save_error = f"cannot save the result: {error.strerror or error}"
        if kept.report_paths is not None:
            result.check_report = kept.report_paths[0]
        elif kept.report_error is not None:
            result.save_error = f"cannot write the check report: {kept.report_error.strerror or kept.report_error}"
        return result

    def _forward(self, event: Mapping[str, object]) -> None:
        # Called on the loop thread: emit only (the connection is queued to the GUI thread).
        with contextlib.suppress(RuntimeError):  # the tab (and this QObject) is gone: run on unseen
            self.event_received.emit(dict(event))
