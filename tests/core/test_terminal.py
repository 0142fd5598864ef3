"""The ssh command line for a profile (jump hosts included) and the terminal that opens it."""

from __future__ import annotations

import shlex

import pytest

from gpuws.core.errors import GpuwsError
from gpuws.core.models import AuthMethod, HostProfile
from gpuws.core.terminal import jump_chain, ssh_argv, ssh_command_line, terminal_argv


def profiles(*ps: HostProfile) -> dict[str, HostProfile]:
    return {p.name: p for p in ps}


def test_plain_host_uses_defaults() -> None:
    p = HostProfile(name="a", host="gpu.example.com")
    assert ssh_argv(p, {}.__getitem__) == ["ssh", "--", "gpu.example.com"]


def test_port_user_key_and_two_jumps_in_order() -> None:
    ps = profiles(
        HostProfile(name="bastion", host="bastion.example.com", user="ops", port=2222),
        HostProfile(name="inner", host="10.0.0.5", user="ops", jump="bastion"),
        HostProfile(
            name="gpu", host="fe80::1", port=2200, user="me", auth=AuthMethod.KEY, key_path="/k/id", jump="inner"
        ),
    )
    argv = ssh_argv(ps["gpu"], ps.__getitem__)
    assert argv == [
        "ssh", "-p", "2200", "-i", "/k/id", "-J", "ops@bastion.example.com:2222,ops@10.0.0.5",
        "-l", "me", "--", "fe80::1",
    ]  # fmt: skip
    # The copied line parses back to the same argv.
    assert shlex.split(ssh_command_line(ps["gpu"], ps.__getitem__)) == argv


def test_ipv6_jump_host_is_bracketed() -> None:
    ps = profiles(HostProfile(name="j", host="2001:db8::1", port=2022), HostProfile(name="t", host="t", jump="j"))
    assert "[2001:db8::1]:2022" in ssh_argv(ps["t"], ps.__getitem__)


def test_jump_loop_is_refused_with_a_message() -> None:
    ps = profiles(HostProfile(name="a", host="a", jump="b"), HostProfile(name="b", host="b", jump="a"))
    with pytest.raises(GpuwsError, match="loop"):
        jump_chain(ps["a"], ps.__getitem__)


def test_terminal_prefers_installed_emulator_and_passes_argv_untouched() -> None:
    installed = {"xterm": "/usr/bin/xterm", "konsole": "/usr/bin/konsole"}
    argv = terminal_argv(["ssh", "--", "h"], which=installed.get, platform="linux")
    assert argv == ["/usr/bin/konsole", "-e", "ssh", "--", "h"]
    argv = terminal_argv(["ssh", "--", "h"], preferred="xterm", which=installed.get, platform="linux")
    assert argv[:2] == ["/usr/bin/xterm", "-e"]


def test_no_terminal_found_says_what_to_do() -> None:
    with pytest.raises(GpuwsError, match="install one"):
        terminal_argv(["ssh", "h"], which=lambda _n: None, platform="linux")


def test_every_identity_file_becomes_an_i_option_in_order() -> None:
    p = HostProfile(name="a", host="gpu.example.com", auth=AuthMethod.KEY, key_path="/k/first",
                    identity_files=["/k/second", "/k/third"])
    argv = ssh_argv(p, {}.__getitem__)
    assert argv[:7] == ["ssh", "-i", "/k/first", "-i", "/k/second", "-i", "/k/third"]
