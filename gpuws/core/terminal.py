"""Terminals: making host and profile strings safe to print, the `ssh` command line for a profile,
and how to open it in the user's terminal.

`printable()` is the one sanitiser every string from a host or a profile passes through before it
reaches a terminal: control characters (newline, ESC, ...), bidi overrides and isolates, zero-width
and other invisible format characters are shown escaped (`\\n`, `\\x1b`, `\\u202e`), so a value
is always one visible line and cannot rewrite what is around it.

gpuws opens the user's own terminal emulator rather than embedding one: the user keeps their
terminal, fonts and keys, and the command can be copied and pasted anywhere.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Callable, Sequence

from gpuws.core.errors import GpuwsError
from gpuws.core.models import AuthMethod, HostProfile

# Unicode categories never shown raw: controls, format characters (bidi, zero-width, BOM), line
# and paragraph separators, and lone surrogates (undecodable bytes kept by surrogateescape).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(value: object, max_length: int | None = None) -> str:
    """`value` as one line a terminal shows literally: hidden and control characters escaped.

    `max_length` (characters of the result) cuts long values with an ellipsis.
    """
    text = value if isinstance(value, str) else str(value)
    if text.isprintable() and text.isascii():
        out = text
    else:
        out = "".join(_escape(c) if unicodedata.category(c) in _HIDDEN_CATEGORIES else c for c in text)
    if max_length is not None and len(out) > max_length:
        out = out[: max(0, max_length - 1)] + "\u2026"
    return out


def _host_for_jump(profile: HostProfile) -> str:
    host = f"[{profile.host}]" if ":" in profile.host else profile.host
    user = f"{profile.user}@" if profile.user else ""
    port = f":{profile.port}" if profile.port != 22 else ""
    return f"{user}{host}{port}"


def jump_chain(profile: HostProfile, lookup: Callable[[str], HostProfile]) -> list[HostProfile]:
    """The jump hosts in the order ssh must pass them (outermost first); refuses cycles."""
    from gpuws.core.jumps import jump_hops

    return jump_hops(profile, lookup)


def ssh_argv(profile: HostProfile, lookup: Callable[[str], HostProfile]) -> list[str]:
    """The OpenSSH command for `profile`, jump hosts included, as an argument list."""
    argv = ["ssh"]
    if profile.port != 22:
        argv += ["-p", str(profile.port)]
    if profile.auth is AuthMethod.KEY and profile.key_path:
        for key in (profile.key_path, *profile.identity_files):  # ssh tries each -i in order
            argv += ["-i", os.path.expanduser(key)]
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
    import shlex  # not at import: this module is on every quick command's path (#35)

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
    which: Callable[[str], str | None] | None = None,
    platform: str = sys.platform,
) -> list[str]:
    """An argv that opens `command` in a terminal window on this desktop.

    `preferred` (or $TERMINAL) wins when it is installed. Raises GpuwsError naming what to install
    when no terminal is found.
    """
    if which is None:
        import shutil  # here: this module is on every quick command's path, which needs no shutil (#35)

        which = shutil.which
    if platform == "darwin":
        import shlex

        script = f'tell application "Terminal" to do script {shlex.quote(shlex.join(command))}'
        return ["osascript", "-e", script]
    if platform.startswith("win"):
        windows_terminal = which("wt")  # Windows Terminal, where installed; else a cmd window
        return [windows_terminal, *command] if windows_terminal else ["cmd", "/c", "start", "", *command]
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
