"""The remote desktop and the tmux terminal, as data: what a host can serve, what to install, the
honest labels, the VNC password and how a viewer gets it. Qt-free and network-free.

The on-host agent (`gpuws/agent/desktop_agent.py`) reports raw facts as JSON; `parse_check` turns
them into a `DesktopCheck`, whose `to_dict()` is what `gpuws desktop NAME --check --json` prints.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import string
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gpuws.core.errors import GpuwsError, ValidationError
from gpuws.core.terminal import printable

TMUX_SESSION: Final = "gpuws"
VNC_PASSWORD_LENGTH: Final = 8  # VNC authentication (DES) uses the first 8 characters only
_PASSWORD_ALPHABET = string.ascii_letters + string.digits
_GEOMETRY = re.compile(r"([1-9][0-9]{2,4})x([1-9][0-9]{2,4})", re.ASCII)
# Xvnc's own limit per side (TigerVNC 1.12 refuses 16385 with "vncExtInit: Invalid PixelBuffer
# width of 16385 pixels requested", a multi-line fatal error, once it is already starting).
MIN_GEOMETRY_SIDE = 100
MAX_GEOMETRY_SIDE = 16384
# VNC authentication's fixed DES key (RFB 3.8, 7.2.2), bits of each byte reversed as d3des wants.
_VNC_KEY = bytes(int(f"{b:08b}"[::-1], 2) for b in (23, 82, 107, 6, 35, 78, 88, 7))
SOFTWARE_GL_LABEL: Final = "software OpenGL (llvmpipe): 3D will be slow"
SOFTWARE_GL_FIX: Final = ("install VirtualGL (virtualgl.org) so the desktop's applications render on the GPU "
                          "(vglrun)")
NO_TMUX_WARNING: Final = ("tmux is not installed on the host: this is a plain shell, and what runs in it will "
                          "not survive a dropped connection (install tmux)")

# Data-centre GPUs without NVENC (they have NVDEC/NVJPG only); everything else NVIDIA ships
# (L4, L40, L40S, A10, A40, RTX, T4, V100) has at least one encoder.
_NO_NVENC = re.compile(r"\b(A100|A30|A800|H100|H200|H800|GH200)\b", re.IGNORECASE)
_HAS_NVENC = re.compile(r"\b(L4|L40S?|A2|A10G?|A16|A40|T4|V100|P100|P4|P40|RTX|Quadro|GeForce|Tesla T4)\b"
                        r"|RTX|GeForce|Quadro", re.IGNORECASE)


class DesktopError(GpuwsError):
    """The desktop could not be checked, started or stopped on the host."""


class NoVncServer(DesktopError):
    """The host has no VNC server to start (see `gpuws desktop NAME --check`)."""


@dataclass(frozen=True)
class GpuEncoder:
    """One GPU and whether it has a video encoder (None: gpuws does not know this card)."""

    index: int
    name: str
    nvenc: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.index, "name": self.name, "nvenc": self.nvenc}


def has_nvenc(name: str) -> bool | None:
    """Whether the GPU called `name` (nvidia-smi's name) has NVENC; None when not known."""
    if _NO_NVENC.search(name):
        return False
    if _HAS_NVENC.search(name):
        return True
    return None


def parse_gpus(text: str | None) -> list[GpuEncoder]:
    """GPUs from `nvidia-smi --query-gpu=index,name --format=csv,noheader` (bad lines skipped)."""
    gpus: list[GpuEncoder] = []
    for line in (text or "").splitlines():
        index, sep, name = line.partition(",")
        if sep and index.strip().isdigit() and name.strip():
            gpus.append(GpuEncoder(int(index), name.strip(), has_nvenc(name.strip())))
    return gpus


def parse_renderer(glxinfo: str | None) -> str | None:
    """The "OpenGL renderer string" of `glxinfo -B` output, or None."""
    for line in (glxinfo or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "OpenGL renderer string" and value.strip():
            return value.strip()
    return None


def is_software_renderer(renderer: str | None) -> bool:
    """llvmpipe, softpipe, swrast: OpenGL on the CPU."""
    return bool(renderer) and re.search(r"llvmpipe|softpipe|swrast|software", renderer or "", re.I) is not None


# What to install for each missing part, per distribution family. VirtualGL is in no distribution's
# repositories (virtualgl.org ships .deb/.rpm), so it is named in the labels, not installed here.
_PACKAGES: dict[str, dict[str, tuple[str, ...]]] = {
    "debian": {"vnc_server": ("tigervnc-standalone-server",), "vncpasswd": ("tigervnc-tools",),
               "desktop_session": ("xfce4", "dbus-x11"), "websockify": ("websockify",), "novnc": ("novnc",),
               "glxinfo": ("mesa-utils",), "tmux": ("tmux",)},
    "fedora": {"vnc_server": ("tigervnc-server",), "vncpasswd": ("tigervnc-server",),
               "desktop_session": ("xfce4-session", "xfwm4", "xfce4-panel", "xfdesktop", "xfce4-terminal"),
               "websockify": ("python3-websockify",), "novnc": ("novnc",), "glxinfo": ("glx-utils",),
               "tmux": ("tmux",)},
    "arch": {"vnc_server": ("tigervnc",), "vncpasswd": ("tigervnc",), "desktop_session": ("xfce4",),
             "websockify": ("websockify",), "novnc": ("novnc",), "glxinfo": ("mesa-utils",), "tmux": ("tmux",)},
}
_INSTALLERS = {"debian": "apt-get install -y", "fedora": "dnf install -y", "arch": "pacman -S --needed --noconfirm"}


def distro_family(os_id: str, os_like: str) -> str | None:
    """debian, fedora or arch from /etc/os-release's ID and ID_LIKE; None for any other."""
    words = f"{os_id} {os_like}".lower().split()
    for family, members in (("debian", {"debian", "ubuntu"}), ("fedora", {"fedora", "rhel", "centos", "rocky",
                                                                         "almalinux"}), ("arch", {"arch"})):
        if members & set(words):
            return family
    return None


def install_command(os_id: str, os_like: str, missing: list[str]) -> str | None:
    """The command (run with sudo) that installs what is missing, or None (nothing to install, or an
    unknown distribution)."""
    family = distro_family(os_id, os_like)
    if family is None:
        return None
    packages: list[str] = []
    for part in missing:
        for package in _PACKAGES[family].get(part, ()):
            if package not in packages:
                packages.append(package)
    if not packages:
        return None
    prefix = "apt-get update && " if family == "debian" else ""
    return f"{prefix}{_INSTALLERS[family]} {' '.join(packages)}"


@dataclass
class DesktopCheck:
    """What a host can serve for a remote desktop (`gpuws desktop NAME --check`)."""

    vnc_server: str | None
    vnc_kind: str | None  # "tigervnc", "turbovnc", "x11vnc"
    virtualgl: bool
    opengl_renderer: str | None
    nvenc: list[GpuEncoder]
    desktop_session: str | None
    websockify: str | None = None
    novnc: str | None = None
    dcv: str | None = None
    selkies: str | None = None
    tmux: str | None = None
    vncpasswd: str | None = None
    running_display: int | None = None
    missing: list[str] = field(default_factory=list)
    install_command: str | None = None
    simulated: bool = False

    @property
    def software_gl(self) -> bool:
        return is_software_renderer(self.opengl_renderer)

    def labels(self) -> list[str]:
        """The honest warnings: software OpenGL, GPUs without a video encoder."""
        out: list[str] = []
        if self.software_gl:
            out.append(f"{SOFTWARE_GL_LABEL}; {SOFTWARE_GL_FIX}" if not self.virtualgl else SOFTWARE_GL_LABEL)
        for model in self.nvenc:
            if model.nvenc is False:
                out.append(nvenc_label(model.name))
        return list(dict.fromkeys(out))  # two cards of one model: one label

    def to_dict(self) -> dict[str, Any]:
        return {
            "vnc_server": self.vnc_server,
            "vnc_kind": self.vnc_kind,
            "virtualgl": self.virtualgl,
            "opengl_renderer": self.opengl_renderer,
            "software_gl": self.software_gl,
            "nvenc": [g.to_dict() for g in self.nvenc],
            "desktop_session": self.desktop_session,
            "websockify": self.websockify,
            "novnc": self.novnc,
            "dcv": self.dcv,
            "selkies": self.selkies,
            "tmux": self.tmux,
            "running_display": self.running_display,
            "missing": list(self.missing),
            "install_command": self.install_command,
            "labels": self.labels(),
            "simulated": self.simulated,
        }


def nvenc_label(model: str) -> str:
    """'H100 has no video encoder: streaming runs on the CPU' for a card's nvidia-smi name."""
    match = _NO_NVENC.search(model)
    short = match.group(1).upper() if match else model
    return f"{short} has no video encoder: streaming runs on the CPU"


def _text(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) and value else None


def parse_check(raw: Mapping[str, Any], *, simulated: bool = False) -> DesktopCheck:
    """A `DesktopCheck` from the agent's `check` JSON object."""
    xvnc, x11vnc = _text(raw, "xvnc"), _text(raw, "x11vnc")
    vnc_server = xvnc or x11vnc
    kind = None
    if xvnc:
        kind = "turbovnc" if raw.get("turbovnc") else "tigervnc"
    elif x11vnc:
        kind = "x11vnc"
    running = raw.get("running")
    display = running.get("display") if isinstance(running, dict) else None
    check = DesktopCheck(
        vnc_server=vnc_server, vnc_kind=kind, virtualgl=bool(_text(raw, "vglrun")),
        opengl_renderer=parse_renderer(_text(raw, "glxinfo_b")), nvenc=parse_gpus(_text(raw, "gpus")),
        desktop_session=_text(raw, "session"), websockify=_text(raw, "websockify"), novnc=_text(raw, "novnc"),
        dcv=_text(raw, "dcv"), selkies=_text(raw, "selkies"), tmux=_text(raw, "tmux"),
        vncpasswd=_text(raw, "vncpasswd"),
        running_display=display if isinstance(display, int) and not isinstance(display, bool) else None,
        simulated=simulated,
    )
    missing = []
    if not xvnc:  # gpuws starts Xvnc itself; x11vnc alone only shares an existing display
        missing.append("vnc_server")
    if xvnc and not check.vncpasswd:
        missing.append("vncpasswd")
    for part, present in (("desktop_session", check.desktop_session), ("websockify", check.websockify),
                          ("novnc", check.novnc), ("glxinfo", _text(raw, "glxinfo")), ("tmux", check.tmux)):
        if not present:
            missing.append(part)
    if not check.virtualgl:
        missing.append("virtualgl")
    check.missing = missing
    check.install_command = install_command(str(raw.get("os_id") or ""), str(raw.get("os_like") or ""), missing)
    return check


@dataclass(frozen=True)
class RunningDesktop:
    """A VNC desktop on the host: display :N on 127.0.0.1:`port` there."""

    display: int
    port: int
    reused: bool
    geometry: str = ""
    session: str | None = None
    virtualgl: bool = False


def parse_started(raw: Mapping[str, Any]) -> RunningDesktop:
    """The agent's `start` answer; a `DesktopError` (or `NoVncServer`) with its message otherwise."""
    error = raw.get("error")
    if error:
        if raw.get("missing") == "vnc_server":
            raise NoVncServer(f"{error}; `gpuws desktop NAME --check` says what to install")
        raise DesktopError(f"desktop: {error}")
    display, port = raw.get("display"), raw.get("port")
    if not isinstance(display, int) or not isinstance(port, int):
        raise DesktopError("desktop: the host's answer has no display or port")
    return RunningDesktop(display, port, bool(raw.get("reused")), str(raw.get("geometry") or ""),
                          _text(raw, "session"), bool(raw.get("virtualgl")))


def parse_geometry(text: str) -> str:
    """'1920x1080' (each side 100-16384, what Xvnc can serve), refused with a clear message
    otherwise, before anything runs on the host."""
    match = _GEOMETRY.fullmatch(text.strip())
    if match is None:
        raise ValidationError("geometry", f"{printable(text, 40)!r}: write WIDTHxHEIGHT, e.g. 1920x1080")
    for side, value in zip(("width", "height"), match.groups(), strict=True):
        if not MIN_GEOMETRY_SIDE <= int(value) <= MAX_GEOMETRY_SIDE:
            raise ValidationError("geometry", f"{text.strip()}: the {side} must be from {MIN_GEOMETRY_SIDE} to "
                                              f"{MAX_GEOMETRY_SIDE} pixels (Xvnc's limit)")
    return text.strip()


def check_display(display: int) -> int:
    if not 1 <= display <= 99:
        raise ValidationError("display", f"{display}: use an X display number from 1 to 99")
    return display


def new_vnc_password() -> str:
    """A random VNC password (8 characters: all that VNC authentication uses)."""
    return "".join(secrets.choice(_PASSWORD_ALPHABET) for _ in range(VNC_PASSWORD_LENGTH))


def obfuscated_password(password: str) -> bytes:
    """The password as `vncpasswd -f` writes it (what `vncviewer -passwd FILE` reads)."""
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    from cryptography.hazmat.primitives.ciphers import Cipher, modes

    data = password.encode()[:VNC_PASSWORD_LENGTH].ljust(VNC_PASSWORD_LENGTH, b"\0")
    encryptor = Cipher(TripleDES(_VNC_KEY * 3), modes.ECB()).encryptor()  # noqa: S305 (RFB VNC auth is DES-ECB; 3DES K1=K2=K3 is DES)
    return encryptor.update(data) + encryptor.finalize()


@dataclass(frozen=True)
class Viewer:
    """How to start a VNC viewer: argv, and whether it reads the password file given in it."""

    argv: list[str]
    uses_password_file: bool
    name: str


def find_viewer(local_port: int, password_file: str, *, platform: str = sys.platform,
                which: Callable[[str], str | None] = shutil.which) -> Viewer | None:
    """A VNC viewer on this platform for 127.0.0.1:`local_port`, or None when none is installed.

    TigerVNC, TightVNC and RealVNC read the 0600 password file; Remmina and macOS Screen Sharing
    ask for the password themselves.
    """
    target = f"127.0.0.1::{local_port}"  # "::" = a port, not a display number
    if platform == "darwin":
        for name in ("vncviewer", "tigervnc"):
            path = which(name)
            if path:
                return Viewer([path, "-passwd", password_file, target], True, "TigerVNC")
        return Viewer(["open", f"vnc://127.0.0.1:{local_port}"], False, "Screen Sharing")
    if platform.startswith("win"):
        for name, label in (("vncviewer", "TigerVNC"), ("tvnviewer", "TightVNC")):
            path = which(name)
            if path:
                return Viewer([path, "-passwd", password_file, target], True, label)
        real = which("vncviewer.exe") or which("VNC-Viewer")
        if real:
            return Viewer([real, f"-passwordfile={password_file}", f"127.0.0.1:{local_port}"], True, "RealVNC")
        return None
    for name in ("vncviewer", "xtigervncviewer", "xtightvncviewer"):
        path = which(name)
        if path:
            return Viewer([path, "-passwd", password_file, target], True, "TigerVNC" if "tight" not in name
                          else "TightVNC")
    remmina = which("remmina")
    if remmina:
        return Viewer([remmina, "-c", f"vnc://127.0.0.1:{local_port}"], False, "Remmina")
    return None


def write_password_file(password: str, directory: str | None = None) -> str:
    """The obfuscated password in a new 0600 file (the caller removes it once the viewer read it)."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="gpuws-vnc-", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, obfuscated_password(password))
    finally:
        os.close(fd)
    return path


# -- tmux ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TmuxWindow:
    """One window of the host's `gpuws` tmux session and what runs in it."""

    index: int
    name: str
    command: str
    active: bool

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "command": self.command, "active": self.active}


TMUX_LIST_FORMAT: Final = "#{window_index}\t#{window_name}\t#{pane_current_command}\t#{window_active}"


def parse_tmux_windows(text: str) -> list[TmuxWindow]:
    """Windows from `tmux list-windows -F TMUX_LIST_FORMAT` (bad lines skipped)."""
    windows: list[TmuxWindow] = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 4 and parts[0].isdigit():
            windows.append(TmuxWindow(int(parts[0]), parts[1], parts[2], parts[3] == "1"))
    return windows


def attach_command() -> list[str]:
    """What an interactive `gpuws shell` runs on the host: the one gpuws tmux session, created or attached."""
    return ["tmux", "new", "-A", "-s", TMUX_SESSION]


def shell_argv(profile_name: str, executable: str, frozen: bool) -> list[str]:
    """`gpuws shell NAME` as this installation runs it (the window's Terminal button opens it)."""
    base = [executable] if frozen else [executable, "-m", "gpuws"]
    return [*base, "shell", profile_name]
