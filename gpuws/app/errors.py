"""The one error table: each error class -> the host's `ConnectionState` (from the one state
table, `gpuws.remote.error_states`, which the connection reads too), the CLI's exit status (as
`gpuws --help` prints it, keyed on the same classes) and a reason in words.

Both front ends read it: the window's host state and the CLI's exit status come from `classify`,
never from an error's message text. The remote error classes are imported when first needed, so
a command that never connects does not load asyncssh.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from enum import IntEnum
from functools import cache

from gpuws.core.states import ConnectionState
from gpuws.remote.error_states import OTHER_STATE, error_state, state_table


class ExitStatus(IntEnum):
    """The one exit-status table of every `gpuws` command (documented in `gpuws --help`)."""

    OK = 0
    ERROR = 1  # any other error
    USAGE = 2  # usage or refused input (a bad value, an unknown profile, a refused confirmation)
    AUTH = 3  # authentication failed
    HOST_KEY = 4  # host key unknown, changed or revoked
    UNREACHABLE = 5  # unreachable, or the connection was lost past the reconnect timeout
    NO_DRIVER = 6  # no NVIDIA driver on the host
    TIMEOUT = 7  # a command on the host (or the connection) timed out
    RESIZE_REFUSED = 8  # resize refused by preflight: nothing changed
    RESIZE_ROLLED_BACK = 9  # resize failed and the verified previous layout is back
    RESIZE_ROLLBACK_FAILED = 10  # the rollback failed too: the host needs attention
    # Verdicts, not errors: a benchmark that ran and found a bad card, or could not decide. Kept
    # apart from 8/9 so a script never reads "a check failed" as "a resize was refused".
    CHECK_FAILED = 11  # `gpuws bench`: a check failed
    INCONCLUSIVE = 12  # `gpuws bench`: something could not be measured (never a pass)
    CHECK_WARN = 13  # `gpuws bench`: it ran, below expectations (warn); never read as a pass unless asked


# What each exit status means, once: `gpuws --help` prints the whole table, the connecting
# commands (probe, watch) the statuses they can end with.
EXIT_MEANINGS: dict[ExitStatus, str] = {
    ExitStatus.OK: "ok",
    ExitStatus.ERROR: "other error",
    ExitStatus.USAGE: "usage or refused input",
    ExitStatus.AUTH: "authentication failed",
    ExitStatus.HOST_KEY: "host key unknown, changed or revoked",
    ExitStatus.UNREACHABLE: "host unreachable, or the connection was lost past the reconnect timeout",
    ExitStatus.NO_DRIVER: "no NVIDIA driver on the host",
    ExitStatus.TIMEOUT: "timed out",
    ExitStatus.RESIZE_REFUSED: "resize refused by preflight (nothing changed)",
    ExitStatus.RESIZE_ROLLED_BACK: "resize rolled back to the verified previous layout",
    ExitStatus.RESIZE_ROLLBACK_FAILED: "resize rollback failed (the host needs attention)",
    ExitStatus.CHECK_FAILED: "benchmark: a check failed; health: degraded or unhealthy",
    ExitStatus.INCONCLUSIVE: "benchmark or health: inconclusive (something could not be measured; never a pass)",
    ExitStatus.CHECK_WARN: "benchmark: below expectations (warn); --allow-warn makes it 0",
}

EXIT_STATUS_TABLE = "exit status (every command):\n" + "\n".join(
    f"  {int(status):<2} {meaning}" for status, meaning in EXIT_MEANINGS.items())

EXIT_STATUS_HELP = "exit status: " + ", ".join(
    f"{int(status)} {meaning}" for status, meaning in EXIT_MEANINGS.items() if status < ExitStatus.CHECK_FAILED)


@dataclass(frozen=True)
class ErrorKind:
    """What one error class means: the state it leaves a host in, the CLI's exit status, and
    whether trying again later can fix it (`retry`)."""

    state: ConnectionState
    exit: ExitStatus
    retry: bool


@dataclass(frozen=True)
class Classified:
    """One error, classified: its kind, the reason in words for people, and the error class (for
    the details line only)."""

    kind: ErrorKind
    reason: str
    error_class: str

    @property
    def state(self) -> ConnectionState:
        """The state the error leaves the host in."""
        return self.kind.state

    @property
    def exit(self) -> ExitStatus:
        """The CLI's exit status for it."""
        return self.kind.exit


@cache
def exits() -> dict[type[BaseException], tuple[ExitStatus, bool]]:
    """The CLI's exit status and whether trying again can help, keyed on the classes of the one
    state table (`gpuws.remote.error_states.state_table`): one entry per row there."""
    from gpuws.core.errors import ConnectionLost, NoNvidiaDriver, RefusedInput
    from gpuws.core.resize.layout import LayoutError
    from gpuws.core.runner import CommandTimeout
    from gpuws.core.secrets import KeyringUnavailable
    from gpuws.remote.auth import AuthFailed
    from gpuws.remote.connection import HostUnreachable, JumpHostError, NotConnected
    from gpuws.remote.hostkeys import HostKeyChanged, HostKeyRevoked, UnknownHostKey
    from gpuws.remote.prometheus_errors import PrometheusAuthFailed, PrometheusUnreachable
    from gpuws.remote.resize import ResizeRefused

    unreachable = (ExitStatus.UNREACHABLE, True)
    return {
        # A script sees "other error": `gpuws secret` meets it without any host.
        KeyringUnavailable: (ExitStatus.ERROR, False),
        AuthFailed: (ExitStatus.AUTH, False),
        PrometheusAuthFailed: (ExitStatus.AUTH, False),
        UnknownHostKey: (ExitStatus.HOST_KEY, False),
        HostKeyChanged: (ExitStatus.HOST_KEY, False),
        HostKeyRevoked: (ExitStatus.HOST_KEY, False),
        JumpHostError: (ExitStatus.USAGE, False),
        HostUnreachable: unreachable,
        NotConnected: unreachable,
        ConnectionLost: unreachable,
        PrometheusUnreachable: unreachable,
        NoNvidiaDriver: (ExitStatus.NO_DRIVER, False),
        CommandTimeout: (ExitStatus.TIMEOUT, True),
        TimeoutError: (ExitStatus.TIMEOUT, True),
        ResizeRefused: (ExitStatus.RESIZE_REFUSED, False),
        RefusedInput: (ExitStatus.USAGE, False),
        LayoutError: (ExitStatus.USAGE, False),
    }


_OTHER = ErrorKind(OTHER_STATE, ExitStatus.ERROR, retry=True)


@cache
def table() -> tuple[tuple[type[BaseException], ErrorKind], ...]:
    """The table itself, one row per class, first match wins (subclasses before their bases): the
    state from the one state table, the exit status from `exits`."""
    rows = exits()
    return tuple((cls, ErrorKind(state, *rows[cls])) for cls, state in state_table())


def kind_of(exc: BaseException) -> ErrorKind:
    """The table's row for `exc` (by class; anything else is "other error", worth retrying)."""
    return next((kind for cls, kind in table() if isinstance(exc, cls)), _OTHER)


def exit_status_for(exc: BaseException) -> ExitStatus:
    """The exit status for an error that ended a command."""
    return kind_of(exc).exit


def state_for(exc: BaseException) -> ConnectionState:
    """The state a failed connect (or a lost connection) leaves the host in (the one state table)."""
    return error_state(exc)


def reason_for(exc: BaseException) -> str:
    """The reason in words ("connection refused on port 22", "no answer for 30 s"), from the
    error's class and its fields; the message itself only where nothing better is known."""
    from gpuws.core.runner import CommandTimeout
    from gpuws.remote.connection import HostUnreachable

    if isinstance(exc, HostUnreachable):
        cause = exc.__cause__
        port = f" on port {exc.port}" if exc.port is not None else ""
        if isinstance(cause, ConnectionRefusedError):
            return f"connection refused{port}"
        if isinstance(cause, TimeoutError) and exc.timeout is not None:
            return f"no answer for {exc.timeout:g} s"
        if isinstance(cause, socket.gaierror):
            return "host name not found"
        if isinstance(cause, ConnectionResetError | BrokenPipeError | EOFError):
            return f"connection closed by the host{port}"
        if isinstance(cause, OSError) and cause.strerror:
            return f"{cause.strerror[:1].lower()}{cause.strerror[1:]}{port}"
    if isinstance(exc, CommandTimeout | TimeoutError):
        return "no answer in time"
    text = str(exc).strip()
    return text or "error"


def classify(exc: BaseException) -> Classified:
    """`exc`'s row of the table, with its reason in words."""
    return Classified(kind_of(exc), reason_for(exc), type(exc).__name__)
