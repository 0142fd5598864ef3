"""The `ssh` command line equivalent to a profile, and how to open it in the user's terminal.

gpuws opens the user's own terminal emulator rather than embedding one: the user keeps their
terminal, fonts and keys, and the command can be copied and pasted anywhere.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence

from gpuws.core.errors import GpuwsError
from gpuws.core.models import AuthMethod, HostProfile

MAX_JUMP_DEPTH = 8


def _host_for_jump(profile: HostProfile) -> str:
    host = f"[{profile.host}]" if ":" in profile.host else profile.host
    user = f"{profile.user}@" if profile.user else ""
    port = f":{profile.port}" if profile.port != 22 else ""
    return f"{user}{host}{port}"


def jump_chain(profile: HostProfile, lookup: Callable[[str], HostProfile]) -> list[HostProfile]:
    """The jump hosts in the order ssh must pass them (outermost first); refuses cycles."""
    chain: list[HostProfile] = []
    seen = {profile.name}
    current = profile
    while current.jump:
        if current.jump in seen or len(chain) >= MAX_JUMP_DEPTH:
            raise GpuwsError(f"jump: the jump hosts of '{profile.name}' form a loop at '{current.jump}'")
        seen.add(current.jump)
        current = lookup(current.jump)
        chain.append(current)
    chain.reverse()
    return chain


def ssh_argv(profile: HostProfile, lookup: Callable[[str], HostProfile]) -> list[str]:
    """The OpenSSH command for `profile`, jump hosts included, as an argument list."""
    argv = ["ssh"]
    if profile.port != 22:
        argv += ["-p", str(profile.port)]
    if profile.auth is AuthMethod.KEY and profile.key_path:
        argv += ["-i", os.path.expanduser(profile.key_path)]
    chain = jump_chain(profile, lookup)
    if chain:
        argv += ["-J", ",".join(_host_for_jump(j) for j in chain)]
    if profile.user:
        argv += ["-l", profile.user]
    # "--" so a host can never be read as an option, even though validation already refuses that.
    argv += ["--", profile.host]
    return argv


def ssh_command_line(profile: HostProfile, lookup: Callable[[str], HostProfile]) -> str:
    """The same command as one shell-quoted line, for the clipboard."""
    return shlex.join(ssh_argv(profile, lookup))


# How each known terminal emulator takes a command to run, most specific first.
_TERMINALS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("x-terminal-emulator", ("-e",)),
    ("gnome-terminal", ("--",)),
    ("konsole", ("-e",)),
    ("xfce4-terminal", ("-x",)),
    ("kitty", ()),
    ("alacritty", ("-e",)),
    ("wezterm", ("start", "--")),
    ("foot", ()),
    ("xterm", ("-e",)),
)


def terminal_argv(
    command: Sequence[str],
    *,
    preferred: str | None = None,
    which: Callable[[str], str | None] = shutil.which,
    platform: str = sys.platform,
) -> list[str]:
    """An argv that opens `command` in a terminal window on this desktop.

    `preferred` (or $TERMINAL) wins when it is installed. Raises GpuwsError naming what to install
    when no terminal is found.
    """
    if platform == "darwin":
        script = f'tell application "Terminal" to do script {shlex.quote(shlex.join(command))}'
        return ["osascript", "-e", script]
    if platform.startswith("win"):
        return ["cmd", "/c", "start", "", *command]
    wanted = preferred or os.environ.get("TERMINAL")
    candidates = list(_TERMINALS)
    if wanted:
        flags = dict(_TERMINALS).get(os.path.basename(wanted), ("-e",))
        candidates.insert(0, (wanted, flags))
    for name, flags in candidates:
        path = which(name)
        if path:
            return [path, *flags, *command]
    raise GpuwsError("terminal: no terminal emulator found; install one (e.g. xterm) or set $TERMINAL")
