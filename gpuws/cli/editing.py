"""Edit one record of a profile file in the user's editor, as `crontab -e` and `kubectl edit` do:
the record's table alone in a temp file, checked on save, reopened with the error at the top
until it is valid, or abandoned (saved unchanged, or emptied).

Bounded: the editor is reopened at most after two invalid saves in a row (the third ends the
edit), and never when stdin is not a terminal (no one is there to fix it: an editor that writes
invalid TOML at once would otherwise be relaunched without end); the saved text is read only up to
`MAX_EDIT_BYTES`; a table gpuws does not know (a `[[hosts]]` header typed in) is refused, never
nested into the record.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from gpuws.cli.output import fail
from gpuws.core.errors import ValidationError
from gpuws.core.files import LocalFileRefused, read_regular_file
from gpuws.core.nesting import NestingTooDeep, load_toml
from gpuws.core.recordfile import BOM, NamedRecordStore, key_line
from gpuws.core.terminal import printable

MARK = "# gpuws: "  # our own comment lines, dropped before the text is read back
MAX_INVALID_SAVES = 3  # in a row: then the edit ends, nothing changed
MAX_EDIT_BYTES = 1024 * 1024  # one record is a few hundred bytes; notes are capped well below this


def stdin_is_terminal() -> bool:
    """Whether someone is at a terminal to fix an invalid save (the real fd 0, as the editor gets it)."""
    try:
        return os.isatty(0)
    except OSError:
        return False


def _line_of(text: str, key: str) -> int | None:
    """The line of `key` in the edited text: where it is set, else a table header naming it."""
    where = key_line(text.splitlines(), key)
    if where is None:
        header = re.compile(r"^\s*\[+\s*[\"']?" + re.escape(key.split(".")[0]) + r"\b")
        where = next((n for n, line in enumerate(text.splitlines(), start=1) if header.match(line)), None)
    return where


def editor_command() -> list[str]:
    """$VISUAL, else $EDITOR, else vi (what crontab and git do), split as a shell would."""
    return shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")


def edit_in_editor(store: NamedRecordStore[Any], name: str) -> int:
    """Edit the record called `name`; returns the exit status (0 saved or unchanged, 2 abandoned
    while invalid, 1 the editor failed)."""
    kind = store.kind
    body = tomli_w.dumps(store.row(name))
    header = [f"{MARK}editing the {kind} {name!r} of {store.path}",
              f"{MARK}save and quit to apply; quit without changes (or empty the file) to cancel"]
    error: str | None = None
    invalid = 0  # invalid saves in a row
    with tempfile.TemporaryDirectory(prefix="gpuws-edit-") as folder:
        path = Path(folder) / f"{name}.toml"
        while True:
            if error is not None:
                invalid += 1
                if invalid >= MAX_INVALID_SAVES or not stdin_is_terminal():
                    why = (f"{invalid} invalid saves in a row" if invalid >= MAX_INVALID_SAVES
                           else "stdin is not a terminal, so the editor is not reopened")
                    return fail(f"edit abandoned ({why}); nothing changed: {error}", 2)
            lines = header + ([f"{MARK}ERROR: {line}" for line in error.splitlines()] if error else [])
            shown = "\n".join(lines) + "\n" + body
            path.write_text(shown, encoding="utf-8")
            path.chmod(0o600)
            try:
                status = subprocess.call([*editor_command(), str(path)])
            except OSError as exc:
                return fail(f"cannot start the editor {editor_command()[0]!r}: {exc.strerror} (set $VISUAL or $EDITOR)",
                            1)
            if status != 0:
                return fail(f"the editor exited with status {status}; nothing changed", 1)
            try:
                raw = read_regular_file(path, MAX_EDIT_BYTES, what="the edited text")
            except (LocalFileRefused, FileNotFoundError) as exc:
                reason = str(exc) if isinstance(exc, LocalFileRefused) else "the edited file is gone"
                return fail(f"{reason}; nothing changed", 2)
            saved = raw.removeprefix(BOM).decode("utf-8", errors="replace")
            edited = "\n".join(line for line in saved.splitlines() if not line.startswith(MARK)) + "\n"
            if not edited.strip() or saved == shown:
                if error is not None:
                    return fail(f"edit cancelled; nothing changed ({error})", 2)
                print("No changes." if edited.strip() else "Edit cancelled; nothing changed.")
                return 0
            body = edited
            error = None
            try:
                row = load_toml(edited)
            except NestingTooDeep as exc:
                error = f"line {exc.line + len(header) + 1}: nested more than {exc.limit} levels deep"
                continue
            except tomllib.TOMLDecodeError as exc:
                error = f"not valid TOML: {exc}"
                continue
            except RecursionError:
                error = "not valid TOML: nested too deeply"
                continue
            try:
                warnings = store.replace_row(name, row)
            except ValidationError as exc:
                # The line as the file will be shown again: after the header and this one error line.
                where = _line_of(edited, exc.field)
                error = (f"line {where + len(header) + 1}: " if where else "") + f"{exc.field}: {exc.reason}"
                continue
            for warning in warnings:
                print(f"gpuws: warning: {printable(warning)}", file=sys.stderr)
            print(f"Saved {kind} {name!r}.")
            return 0
