"""The one table of error class -> `ConnectionState`: the state each error leaves a host in.

It lives here, the lowest layer that can name every class it maps (core's and remote's), so the
connection's own reconnect (`gpuws.remote.connection`) and the app's error table
(`gpuws.app.errors`, which adds the CLI's exit status and the reason in words, keyed on these
same classes) read one row per class. Classes are imported when the table is first read, so a
command that never connects does not load asyncssh through it.
"""

from __future__ import annotations

from functools import cache

from gpuws.core.states import ConnectionState

OTHER_STATE = ConnectionState.UNREACHABLE  # any error the table does not name: worth trying again


@cache
def state_table() -> tuple[tuple[type[BaseException], ConnectionState], ...]:
    """Each error class and its state, one row per class; first match wins (subclasses first)."""
    from gpuws.core.errors import ConnectionLost, NoNvidiaDriver, RefusedInput
    from gpuws.core.resize.layout import LayoutError
    from gpuws.core.runner import CommandTimeout
    from gpuws.core.secrets import KeyringUnavailable
    from gpuws.remote.auth import AuthFailed
    from gpuws.remote.connection import HostUnreachable, JumpHostError, NotConnected
    from gpuws.remote.hostkeys import HostKeyChanged, HostKeyRevoked, UnknownHostKey
    from gpuws.remote.prometheus_errors import PrometheusAuthFailed, PrometheusUnreachable
    from gpuws.remote.resize import ResizeRefused

    state = ConnectionState
    return (
        (KeyringUnavailable, state.AUTH_FAILED),  # the password could not be read: waiting does not fix it
        (AuthFailed, state.AUTH_FAILED),
        (PrometheusAuthFailed, state.AUTH_FAILED),
        (UnknownHostKey, state.HOST_KEY_UNKNOWN),
        (HostKeyChanged, state.HOST_KEY_CHANGED),
        (HostKeyRevoked, state.HOST_KEY_CHANGED),  # a host certificate refused (HostCertificateInvalid) too
        (JumpHostError, state.UNREACHABLE),
        (HostUnreachable, state.UNREACHABLE),
        (NotConnected, state.UNREACHABLE),
        (ConnectionLost, state.UNREACHABLE),
        (PrometheusUnreachable, state.UNREACHABLE),
        (NoNvidiaDriver, state.NO_DRIVER),
        (CommandTimeout, state.UNREACHABLE),
        (TimeoutError, state.UNREACHABLE),
        (RefusedInput, state.UNREACHABLE),  # before ResizeRefused: a GPU the user named wrongly is both
        (ResizeRefused, state.UNREACHABLE),
        (LayoutError, state.UNREACHABLE),
    )


def error_class(exc: BaseException) -> type[BaseException] | None:
    """The table's class that `exc` is an instance of (its row), or None for an error it does not name."""
    return next((cls for cls, _state in state_table() if isinstance(exc, cls)), None)


def error_state(exc: BaseException) -> ConnectionState:
    """The state a failed connect (or a lost connection) leaves the host in."""
    return next((state for cls, state in state_table() if isinstance(exc, cls)), OTHER_STATE)
