"""The one exit-status table: each class of failure, through `gpuws.cli.main`, gets its status."""

from __future__ import annotations

import contextlib
import io
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gpuws.cli.connecting import ExitStatus, exit_code_for, resize_exit_status
from gpuws.cli.main import build_parser, main
from gpuws.core.errors import ConnectionLost, GpuwsError, NoNvidiaDriver, RefusedInput, ValidationError
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.profiles import ProfileNotFound, ProfileStore
from gpuws.core.resize.layout import LayoutError
from gpuws.core.runner import CommandTimeout
from gpuws.remote.auth import AuthFailed
from gpuws.remote.connection import HostUnreachable, NotConnected
from gpuws.remote.hostkeys import HostKeyChanged, HostKeyRevoked, UnknownHostKey
from gpuws.remote.probe import NoDriverFound
from gpuws.remote.resize import ResizeOutcome, ResizeRefused
from gpuws.remote.telemetry import TelemetryNoDriver
from tests.support.sshd import SshdServer

MIG_PARTED_FILE = str(Path(__file__).resolve().parents[1] / "fixtures" / "mig-parted" / "config-default.yaml")


@pytest.mark.parametrize(("error", "status"), [
    (GpuwsError("x"), 1),
    (RefusedInput("x"), 2),
    (ValidationError("f", "r"), 2),
    (ProfileNotFound("x"), 2),
    (LayoutError("x"), 2),
    (AuthFailed("x"), 3),
    (HostUnreachable("x"), 5),
    (NotConnected("x"), 5),
    (ConnectionLost("x"), 5),
    (NoNvidiaDriver("x"), 6),
    (NoDriverFound("x"), 6),
    (TelemetryNoDriver("x"), 6),
    (CommandTimeout("x"), 7),
    (ResizeRefused("x"), 8),
])
def test_each_error_class_has_its_status(error: BaseException, status: int) -> None:
    assert exit_code_for(error) == status


def test_host_key_errors_are_4() -> None:
    for cls in (UnknownHostKey, HostKeyChanged, HostKeyRevoked):
        error = cls.__new__(cls)  # their constructors want key details; the class decides
        assert exit_code_for(error) is ExitStatus.HOST_KEY


def test_resize_outcomes() -> None:
    assert resize_exit_status(ResizeOutcome.VERIFIED) == 0
    assert resize_exit_status(ResizeOutcome.ALREADY_AT_TARGET) == 0
    assert resize_exit_status(ResizeOutcome.ROLLED_BACK) == 9
    assert resize_exit_status(ResizeOutcome.ROLLBACK_FAILED) == 10


def test_the_table_is_in_the_help() -> None:
    text = build_parser().format_help()
    for line in ("0  ok", "2  usage or refused input", "5  host unreachable", "8  resize refused by preflight",
                 "9  resize rolled back", "10 resize rollback failed"):
        assert line in text


@pytest.mark.parametrize("argv", [["cp"], ["bench"], ["hosts", "add"]], ids=" ".join)
def test_a_commands_help_keeps_the_table_one_status_a_line(capsys: pytest.CaptureFixture[str],
                                                           argv: list[str]) -> None:
    """Found: a command's --help reflowed the table into one paragraph ("... 4 host key unknown, changed or
    revoked 5 host unreachable ..."): its parser has the top's class but not its raw formatter."""
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    lines = capsys.readouterr().out.splitlines()
    for line in ("  0  ok", "  5  host unreachable", "  13 benchmark: below expectations"):
        assert any(text.startswith(line) for text in lines), line


def test_every_status_means_one_thing_in_the_help_and_the_readme() -> None:
    """Found: `gpuws bench` exited 8 for a failed check and 9 for inconclusive, which the one
    table gives to a refused and a rolled-back resize."""
    from pathlib import Path

    from gpuws.cli.commands.bench import EXIT_FAIL, EXIT_INCONCLUSIVE
    from gpuws.cli.connecting import ExitStatus

    assert {EXIT_FAIL, EXIT_INCONCLUSIVE}.isdisjoint({ExitStatus.RESIZE_REFUSED, ExitStatus.RESIZE_ROLLED_BACK,
                                                      ExitStatus.RESIZE_ROLLBACK_FAILED})
    help_lines = build_parser().format_help().splitlines()
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for status in ExitStatus:
        assert sum(line.strip().startswith(f"{status.value} ") for line in help_lines) == 1, status
        assert readme.count(f"| {status.value} | ") == 1, status


def test_unreachable_host_is_5_and_unknown_profile_is_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ProfileStore().add(HostProfile(name="gone", host="127.0.0.1", port=port, user="me", auth=AuthMethod.AGENT))
    assert main(["probe", "gone"]) == 5
    assert main(["watch", "gone", "--count", "1"]) == 5
    assert main(["mig-parted", "export", "gone"]) == 5  # it caught every error itself and said 1
    assert main(["probe", "nope"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and all(line.startswith("gpuws: error: ") for line in err.splitlines())


@pytest.mark.sshd
def test_unknown_host_key_is_4_for_every_connecting_command(
    sshd: SshdServer, capsys: pytest.CaptureFixture[str]
) -> None:
    ProfileStore().add(HostProfile(name="rig", host="127.0.0.1", port=sshd.port, user=sshd.user,
                                   auth=AuthMethod.KEY, key_path=str(sshd.client_key)))
    for argv in (["probe", "rig"], ["watch", "rig", "--count", "1"], ["slices", "rig"]):
        assert main(argv) == 4, argv
    assert main(["probe", "rig", "--accept-new"]) == 0
    capsys.readouterr()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("argv", [
    ["probe", "rig"],
    ["watch", "rig", "--count", "1"],
    ["bench", "rig", "--no-save"],
    ["slices", "rig"],
    ["resize", "rig", "full", "--gpu", "0", "--dry-run"],
    ["advise", "rig", "--observe", "1"],
    ["mig-parted", "export", "rig"],
    ["mig-parted", "assert", "rig", MIG_PARTED_FILE, "--config", "all-disabled"],
    ["mig-parted", "apply", "rig", MIG_PARTED_FILE, "--config", "all-disabled", "--dry-run"],
])
def test_every_connecting_command_asks_about_the_host_key_on_a_terminal(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 11: the same OpenSSH question on a TTY for every command that connects (advise and
    # mig-parted connected without it, so an unknown key was refused without asking).
    ProfileStore().add(HostProfile(name="rig", host="127.0.0.1", user="me", auth=AuthMethod.AGENT))
    seen: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def open_target(name: str, **options: Any) -> AsyncIterator[Any]:
        seen.update(options)
        raise GpuwsError("stop here: the options are what this test looks at")
        yield  # an async generator, like the real one

    # A command opens its host with open_target (a connection) or open_host (the Workspace's record).
    monkeypatch.setattr("gpuws.app.targets.open_target", open_target)
    monkeypatch.setattr("gpuws.app.targets.open_host", open_target)
    monkeypatch.setattr(sys, "stdin", _Terminal())
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert main(argv) == 1
    assert seen.get("confirm_host_key") is not None and seen.get("kbdint_prompt") is not None, argv
