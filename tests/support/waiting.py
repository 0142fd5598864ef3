"""Waiting on an event loop until a condition holds (tests that drive a coroutine scenario)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(check: Callable[[], object], timeout: float = 30.0, poll: float = 0.05, what: str = "") -> None:
    """Return once `check()` is true; TimeoutError (saying `what` was awaited) after `timeout` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while not check():
                await asyncio.sleep(poll)
    except TimeoutError:
        raise TimeoutError(f"not in {timeout:g} s: {what}" if what else f"not in {timeout:g} s") from None
