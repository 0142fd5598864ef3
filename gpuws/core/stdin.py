"""The one reader of what gpuws takes on stdin: secrets (`gpuws secret set`, `fleet add
--token-stdin` / `--password-stdin`) and answers typed at a terminal (a typed confirmation).

Bounded: reading stops one byte past the bound, so `< /dev/zero` or a 10 MB file is refused after
64 KiB, never read to the end. A secret is UTF-8 text without NUL (no keyring, TOML or terminal
takes a NUL, and a password is typed text); anything else is refused, exit status 2, with the
reason and nothing stored. The value itself never appears in a message.
"""

from __future__ import annotations

import getpass
from typing import TextIO

from gpuws.core.errors import RefusedInput

MAX_SECRET_BYTES = 64 * 1024
MAX_ANSWER_CHARS = 256  # a typed confirmation (a host name) is short


def check_secret(value: str, what: str) -> str:
    """`value` if it is a usable secret: not empty, at most MAX_SECRET_BYTES of UTF-8, no NUL."""
    if not value:
        raise RefusedInput(f"{what}: the value is empty; nothing was stored")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise RefusedInput(f"{what}: the value is not UTF-8 text; nothing was stored") from None
    if size > MAX_SECRET_BYTES:
        raise RefusedInput(f"{what}: the value is more than {MAX_SECRET_BYTES // 1024} KiB "
                           f"(a secret is at most {MAX_SECRET_BYTES} bytes); nothing was stored")
    if "\x00" in value:
        raise RefusedInput(f"{what}: the value holds a NUL byte (a secret is text); nothing was stored")
    return value


def read_piped(stream: TextIO, what: str, max_bytes: int = MAX_SECRET_BYTES) -> str:
    """Everything on `stream` (a pipe or a file, not a terminal) up to `max_bytes`, as UTF-8 text.

    Reads at most `max_bytes + 2` bytes (room for the line break `echo` adds, which is not part of
    the value): more says the input is too large, and the rest is never read.
    """
    binary = getattr(stream, "buffer", None)
    if binary is not None:
        data: bytes = binary.read(max_bytes + 2) or b""
    else:  # a text stream without bytes beneath (tests): characters, each at least one byte
        data = (stream.read(max_bytes + 2) or "").encode("utf-8", "surrogateescape")
    data = data.removesuffix(b"\n").removesuffix(b"\r")
    if len(data) > max_bytes:
        raise RefusedInput(f"{what}: more than {max_bytes // 1024} KiB on stdin "
                           f"(a secret is at most {max_bytes} bytes); nothing was stored")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RefusedInput(f"{what}: stdin is not UTF-8 text; nothing was stored") from None
    return text


def read_secret(stream: TextIO | None, what: str, prompt: str) -> str:
    """A secret from the terminal (a hidden prompt) or, piped, from `stream`; checked as
    `check_secret` says. `what` names it in errors ("secret", "fleet: the bearer token")."""
    if stream is None or stream.closed:
        raise RefusedInput(f"{what}: no input; pipe it on stdin or run in a terminal")
    value = getpass.getpass(prompt) if stream.isatty() else read_piped(stream, what)
    return check_secret(value, what)


def read_answer(stream: TextIO, max_chars: int = MAX_ANSWER_CHARS) -> str:
    """One line typed at a terminal, at most `max_chars` characters read, without its line break."""
    return stream.readline(max_chars + 1).removesuffix("\n").removesuffix("\r")
