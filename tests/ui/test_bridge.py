"""The asyncio/Qt bridge: results come back on the GUI thread, cancellation stays silent."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from gpuws.ui.bridge import AsyncBridge, ask_on_gui_thread

pytestmark = pytest.mark.gui


async def _slow_value(value: int) -> tuple[int, str]:
    await asyncio.sleep(0.01)
    return value, threading.current_thread().name


async def _boom() -> None:
    await asyncio.sleep(0)
    raise ValueError("bad input")


def test_success_callback_runs_on_gui_thread(bridge: AsyncBridge, qtbot: Any) -> None:
    results: list[tuple[object, str]] = []
    bridge.run_async(_slow_value(7), lambda r: results.append((r, threading.current_thread().name)))
    qtbot.waitUntil(lambda: bool(results), timeout=3000)
    (value, worker_thread), gui_thread = results[0]
    assert value == 7
    assert worker_thread.startswith("gpuws")  # the coroutine ran on the loop thread
    assert gui_thread == threading.main_thread().name
    assert bridge.pending_count == 0


def test_failure_callback_gets_the_exception(bridge: AsyncBridge, qtbot: Any) -> None:
    errors: list[BaseException] = []
    bridge.run_async(_boom(), lambda _: pytest.fail("must not succeed"), errors.append)
    qtbot.waitUntil(lambda: bool(errors), timeout=3000)
    assert isinstance(errors[0], ValueError) and str(errors[0]) == "bad input"


def test_cancelled_work_calls_nothing(bridge: AsyncBridge, qtbot: Any) -> None:
    called: list[object] = []
    future = bridge.run_async(asyncio.sleep(10), called.append, called.append)
    future.cancel()
    qtbot.waitUntil(lambda: bridge.pending_count == 0, timeout=3000)
    qtbot.wait(50)
    assert called == []


def test_run_blocking_is_off_the_gui_thread(bridge: AsyncBridge, qtbot: Any) -> None:
    seen: list[str] = []
    bridge.run_blocking(lambda: threading.current_thread().name, seen.append)
    qtbot.waitUntil(lambda: bool(seen), timeout=3000)
    assert seen[0] != threading.main_thread().name


def test_loop_thread_can_ask_the_gui_thread(bridge: AsyncBridge, qtbot: Any) -> None:
    async def ask() -> tuple[str, str]:
        answer = await ask_on_gui_thread(bridge, lambda: threading.current_thread().name)
        return answer, threading.current_thread().name

    results: list[tuple[str, str]] = []
    bridge.run_async(ask(), results.append)
    qtbot.waitUntil(lambda: bool(results), timeout=3000)
    assert results[0][0] == threading.main_thread().name
    assert results[0][1] != threading.main_thread().name


def test_not_running_refuses_cleanly(qapp: Any) -> None:
    stopped = AsyncBridge()
    with pytest.raises(RuntimeError, match="not running"):
        stopped.run_async(asyncio.sleep(0))
