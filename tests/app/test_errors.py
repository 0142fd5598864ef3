"""The one error table (#23): every error class -> host state, exit status, reason in words.

Found: error -> state / exit status was decided in four places (the window's session, the CLI's
exit table, the connection, the telemetry feed); the window said "Telemetry interrupted:
CommandTimeout: date timed out after 10 s" for a port that refused connections.
"""

from __future__ import annotations

import socket

import pytest

from gpuws.app.errors import ExitStatus, classify, exit_status_for, reason_for, state_for
from gpuws.core.errors import ConnectionLost, NoNvidiaDriver, RefusedInput
from gpuws.core.runner import CommandTimeout
from gpuws.core.secrets import KeyringUnavailable
from gpuws.core.states import ConnectionState
from gpuws.remote.auth import AuthFailed
from gpuws.remote.connection import HostUnreachable, JumpHostError, NotConnected


def _unreachable(cause: BaseException, port: int = 22, timeout: float | None = None) -> HostUnreachable:
    # The message is the same each time: the reason must come from the class and fields only.
    try:
        raise HostUnreachable("cannot reach me@h:22", port=port, timeout=timeout) from cause
    except HostUnreachable as exc:
        return exc


@pytest.mark.parametrize(("cause", "reason"), [
    (ConnectionRefusedError(111, "Connection refused"), "connection refused on port 22"),
    (TimeoutError(), "no answer for 30 s"),
    (socket.gaierror(-2, "Name or service not known"), "host name not found"),
    (ConnectionResetError(104, "Connection reset by peer"), "connection closed by the host on port 22"),
    (OSError(113, "No route to host"), "no route to host on port 22"),
])
def test_reasons_are_in_words_from_the_class_not_the_message(cause: BaseException, reason: str) -> None:
    exc = _unreachable(cause, timeout=30.0)
    found = classify(exc)
    assert found.reason == reason and found.error_class == "HostUnreachable"
    assert found.state is ConnectionState.UNREACHABLE and found.exit is ExitStatus.UNREACHABLE
    assert found.kind.retry  # waiting for the host can fix it


@pytest.mark.parametrize(("exc", "state", "status", "retry"), [
    (AuthFailed("authentication failed for me@h"), ConnectionState.AUTH_FAILED, ExitStatus.AUTH, False),
    (KeyringUnavailable("no keyring backend"), ConnectionState.AUTH_FAILED, ExitStatus.ERROR, False),
    (NoNvidiaDriver("no driver"), ConnectionState.NO_DRIVER, ExitStatus.NO_DRIVER, False),
    (NotConnected("not connected"), ConnectionState.UNREACHABLE, ExitStatus.UNREACHABLE, True),
    (ConnectionLost("lost"), ConnectionState.UNREACHABLE, ExitStatus.UNREACHABLE, True),
    (CommandTimeout("date timed out after 10 s"), ConnectionState.UNREACHABLE, ExitStatus.TIMEOUT, True),
    (JumpHostError("loop"), ConnectionState.UNREACHABLE, ExitStatus.USAGE, False),
    (RefusedInput("no"), ConnectionState.UNREACHABLE, ExitStatus.USAGE, False),
    (RuntimeError("something else"), ConnectionState.UNREACHABLE, ExitStatus.ERROR, True),
])
def test_one_row_per_class_for_both_front_ends(exc: BaseException, state: ConnectionState, status: ExitStatus,
                                               retry: bool) -> None:
    from gpuws.cli.connecting import exit_code_for

    assert state_for(exc) is state and exit_status_for(exc) is status and classify(exc).kind.retry is retry
    assert exit_code_for(exc) is status  # the CLI reads the same table


def test_a_command_timeout_says_no_answer_not_its_class() -> None:
    assert reason_for(CommandTimeout("date timed out after 10 s")) == "no answer in time"


def test_every_error_class_has_exactly_one_state_and_one_exit_status() -> None:
    """Found (Deliver 2): the connection kept a class -> state map of its own next to the app's table."""
    import gpuws.remote.connection as connection
    from gpuws.app.errors import exits, table
    from gpuws.remote.error_states import error_state, state_table
    from gpuws.remote.hostkeys import HostCertificateInvalid, HostKeyChanged, UnknownHostKey

    classes = [cls for cls, _state in state_table()]
    assert len(classes) == len(set(classes))  # one row, so one state, per class
    assert set(exits()) == set(classes)  # the exit statuses are keyed on exactly those classes
    assert [cls for cls, _kind in table()] == classes
    assert all(kind.state is state for (_c, kind), (_k, state) in zip(table(), state_table(), strict=True))
    assert not hasattr(connection, "_failure_state")  # the connection reads the one table
    # The classes the connection mapped itself (the key errors' fields do not matter here).
    for exc, state in ((AuthFailed("no"), ConnectionState.AUTH_FAILED),
                       (UnknownHostKey.__new__(UnknownHostKey), ConnectionState.HOST_KEY_UNKNOWN),
                       (HostKeyChanged.__new__(HostKeyChanged), ConnectionState.HOST_KEY_CHANGED),
                       (HostCertificateInvalid("certificate expired"), ConnectionState.HOST_KEY_CHANGED),
                       (KeyringUnavailable("none"), ConnectionState.AUTH_FAILED)):
        assert error_state(exc) is state_for(exc) is classify(exc).state is state


def test_every_exit_status_has_its_meaning_once_in_the_help_table() -> None:
    from gpuws.app.errors import EXIT_MEANINGS, EXIT_STATUS_TABLE, ExitStatus

    assert set(EXIT_MEANINGS) == set(ExitStatus)
    lines = EXIT_STATUS_TABLE.splitlines()[1:]
    assert [int(line.split()[0]) for line in lines] == [int(s) for s in ExitStatus]
