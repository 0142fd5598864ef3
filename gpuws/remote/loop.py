"""One asyncio event loop on a daemon thread, for callers that are not async (the GUI).

The GUI thread never awaits: it submits a coroutine and gets a `concurrent.futures.Future`,
whose completion `gpuws.ui.bridge` turns into a Qt signal on the GUI thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """Owns an event loop running forever on its own thread until `stop()`."""

    def __init__(self, name: str = "gpuws-asyncio") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("LoopThread is not started")
        return self._loop

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the thread and return once its loop is running. Idempotent."""
        if self.running:
            return
        ready = threading.Event()
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=self._name, daemon=True)
        self._thread.start()
        ready.wait()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; thread-safe. Cancelling the future cancels the task."""
        if not self.running:
            coro.close()  # never awaited: close it so Python does not warn
            raise RuntimeError("LoopThread is not running")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        """Call a plain function on the loop thread (thread-safe)."""
        self.loop.call_soon_threadsafe(callback, *args)

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel every pending task, let them finish their cleanup, stop the loop and join."""
        if not self.running:
            return
        loop = self.loop

        async def cancel_all() -> None:
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown_asyncgens()

        # A task that ignores cancellation must not hang the app's exit.
        with contextlib.suppress(concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(timeout)
        if not self._thread.is_alive():
            loop.close()
        self._thread = None
        self._loop = None
