"""`gpuws desktop NAME`: check, install, start or reuse, view and stop the host's remote desktop.

A thin adapter over `gpuws.app.desktop`: the desktop runs on the host's loopback and is reached
through a tunnel on the host's SSH connection, held here until Ctrl-C (or the viewer exits).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TYPE_CHECKING, Any

from gpuws.cli.connecting import add_accept_new, tty_prompts
from gpuws.cli.output import Subcommands, print_json, sim_banner, whole_number

if TYPE_CHECKING:
    from gpuws.app.desktop import DesktopSession
    from gpuws.core.desktop import DesktopCheck
    from gpuws.core.models import HostProfile

_EPILOG = """The desktop listens on the host's 127.0.0.1 only; its VNC password is made at random per host,
kept in the OS keyring (gpuws / NAME:vnc-password) and sent to the host on stdin (vncpasswd -f).
A second `gpuws desktop NAME` reuses the running desktop. Ctrl-C closes the tunnel; the desktop keeps
running on the host until --stop. Exit status: see `gpuws --help`."""


def register(sub: Subcommands) -> None:
    """Register `gpuws desktop`."""
    p = sub.add_parser(
        "desktop",
        help="start or reuse a remote desktop (VNC) on the host and open it through a tunnel",
        description="Start a VNC desktop on the host of profile NAME (or reuse the running one), forward it "
        "through the SSH connection and open a viewer. NAME 'demo' without such a profile uses the built-in "
        "simulated GPU host.",
        epilog=_EPILOG,
    )
    p.add_argument("name", metavar="NAME", help="host profile name")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true", help="say what the host can serve (VNC server, "
                        "VirtualGL, OpenGL renderer, NVENC, desktop session) and what is missing")
    action.add_argument("--install", action="store_true", help="install what is missing, with sudo on the host")
    action.add_argument("--stop", action="store_true", help="end the desktop on the host")
    p.add_argument("--viewer", choices=("builtin", "auto", "browser", "none"), default=None,
                   help="builtin: gpuws's own viewer window (the default where there is a display); auto: a VNC "
                   "viewer of this computer (the default without a display); browser: noVNC; none: print the "
                   "address and hold the tunnel until Ctrl-C")
    p.add_argument("--geometry", default="1920x1080", metavar="WxH", help="desktop size (default 1920x1080)")
    p.add_argument("--display", type=whole_number, default=None, metavar="N", help="X display number on the host "
                   "(default: the first free from :1)")
    p.add_argument("--json", action="store_true", help="print JSON (the first line describes the desktop)")
    add_accept_new(p)
    p.set_defaults(handler=run_desktop)


def run_desktop(args: argparse.Namespace) -> int:
    """`gpuws desktop NAME`: check, install, start or reuse, view or stop the host's remote desktop."""
    from gpuws.core.desktop import check_display, parse_geometry

    args.geometry = parse_geometry(args.geometry)
    if args.display is not None:
        check_display(args.display)
    if args.viewer is None:
        args.viewer = "builtin" if has_display() else "auto"
    if args.viewer == "builtin" and not (args.check or args.install or args.stop):
        return _builtin(args)
    return int(asyncio.run(_desktop(args)))


def has_display() -> bool:
    """Whether a window can be shown here (Windows and macOS always; elsewhere X11 or Wayland)."""
    import os

    if sys.platform in ("win32", "darwin"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _builtin(args: argparse.Namespace) -> int:
    """The desktop in gpuws's viewer window: the tunnel is held by an event loop on a thread of its own
    while Qt runs on this (the main) thread; closing the window closes the tunnel, not the desktop."""
    import queue
    import threading

    handoff: queue.Queue[tuple[HostProfile, DesktopSession, DesktopCheck] | BaseException] = queue.Queue()
    done: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}

    async def serve() -> None:
        """Open the host and the desktop, hand them over, hold the tunnel until told to stop."""
        from gpuws.app import desktop
        from gpuws.app.targets import open_target

        try:
            async with open_target(args.name, accept_new=args.accept_new, **tty_prompts()) as conn:
                session = await desktop.open_desktop(conn, geometry=args.geometry, display=args.display)
                try:
                    found = await desktop.check(conn)
                    stop = asyncio.Event()
                    done["stop"] = (asyncio.get_running_loop(), stop)
                    handoff.put((conn.profile, session, found))
                    await stop.wait()
                finally:
                    await session.tunnel.close()
        except BaseException as exc:
            handoff.put(exc)

    thread = threading.Thread(target=lambda: asyncio.run(serve()), name="gpuws-desktop-tunnel", daemon=True)
    thread.start()
    got = handoff.get()
    if isinstance(got, BaseException):
        thread.join(10)
        raise got
    profile, session, found = got
    banner = sim_banner(bool(profile.simulated))
    if args.json:
        print_json(session.first_line())
    else:
        again = " (already running: reused)" if session.desktop.reused else ""
        print(f"{banner}desktop :{session.desktop.display}{again} at {session.url}  ->  {args.name}:"
              f"{session.desktop.port}  (closing the viewer closes the tunnel; --stop ends the desktop)", flush=True)
    for label in found.labels():
        _say(f"{banner}gpuws: {label}")
    from gpuws.ui.vnc.window import run_window

    try:
        return run_window(args.name, session.local_port, session.password, simulated=bool(profile.simulated),
                          found=found, display=session.desktop.display,
                          shown=lambda: _say("gpuws: viewer open (closing it, or Ctrl-C, closes the tunnel)"))
    finally:
        loop, stop = done["stop"]
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _print_check(found: DesktopCheck, banner: str) -> None:
    rows = (
        ("VNC server", f"{found.vnc_server} ({found.vnc_kind})" if found.vnc_server else "none"),
        ("VirtualGL", "yes (vglrun)" if found.virtualgl else "no"),
        ("OpenGL renderer", found.opengl_renderer or "unknown (no glxinfo or no X server to ask)"),
        ("Desktop session", found.desktop_session or "none"),
        ("noVNC (browser)", "yes" if found.websockify and found.novnc else "no"),
        ("NICE DCV", found.dcv or "no"),
        ("Selkies", found.selkies or "no"),
        ("tmux", "yes" if found.tmux else "no"),
    )
    for label, value in rows:
        print(f"{banner}{label + ':':17} {value}")
    for gpu in found.nvenc:
        encoder = {True: "NVENC", False: "no video encoder", None: "unknown"}[gpu.nvenc]
        print(f"{banner}GPU {gpu.index}: {gpu.name}: {encoder}")
    if found.running_display is not None:
        print(f"{banner}running desktop: :{found.running_display}")
    for label in found.labels():
        print(f"{banner}warning: {label}")
    if found.missing:
        print(f"{banner}missing: {', '.join(found.missing)}")
    if found.install_command:
        print(f"{banner}install with: sudo sh -c '{found.install_command}'  (or: gpuws desktop NAME --install)")


async def _desktop(args: argparse.Namespace) -> int:
    from gpuws.app import desktop
    from gpuws.app.targets import open_target

    async with open_target(args.name, accept_new=args.accept_new, **tty_prompts()) as conn:
        banner = sim_banner(bool(conn.profile.simulated))
        if args.check or args.install:
            found = await desktop.check(conn, display=args.display)
            if args.check:
                if args.json:
                    print_json(found.to_dict())
                else:
                    _print_check(found, banner)
                return 0
            return await _install(conn, found, args.json)
        if args.stop:
            stopped = await desktop.stop(conn)
            if args.json:
                print_json({"stopped": stopped})
            else:
                print(f"{banner}desktop stopped" if stopped else f"{banner}no desktop was running")
            return 0
        return await _hold(conn, args, banner)


async def _install(conn: Any, found: DesktopCheck, as_json: bool) -> int:
    from gpuws.app import desktop

    if found.install_command is None:
        if as_json:
            print_json({"installed": False, "install_command": None, "missing": found.missing})
        else:
            print("nothing gpuws can install" + (f" (missing: {', '.join(found.missing)})" if found.missing else ""))
        return 0
    if not as_json:
        _say(f"installing on {conn.profile.name} with sudo: {found.install_command}")
    result = await desktop.install(conn, found)
    assert result is not None
    if as_json:
        print_json({"installed": result.ok, "install_command": found.install_command,
                    "exit_status": result.exit_status})
    elif not result.ok:
        _say(f"gpuws: the install failed (exit {result.exit_status}): {result.stderr.strip()[-400:]}")
        if "password" in result.stderr.lower():
            _say("gpuws: sudo needs a password there: run the command in `gpuws shell NAME`")
    return 0 if result.ok else 1


async def _hold(conn: Any, args: argparse.Namespace, banner: str) -> int:
    from gpuws.app import desktop

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def on_tunnel(_t: object, state: object, detail: str) -> None:
        """Say on stderr why the tunnel failed or waits."""
        if detail and str(state) in ("failed", "waiting"):
            _say(f"gpuws: tunnel: {detail}")

    session = await desktop.open_desktop(conn, geometry=args.geometry, display=args.display, on_tunnel=on_tunnel)
    viewer = None
    browser = None
    try:
        if args.json:
            print_json(session.first_line())
        else:
            again = " (already running: reused)" if session.desktop.reused else ""
            print(f"{banner}desktop :{session.desktop.display}{again} at {session.url}  ->  "
                  f"{args.name}:{session.desktop.port}  (Ctrl-C closes the tunnel; --stop ends the desktop)",
                  flush=True)
        found = await desktop.check(conn)
        for label in found.labels():
            _say(f"{banner}gpuws: {label}")
        if args.viewer == "browser":
            browser = await desktop.open_browser_tunnel(conn, on_tunnel=on_tunnel)
            url = desktop.novnc_url(browser)
            _say(f"{banner}noVNC: {url} (it asks for the VNC password: `gpuws secret` keeps it as "
                 f"{args.name}:vnc-password)")
            _open_browser(url)
        elif args.viewer == "auto":
            viewer = desktop.launch_viewer(session)
            if viewer is None:
                _say("gpuws: no VNC viewer found here (TigerVNC, Remmina...); connect yours to "
                     f"{session.url} or use --viewer browser")
            elif viewer.password_file is None:
                _say(f"gpuws: {viewer.viewer.name} asks for the password; it is in your keyring as "
                     f"{args.name}:vnc-password")
        while not stop.is_set():
            if viewer is not None:
                viewer.cleanup()
                if viewer.process.poll() is not None and viewer.viewer.uses_password_file:
                    break  # the viewer window was closed: so is the tunnel
            with _suppress_timeout():
                await asyncio.wait_for(stop.wait(), 1.0)
    finally:
        if viewer is not None:
            viewer.cleanup(force=True)
        if browser is not None:
            await browser.close()
        await session.tunnel.close()
    return 0


class _suppress_timeout:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is TimeoutError


def _open_browser(url: str) -> None:
    import webbrowser

    if not webbrowser.open(url):
        _say("gpuws: no browser found; open the noVNC URL yourself")
