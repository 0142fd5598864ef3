"""Edit one record of a profile file in the user's editor, as `crontab -e` and `kubectl edit` do:
the record's table alone in a temp file, checked on save, reopened with the error at the top
until it is valid, or abandoned (saved unchanged, or emptied)."""

from __future__ import annotations

import os
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
from gpuws.core.recordfile import BOM, NamedRecordStore, key_line
from gpuws.core.terminal import printable

MARK = "# gpuws: "  # our own comment lines, dropped before the text is read back


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
    with tempfile.TemporaryDirectory(prefix="gpuws-edit-") as folder:
        path = Path(folder) / f"{name}.toml"
        while True:
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
            saved = path.read_bytes().removeprefix(BOM).decode("utf-8", errors="replace")
            edited = "\n".join(line for line in saved.splitlines() if not line.startswith(MARK)) + "\n"
            if not edited.strip() or saved == shown:
                if error is not None:
                    return fail(f"edit cancelled; nothing changed ({error})", 2)
                print("No changes." if edited.strip() else "Edit cancelled; nothing changed.")
                return 0
            body = edited
            error = None
            try:
                row = tomllib.loads(edited)
            except tomllib.TOMLDecodeError as exc:
                error = f"not valid TOML: {exc}"
                continue
            try:
                warnings = store.replace_row(name, row)
            except ValidationError as exc:
                # The line as the file will be shown again: after the header and this one error line.
                where = key_line(edited.splitlines(), exc.field)
                error = (f"line {where + len(header) + 1}: " if where else "") + f"{exc.field}: {exc.reason}"
                continue
            for warning in warnings:
                print(f"gpuws: warning: {printable(warning)}", file=sys.stderr)
            print(f"Saved {kind} {name!r}.")
            return 0
