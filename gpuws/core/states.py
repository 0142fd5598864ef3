"""The connection state of a host: a value type every layer reads (the app layer decides it)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum


class ConnectionState(StrEnum):
    """Where a host's connection stands, as the window and `--json` output name it."""

    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    AUTH_FAILED = "auth_failed"
    HOST_KEY_CHANGED = "host_key_changed"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    UNREACHABLE = "unreachable"
    NO_DRIVER = "no_driver"


@dataclass(frozen=True)
class Countdown:
    """A line that counts down to `at` (a `time.monotonic()` instant), rendered when read:
    "connection lost; retry 6/10 in 11.4 s". A state's detail is one of these while it waits, so
    that every view that reads it again (the window's one-second clock) shows the time left, never
    the time there was when the wait began."""

    before: str
    at: float
    after: str = ""
    decimals: int = 1

    @classmethod
    def after_delay(cls, before: str, delay_s: float, after: str = "", decimals: int = 1) -> Countdown:
        """One that ends `delay_s` from now."""
        return cls(before, time.monotonic() + delay_s, after, decimals)

    def text(self, now: float | None = None) -> str:
        """The line with the seconds left at `now` (default: now), never below zero."""
        left = max(0.0, self.at - (time.monotonic() if now is None else now))
        return f"{self.before}{left:.{self.decimals}f} s{self.after}"

    def __str__(self) -> str:
        return self.text()


Detail = str | Countdown  # a state's one line for people: fixed, or counting down
