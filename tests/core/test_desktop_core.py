"""The desktop's data: check parsing, install commands, honest labels, NVENC, the VNC password file."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gpuws.core.desktop import (
    SOFTWARE_GL_LABEL,
    find_viewer,
    has_nvenc,
    install_command,
    new_vnc_password,
    obfuscated_password,
    parse_check,
    parse_geometry,
    parse_renderer,
    parse_tmux_windows,
)
from gpuws.core.errors import ValidationError

GLXINFO_LLVMPIPE = ("name of display: :1\nOpenGL vendor string: Mesa\n"
                    "OpenGL renderer string: llvmpipe (LLVM 15.0.6, 256 bits)\n")


@pytest.mark.parametrize(("name", "nvenc"), [
    ("NVIDIA H100 80GB HBM3", False), ("NVIDIA H200", False), ("NVIDIA A100-SXM4-80GB", False),
    ("NVIDIA L4", True), ("NVIDIA L40S", True), ("NVIDIA RTX A6000", True), ("NVIDIA GeForce RTX 4090", True),
    ("Some Future GPU", None),
])
def test_nvenc_per_card(name: str, nvenc: bool | None) -> None:
    assert has_nvenc(name) is nvenc


def test_check_without_a_vnc_server_says_what_to_install() -> None:
    found = parse_check({"xvnc": None, "x11vnc": None, "session": None, "glxinfo": None, "tmux": "/usr/bin/tmux",
                         "os_id": "ubuntu", "os_like": "debian", "gpus": "0, NVIDIA H100 80GB HBM3\nbad line\n"})
    data = found.to_dict()
    assert data["vnc_server"] is None and data["opengl_renderer"] is None
    assert data["missing"] == ["vnc_server", "desktop_session", "websockify", "novnc", "glxinfo", "virtualgl"]
    assert data["install_command"] == ("apt-get update && apt-get install -y tigervnc-standalone-server xfce4 "
                                       "dbus-x11 websockify novnc mesa-utils")
    assert data["nvenc"] == [{"gpu": 0, "name": "NVIDIA H100 80GB HBM3", "nvenc": False}]
    assert data["labels"] == ["H100 has no video encoder: streaming runs on the CPU"]


def test_llvmpipe_is_labelled_with_the_fix() -> None:
    found = parse_check({"xvnc": "/usr/bin/Xvnc", "vncpasswd": "/usr/bin/vncpasswd", "glxinfo_b": GLXINFO_LLVMPIPE,
                         "os_id": "rocky", "os_like": "rhel centos fedora"})
    assert found.software_gl and found.opengl_renderer == "llvmpipe (LLVM 15.0.6, 256 bits)"
    assert found.labels()[0].startswith(SOFTWARE_GL_LABEL) and "VirtualGL" in found.labels()[0]
    assert found.install_command is not None and found.install_command.startswith("dnf install -y ")
    assert parse_check({"xvnc": "/usr/bin/Xvnc", "os_id": "plan9"}).install_command is None


def test_renderer_and_geometry_parsing() -> None:
    assert parse_renderer("OpenGL renderer string: NVIDIA H100/PCIe/SSE2\n") == "NVIDIA H100/PCIe/SSE2"
    assert parse_renderer("garbage") is None and parse_renderer(None) is None
    assert parse_geometry("1920x1080") == "1920x1080"
    for bad in ("1920", "0x0", "1920x1080; rm -rf /", "-1x5"):
        with pytest.raises(ValidationError, match="geometry"):
            parse_geometry(bad)


def test_install_command_only_installs_what_is_missing() -> None:
    assert install_command("debian", "", []) is None
    assert install_command("debian", "", ["virtualgl"]) is None  # not in any distribution's archive
    assert install_command("arch", "", ["tmux"]) == "pacman -S --needed --noconfirm tmux"


def test_password_file_is_what_vncpasswd_writes() -> None:
    password = new_vnc_password()
    assert len(password) == 8 and password.isalnum() and new_vnc_password() != password
    tool = shutil.which("vncpasswd")
    assert tool, "install tigervnc-tools (scripts/install-deps.sh test)"
    real = subprocess.run([tool, "-f"], input=(password + "\n").encode(), capture_output=True, check=True).stdout
    assert obfuscated_password(password) == real


def test_viewers_per_platform() -> None:
    def none(_name: str) -> str | None:
        return None

    def tiger(name: str) -> str | None:
        return "/usr/bin/vncviewer" if name == "vncviewer" else None

    viewer = find_viewer(5999, "/tmp/pw", platform="linux", which=tiger)
    assert viewer is not None and viewer.argv == ["/usr/bin/vncviewer", "-passwd", "/tmp/pw", "127.0.0.1::5999"]
    assert find_viewer(5999, "", platform="linux", which=none) is None
    mac = find_viewer(5999, "", platform="darwin", which=none)
    assert mac is not None and mac.argv == ["open", "vnc://127.0.0.1:5999"] and not mac.uses_password_file


def test_tmux_windows() -> None:
    windows = parse_tmux_windows("0\tbash\tbash\t0\n1\ttrain\tpython3\t1\nnot a window\n")
    assert [w.to_dict() for w in windows] == [
        {"index": 0, "name": "bash", "command": "bash", "active": False},
        {"index": 1, "name": "train", "command": "python3", "active": True},
    ]


def test_terminal_button_runs_gpuws_shell_in_the_users_terminal() -> None:
    from gpuws.core.desktop import shell_argv
    from gpuws.core.terminal import terminal_argv

    command = shell_argv("rig", "/usr/bin/python3", frozen=False)
    assert command == ["/usr/bin/python3", "-m", "gpuws", "shell", "rig"]
    assert shell_argv("rig", "/opt/gpuws/gpuws", frozen=True) == ["/opt/gpuws/gpuws", "shell", "rig"]
    installed = {"x-terminal-emulator": "/usr/bin/x-terminal-emulator", "wt": "C:/wt.exe"}
    assert terminal_argv(command, which=installed.get, platform="linux") == [
        "/usr/bin/x-terminal-emulator", "-e", *command]
    assert terminal_argv(command, which=installed.get, platform="win32") == ["C:/wt.exe", *command]
    assert terminal_argv(command, which=lambda _n: None, platform="win32")[:3] == ["cmd", "/c", "start"]
    assert terminal_argv(command, platform="darwin")[0] == "osascript"
