"""LoopThread: the GUI's handle on the asyncio loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gpuws.remote.loop import LoopThread


def test_submit_runs_on_the_loop_thread_and_returns_a_future() -> None:
    loop_thread = LoopThread()
    loop_thread.start()
    try:
        async def where() -> str:
            await asyncio.sleep(0.01)
            return threading.current_thread().name

        assert loop_thread.submit(where()).result(5) == "gpuws-asyncio"
    finally:
        loop_thread.stop()
    assert not loop_thread.running


def test_stop_cancels_pending_tasks_and_runs_their_cleanup() -> None:
    loop_thread = LoopThread()
    loop_thread.start()
    cleaned = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.set()

    future = loop_thread.submit(forever())
    loop_thread.stop(timeout=5)
    assert cleaned.is_set()
    assert future.cancelled()
    with pytest.raises(RuntimeError):
        loop_thread.submit(forever())


def test_many_slow_coroutines_run_concurrently() -> None:
    loop_thread = LoopThread()
    loop_thread.start()
    try:
        futures = [loop_thread.submit(asyncio.sleep(0.5, result=i)) for i in range(50)]
        assert [f.result(2) for f in futures] == list(range(50))  # 50 x 0.5 s in well under 2 s
    finally:
        loop_thread.stop()
