"""Where asyncio meets Qt: the loop thread and results delivered back on the GUI thread.

`AsyncBridge` owns one `gpuws.app.hostio.LoopThread`. `run_async(coro, on_success, on_failure)`
runs a coroutine there and calls one of the callbacks later *on the GUI thread* (as Anki's
operations do). The hop back is a queued Qt signal emitted from the loop thread on a QObject that
lives on the GUI thread, so widgets are never touched from a worker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

import shiboken6
from PySide6.QtCore import QObject, Qt, Signal

log = logging.getLogger(__name__)

T = TypeVar("T")
SuccessCallback = Callable[[object], None]  # the result, as it crosses the signal
FailureCallback = Callable[[BaseException], None]


class LoopRunner(Protocol):
    """What the bridge needs from a loop thread (`gpuws.app.hostio.LoopThread` provides it)."""

    def start(self) -> None:
        """Start the loop thread."""

    def stop(self) -> None:
        """Stop the loop thread (pending work is cancelled)."""

    def submit(self, coro: Coroutine[object, None, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; thread-safe."""


@dataclass
class _Pending:
    cancel: Callable[[], bool]  # the future's: called at shutdown
    on_success: SuccessCallback | None
    on_failure: FailureCallback | None
    owner: QObject | None = None  # callbacks are dropped once this Qt object is deleted


class AsyncBridge(QObject):
    """Runs coroutines on the asyncio loop thread; callbacks come back on the GUI thread."""

    # (token, succeeded, value-or-exception); private: callers use run_async's callbacks.
    _finished = Signal(int, bool, object)
    # (callable): run a plain function on the GUI thread (used by post()).
    _posted = Signal(object)

    def __init__(self, loop_thread: LoopRunner | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._loop = loop_thread if loop_thread is not None else _default_loop_thread()
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._running = False
        # Queued: the slot runs on this object's (the GUI) thread whatever thread emits.
        self._finished.connect(self._deliver, Qt.ConnectionType.QueuedConnection)
        self._posted.connect(self._run_posted, Qt.ConnectionType.QueuedConnection)

    def start(self) -> None:
        """Start the loop thread (once)."""
        if not self._running:
            self._loop.start()
            self._running = True

    def shutdown(self) -> None:
        """Cancel what is still running and stop the loop thread. Pending callbacks never fire."""
        if not self._running:
            return
        self._running = False
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        for item in pending:
            item.cancel()
        self._loop.stop()

    @property
    def running(self) -> bool:
        """Whether the loop thread runs."""
        return self._running

    @property
    def pending_count(self) -> int:
        """How many submitted coroutines have not reported back yet."""
        with self._lock:
            return len(self._pending)

    def run_async(
        self,
        coro: Coroutine[object, None, T],
        on_success: Callable[[T], None] | None = None,
        on_failure: FailureCallback | None = None,
        *,
        owner: QObject | None = None,
    ) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop thread; call `on_success(result)` or `on_failure(exc)` on the GUI thread.

        Cancellation (bridge shutdown, or `future.cancel()`) calls neither callback, and neither
        does a result arriving after `owner` (the widget the callbacks update) was deleted.
        """
        if not self._running:
            coro.close()
            raise RuntimeError("the async bridge is not running")
        token = next(self._ids)
        future = self._loop.submit(coro)
        with self._lock:
            self._pending[token] = _Pending(future.cancel, cast(SuccessCallback | None, on_success), on_failure, owner)
        future.add_done_callback(lambda f: self._on_done(token, f))
        return future

    def run_blocking(
        self,
        func: Callable[[], T],
        on_success: Callable[[T], None] | None = None,
        on_failure: FailureCallback | None = None,
        *,
        owner: QObject | None = None,
    ) -> concurrent.futures.Future[T]:
        """Run a blocking function (disk, keyring) in the loop's executor, off the GUI thread."""

        async def _in_executor() -> T:
            return await asyncio.get_running_loop().run_in_executor(None, func)

        return self.run_async(_in_executor(), on_success, on_failure, owner=owner)

    def post(self, func: Callable[[], None], *, owner: QObject | None = None) -> None:
        """Call `func` on the GUI thread soon (not at all if `owner` is deleted by then).
        Safe from any thread: connection state callbacks use it."""
        self._posted.emit((func, owner))

    # -- internals -------------------------------------------------------------------------------

    def _on_done(self, token: int, future: concurrent.futures.Future[T]) -> None:
        # Runs on the loop thread (or inline if already done): only emit, never touch widgets.
        if future.cancelled():
            with self._lock:
                self._pending.pop(token, None)
            return
        exc = future.exception()
        if exc is not None:
            self._finished.emit(token, False, exc)
        else:
            self._finished.emit(token, True, future.result())

    def _deliver(self, token: int, ok: bool, payload: object) -> None:
        with self._lock:
            item = self._pending.pop(token, None)
        if item is None:  # cancelled or the bridge was shut down meanwhile
            return
        if item.owner is not None and not shiboken6.isValid(item.owner):
            return  # the widget these callbacks would update is gone
        try:
            if ok:
                if item.on_success is not None:
                    item.on_success(payload)
            elif item.on_failure is not None:
                assert isinstance(payload, BaseException)
                item.on_failure(payload)
            else:
                log.error("background task failed: %s", payload)
        except Exception:
            # A bug in a callback must not take the event loop down with it.
            log.exception("error in a GUI callback")

    def _run_posted(self, posted: object) -> None:
        func, owner = posted if isinstance(posted, tuple) else (posted, None)
        if owner is not None and not shiboken6.isValid(owner):
            return
        if callable(func):
            try:
                func()
            except Exception:
                log.exception("error in a posted GUI call")


def _default_loop_thread() -> LoopRunner:
    from gpuws.app.hostio import LoopThread

    loop_thread: LoopRunner = LoopThread()
    return loop_thread


async def ask_on_gui_thread(bridge: AsyncBridge, question: Callable[[], T]) -> T:
    """From a coroutine on the loop thread: run `question()` on the GUI thread and await its answer.

    Used for prompts the remote layer needs mid-connection (keyboard-interactive, host keys).
    """
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[T] = loop.create_future()

    def on_gui() -> None:
        """Ask on the GUI thread and hand the answer (or the failure) to the coroutine."""
        try:
            result = question()
        except BaseException as exc:  # hand any failure back to the waiting coroutine
            loop.call_soon_threadsafe(_settle, answer, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, answer, result, None)

    bridge.post(on_gui)
    return await answer


def _settle(future: asyncio.Future[T], result: T | None, exc: BaseException | None) -> None:
    if future.done():  # the waiting coroutine was cancelled meanwhile
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)  # type: ignore[arg-type]
