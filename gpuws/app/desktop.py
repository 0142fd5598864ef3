"""The remote desktop and the surviving terminal as host tasks, for `gpuws desktop`, `gpuws shell` and
the Session tab alike. Qt-free.

A desktop is a host task like a tunnel: `open_desktop` starts (or reuses) the user's VNC desktop on
the host, bound to the host's loopback, and forwards it through a `Tunnel` on the host's SSH
connection (so it comes back after a reconnect, and a connected viewer counts as activity for the
idle guard once the caller gives the tunnel to the Workspace). The VNC password is made here, per
host, kept in the OS keyring and sent to the host on the agent's stdin only; a viewer gets it
through a 0600 file removed when the viewer is done with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from gpuws.core.desktop import (
    DesktopCheck,
    DesktopError,
    RunningDesktop,
    TmuxWindow,
    Viewer,
    check_display,
    find_viewer,
    new_vnc_password,
    parse_geometry,
    write_password_file,
)
from gpuws.core.errors import RefusedInput
from gpuws.core.jsontypes import JsonObject
from gpuws.core.models import SecretKind
from gpuws.core.runner import CommandResult
from gpuws.core.secrets import SecretStore
from gpuws.core.tunnels import Preset, RemoteServiceDown, TunnelSpec
from gpuws.remote import desktop as remote
from gpuws.remote import shell as shell_remote
from gpuws.remote.connection import HostConnection
from gpuws.remote.tunnels import Tunnel, TunnelCallback

if TYPE_CHECKING:
    from gpuws.app.workspace import Connection, Rebindable, Reopen

__all__ = ["DesktopCheck", "DesktopError", "DesktopSession", "RunningDesktop", "ShellSession", "TmuxWindow",
           "ViewerLaunch", "check", "install", "list_windows", "open_browser_tunnel", "open_desktop", "run_in_shell",
           "stop", "vnc_password"]

VIEWER_READ_S = 30.0  # the password file is removed this long after the viewer started, at the latest


def vnc_password(profile_name: str, secrets: SecretStore | None = None) -> str:
    """The host's VNC password from the keyring, made (at random) and kept there the first time.
    Blocking (the keyring may talk D-Bus)."""
    store = secrets or SecretStore()
    password = store.get(profile_name, SecretKind.VNC_PASSWORD)
    if not password:
        password = new_vnc_password()
        store.set(profile_name, SecretKind.VNC_PASSWORD, password)
    return password


@dataclass
class DesktopSession:
    """A desktop on the host and the tunnel to it (the password stays out of repr)."""

    desktop: RunningDesktop
    tunnel: Tunnel
    password: str = field(repr=False)

    @property
    def url(self) -> str:
        """The noVNC page's address through the local tunnel."""
        return self.tunnel.url

    @property
    def local_port(self) -> int:
        """The tunnel's port on this computer."""
        assert self.tunnel.local_port is not None
        return self.tunnel.local_port

    def first_line(self) -> JsonObject:
        """What `gpuws desktop --json` prints first."""
        return {"url": self.url, "local_port": self.local_port, "display": self.desktop.display,
                "reused": self.desktop.reused}


async def check(connection: HostConnection, *, display: int | None = None) -> DesktopCheck:
    """What the host can serve for a desktop (nothing is installed or started for good)."""
    return await remote.check_desktop(connection.runner, display=display,
                                      simulated=bool(connection.profile.simulated))


async def install(connection: HostConnection, found: DesktopCheck) -> CommandResult | None:
    """Run the host's install command through `sudo -n`; only ever called on the user's yes.
    None when there is nothing gpuws can install. Refused on the simulated host (it would install on
    this computer)."""
    if found.install_command is None:
        return None
    if connection.profile.simulated:
        raise RefusedInput("the demo host is simulated on this computer: gpuws installs nothing here; run "
                           f"`sudo sh -c '{found.install_command}'` yourself if you want the parts")
    return await remote.install_packages(connection.runner, found.install_command)


async def open_desktop(
    connection: HostConnection,
    *,
    geometry: str = "1920x1080",
    display: int | None = None,
    secrets: SecretStore | None = None,
    on_tunnel: TunnelCallback | None = None,
) -> DesktopSession:
    """Start the user's desktop on the host (or reuse the running one) and open a tunnel to it.

    The tunnel is open and its host side answered when this returns; the caller closes it.
    """
    geometry = parse_geometry(geometry)  # bounded before anything runs (Xvnc's limit), for every front end
    if display is not None:
        check_display(display)
    password = await asyncio.to_thread(vnc_password, connection.profile.name, secrets)
    desktop = await remote.start_desktop(connection.runner, password, geometry=geometry, display=display)
    tunnel = await _answering_tunnel(connection, TunnelSpec(remote_port=desktop.port, preset=Preset.VNC), on_tunnel)
    return DesktopSession(desktop, tunnel, password)


async def open_browser_tunnel(connection: HostConnection, on_tunnel: TunnelCallback | None = None) -> Tunnel:
    """noVNC in the browser: websockify on the host's loopback (in front of the running desktop),
    and a tunnel to it. Its `url` is the noVNC page, which asks for the VNC password."""
    port = await remote.start_web(connection.runner)
    return await _answering_tunnel(connection, TunnelSpec(remote_port=port, preset=Preset.NOVNC), on_tunnel)


async def _answering_tunnel(connection: HostConnection, spec: TunnelSpec, on_tunnel: TunnelCallback | None) -> Tunnel:
    """A tunnel whose host side answered (the server was just started: it gets 15 s); closed again
    when it never does, so no half-open tunnel is left behind."""
    tunnel = Tunnel(connection, spec, on_state=on_tunnel)
    await tunnel.open()
    try:
        await tunnel.wait_ready(15)
    except BaseException:
        await tunnel.close()
        raise
    return tunnel


def reopener(geometry: str = "1920x1080", secrets: SecretStore | None = None) -> Reopen:
    """How the Workspace brings a desktop tunnel back when its host returns (`Workspace.add_tunnel`):
    the desktop (or the browser's websockify) found or started again, as on first open."""
    async def reopen(connection: Connection, tunnel: Rebindable) -> str:
        """Probe; when nothing answers, start the desktop (or websockify) and point the tunnel at it."""
        conn, shown = cast(HostConnection, connection), cast(Tunnel, tunnel)
        try:
            await shown.probe()
            return ""
        except RemoteServiceDown:
            pass
        if shown.spec.preset is Preset.NOVNC:
            port, what = await remote.start_web(conn.runner), "the browser desktop"
        else:
            password = await asyncio.to_thread(vnc_password, conn.profile.name, secrets)
            found = await remote.start_desktop(conn.runner, password, geometry=geometry, display=None)
            port, what = found.port, "the desktop"
        shown.retarget(port, None)
        await shown.wait_ready(15)
        return f"{what} started again after the host came back"

    return reopen


def novnc_url(tunnel: Tunnel) -> str:
    """The noVNC page through `tunnel`, connecting back through the same port."""
    return f"{tunnel.url.split('?')[0].rstrip('/')}?autoconnect=1&resize=remote&port={tunnel.local_port}"


async def stop(connection: HostConnection) -> bool:
    """End the user's gpuws desktop on the host; True when one was running."""
    return await remote.stop_desktop(connection.runner)


# -- the viewer -----------------------------------------------------------------------------------------


@dataclass
class ViewerLaunch:
    """A started VNC viewer and its password file (removed by `cleanup`)."""

    viewer: Viewer
    process: subprocess.Popen[bytes]
    password_file: str | None
    started: float

    def cleanup(self, *, force: bool = False) -> bool:
        """Remove the password file once the viewer exited or had time to read it (or when `force`);
        True when it is gone."""
        if self.password_file is None:
            return True
        if force or self.process.poll() is not None or time.monotonic() - self.started >= VIEWER_READ_S:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.password_file)
            self.password_file = None
        return self.password_file is None


def launch_viewer(session: DesktopSession,
                  find: Callable[[int, str], Viewer | None] = find_viewer) -> ViewerLaunch | None:
    """Start this platform's VNC viewer on the tunnel; None when none is installed (nothing written)."""
    probe = find(session.local_port, "")
    if probe is None:
        return None
    path = write_password_file(session.password) if probe.uses_password_file else None
    viewer = find(session.local_port, path or "")
    assert viewer is not None
    try:
        process = subprocess.Popen(viewer.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        if path:
            os.unlink(path)
        raise
    return ViewerLaunch(viewer, process, path, time.monotonic())


# -- the terminal ---------------------------------------------------------------------------------------


async def list_windows(connection: HostConnection) -> list[TmuxWindow]:
    """The host's gpuws tmux windows and what runs in each."""
    return await remote.list_windows(connection.runner)


async def run_in_shell(connection: HostConnection, argv: list[str], timeout: float | None = None) -> CommandResult:
    """Run `argv` on the host next to its gpuws tmux session (created first when tmux is there), so
    `tmux ...` commands drive that session. Raises DesktopError when tmux is missing."""
    if not await remote.has_tmux(connection.runner):
        raise DesktopError("tmux is not installed on the host")
    await remote.ensure_tmux_session(connection.runner)
    return await connection.runner.run(argv, timeout=timeout)


async def has_tmux(connection: HostConnection) -> bool:
    """Whether tmux is installed on the host."""
    return await remote.has_tmux(connection.runner)


class ShellSession:
    """`gpuws shell`: an interactive terminal in the host's gpuws tmux session, attached again after a
    drop (the session and what runs in it live on). Without tmux on the host: a plain shell, a warning,
    and no way back after a drop.

    `output` receives the terminal's bytes; `notice` one-line messages for the user; feed `run` the
    keyboard as an async iterator of bytes (its end ends the session).
    """

    def __init__(self, connection: HostConnection, *, output: Callable[[bytes], None],
                 notice: Callable[[str], None], term_type: str = "xterm-256color",
                 size: tuple[int, int] = (80, 24), reconnect_wait: float = 300.0) -> None:
        self.connection = connection
        self._output = output
        self._notice = notice
        self._term_type = term_type
        self.size = size
        self._reconnect_wait = reconnect_wait
        self._process: shell_remote.TerminalProcess | None = None
        self.attaches = 0  # how many times the terminal was (re)opened
        self.tmux: bool | None = None

    def resize(self, size: tuple[int, int]) -> None:
        """The local terminal's new size (columns, rows)."""
        self.size = size
        if self._process is not None:
            with contextlib.suppress(Exception):
                shell_remote.resize(self._process, size)

    async def run(self, keyboard: AsyncIterator[bytes]) -> int:
        """Attach (again after each drop) until the remote side exits; its exit status."""
        from gpuws.core.desktop import NO_TMUX_WARNING, attach_command

        self.tmux = await remote.has_tmux(self.connection.runner)
        if not self.tmux:
            self._notice(NO_TMUX_WARNING)
        feeder = asyncio.create_task(self._feed(keyboard))
        try:
            while True:
                process = await shell_remote.open_terminal(self.connection, attach_command() if self.tmux else None,
                                                           self._term_type, self.size)
                self._process = process
                self.attaches += 1
                reader = asyncio.create_task(self._drain(process))
                done, _ = await asyncio.wait({reader, feeder}, return_when=asyncio.FIRST_COMPLETED)
                if feeder in done and reader not in done:  # the keyboard ended
                    process.stdin.write_eof()
                    await reader
                await process.wait_closed()
                if not shell_remote.lost(process):
                    return int(process.exit_status or 0) if process.exit_signal is None else 255
                if not self.tmux:
                    self._notice("connection lost; the plain shell and what ran in it are gone")
                    return 255
                self._notice("connection lost; attaching again to the tmux session when it is back…")
                await self.connection.ssh(self._reconnect_wait)
                self._notice("attached again")
        finally:
            self._process = None
            feeder.cancel()
            with contextlib.suppress(BaseException):
                await feeder

    async def _drain(self, process: shell_remote.TerminalProcess) -> None:
        with contextlib.suppress(Exception):
            while data := await process.stdout.read(65536):
                self._output(data)

    async def _feed(self, keyboard: AsyncIterator[bytes]) -> None:
        async for data in keyboard:
            while self._process is None or self._process.stdin.is_closing():
                await asyncio.sleep(0.05)  # between a drop and the next attach
            with contextlib.suppress(Exception):
                self._process.stdin.write(data)
