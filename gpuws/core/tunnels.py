"""Tunnel presets and port logic: which remote port a service uses and how its URL looks.

Qt-free and network-free: the remote layer (`gpuws.remote.tunnels`) listens and forwards; this
module says what to forward and what to open afterwards. A Jupyter URL carries its token so the
browser logs in by itself, so every URL shown or logged goes through `redact_url` first.
"""

from __future__ import annotations

import errno
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from gpuws.core.errors import GpuwsError, ValidationError

LOOPBACK = "127.0.0.1"
VNC_BASE_PORT = 5900
MASK = "***"
_SECRET_QUERY_KEYS = frozenset({"token", "auth", "password"})


class TunnelState(StrEnum):
    """Where a tunnel stands (shown in the Session tab and by `gpuws tunnel`)."""

    CLOSED = "closed"
    LISTENING = "listening"  # listening here; nothing reached on the host yet
    OPEN = "open"  # a connection through the tunnel reached the service on the host
    WAITING = "waiting"  # listening; the SSH connection is down or reconnecting
    FAILED = "failed"  # the last channel could not be opened (see `last_error`)


class TunnelError(GpuwsError):
    """A tunnel could not be opened or used."""


class LocalPortBusy(TunnelError):
    """The local port asked for is taken by another program."""

    def __init__(self, port: int) -> None:
        super().__init__(f"local port {port} is in use by another program; choose another or leave --local empty")
        self.port = port


class TunnelLoop(TunnelError):
    """The local port asked for is the tunnel's own destination (the host is this machine)."""

    def __init__(self, port: int) -> None:
        super().__init__(f"local port {port} is the tunnel's own destination (the host is this machine); "
                         "choose another local port or leave it on auto")
        self.port = port


class RemoteServiceDown(TunnelError):
    """The tunnel works but nothing accepts connections on the host side."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(f"nothing is listening on {host}:{port}")
        self.host = host
        self.port = port


class Preset(StrEnum):
    JUPYTER = "jupyter"
    TENSORBOARD = "tensorboard"
    VNC = "vnc"
    DCV = "dcv"
    NOVNC = "novnc"
    CUSTOM = "custom"


@dataclass(frozen=True)
class PresetInfo:
    """How one kind of service is reached: its usual port and the URL to open."""

    preset: Preset
    label: str
    default_port: int | None  # None: the user gives the port (custom)
    scheme: str  # "http", "https" or "vnc" (a viewer, not the browser)
    path: str = "/"

    @property
    def opens_in_browser(self) -> bool:
        """Whether the service is a web page (http or https)."""
        return self.scheme in ("http", "https")


PRESETS: dict[Preset, PresetInfo] = {
    Preset.JUPYTER: PresetInfo(Preset.JUPYTER, "Jupyter", 8888, "http"),
    Preset.TENSORBOARD: PresetInfo(Preset.TENSORBOARD, "TensorBoard", 6006, "http"),
    Preset.VNC: PresetInfo(Preset.VNC, "VNC desktop", VNC_BASE_PORT + 1, "vnc"),
    Preset.DCV: PresetInfo(Preset.DCV, "NICE DCV", 8443, "https"),
    Preset.NOVNC: PresetInfo(Preset.NOVNC, "noVNC (browser desktop)", 6080, "http", "/vnc.html"),
    Preset.CUSTOM: PresetInfo(Preset.CUSTOM, "Custom port", None, "http"),
}


def parse_preset(value: str | Preset | None) -> Preset:
    """A preset from its name ("jupyter", ...); None means custom."""
    if value is None:
        return Preset.CUSTOM
    try:
        return Preset(str(value).lower())
    except ValueError:
        names = ", ".join(p.value for p in Preset)
        raise ValidationError("preset", f"unknown preset {value!r}; use one of {names}") from None


def vnc_port(display: int) -> int:
    """The TCP port of VNC display :N (5900 + N)."""
    if not 0 <= display <= 99:
        raise ValidationError("display", "use a VNC display number from 0 to 99")
    return VNC_BASE_PORT + display


def check_port(port: int, field: str = "port") -> int:
    """`port` when it is a TCP port (1-65535); else ValidationError naming `field`."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValidationError(field, f"{port!r} is not a TCP port (1-65535)")
    return port


@dataclass(frozen=True)
class TunnelSpec:
    """One local port forward: 127.0.0.1:`local_port` here -> `remote_host`:`remote_port` there.

    `local_port` None means "the same number as the remote port if it is free, else any free one".
    """

    remote_port: int
    local_port: int | None = None
    preset: Preset = Preset.CUSTOM
    remote_host: str = LOOPBACK  # as seen from the host (its own services by default)

    def __post_init__(self) -> None:
        check_port(self.remote_port, "remote")
        if self.local_port is not None:
            check_port(self.local_port, "local")
        if not self.remote_host or any(c.isspace() for c in self.remote_host) or self.remote_host.startswith("-"):
            raise ValidationError("remote_host", "give a host name or address as seen from the host")

    @property
    def info(self) -> PresetInfo:
        return PRESETS[self.preset]

    def local_port_candidates(self, *, loops_back: bool = False) -> list[int]:
        """Local ports to try in order; 0 at the end means "let the OS choose". `loops_back`: the host
        is this machine, so the remote port's own number would connect the tunnel to itself."""
        if self.local_port is not None:
            return [self.local_port]
        return [0] if loops_back else [self.remote_port, 0]


def spec_for(preset: str | Preset | None, remote_port: int | None = None, local_port: int | None = None) -> TunnelSpec:
    """A tunnel spec from CLI/GUI choices: the preset's usual port unless one is given."""
    chosen = parse_preset(preset)
    port = remote_port if remote_port is not None else PRESETS[chosen].default_port
    if port is None:
        raise ValidationError("remote", "give the remote port (--remote PORT) for a custom tunnel")
    return TunnelSpec(remote_port=port, local_port=local_port, preset=chosen)


def tunnel_url(spec: TunnelSpec, local_port: int, *, token: str | None = None, path: str | None = None) -> str:
    """What to open for a tunnel on `local_port` (with the Jupyter token when there is one)."""
    info = spec.info
    if info.scheme == "vnc":
        return f"vnc://{LOOPBACK}:{local_port}"
    query = urlencode({"token": token}) if token else ""
    return urlunsplit((info.scheme, f"{LOOPBACK}:{local_port}", path or info.path, query, ""))


def redact_url(url: str) -> str:
    """The URL with any token/password query value replaced by ***: safe to print or log."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = [(k, MASK if k.lower() in _SECRET_QUERY_KEYS else v) for k, v in parse_qsl(parts.query, True)]
    return urlunsplit(parts._replace(query=urlencode(query, safe="*")))


def is_address_in_use(exc: OSError) -> bool:
    """Whether binding failed because the local port is taken (or, EACCES, not ours to bind)."""
    return exc.errno in (errno.EADDRINUSE, errno.EACCES) or "address already in use" in str(exc).lower()


def vnc_viewer_argv(local_port: int, which: Callable[[str], str | None] = shutil.which) -> list[str] | None:
    """A VNC viewer command for the tunnel's local end, or None when none is installed."""
    target = f"{LOOPBACK}::{local_port}"  # "::" = a port, not a display number, for every viewer
    for name in ("vncviewer", "xtigervncviewer", "tigervnc", "gvncviewer", "xvnc4viewer"):
        path = which(name)
        if path:
            return [path, target]
    remmina = which("remmina")
    if remmina:
        return [remmina, "-c", f"vnc://{LOOPBACK}:{local_port}"]
    return None


# -- Jupyter ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JupyterServer:
    """A running Jupyter server as `jupyter server list --json` reports it (token kept private)."""

    port: int
    token: str = ""
    base_url: str = "/"
    root_dir: str = ""
    pid: int | None = None

    def __repr__(self) -> str:  # never print the token, even in a traceback or a debug log
        return (f"JupyterServer(port={self.port}, base_url={self.base_url!r}, "
                f"root_dir={self.root_dir!r}, pid={self.pid})")

    def url(self, local_port: int) -> str:
        """The browser URL through a tunnel on `local_port`, logging in with the token."""
        # The root redirects to the server's default page (Lab or the classic tree) after login.
        base = self.base_url if self.base_url.endswith("/") else self.base_url + "/"
        spec = TunnelSpec(remote_port=self.port, preset=Preset.JUPYTER)
        return tunnel_url(spec, local_port, token=self.token or None, path=base)


def parse_jupyter_list(text: str) -> list[JupyterServer]:
    """Servers from `jupyter server list --json` / `jupyter notebook list --json` (one object a line).

    Lines that are not JSON objects (warnings, banners) are skipped; an entry without a usable port
    is skipped too. Older `notebook list --json` prints the same keys with `notebook_dir`.
    """
    servers: list[JupyterServer] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            raw = json.loads(line)
        except ValueError:
            continue
        if not isinstance(raw, dict):
            continue
        port = raw.get("port")
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            continue
        pid = raw.get("pid")
        servers.append(
            JupyterServer(
                port=port,
                token=str(raw.get("token") or ""),
                base_url=str(raw.get("base_url") or "/"),
                root_dir=str(raw.get("root_dir") or raw.get("notebook_dir") or ""),
                pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            )
        )
    return servers
