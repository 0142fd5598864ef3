"""Depth bounds for the YAML and TOML the user hands gpuws (mig-parted configs, profiles.toml,
fleets.toml, a profile edited in $EDITOR).

PyYAML's composer and Python's tomllib recurse once (or more) per nesting level, so a 1 KB file of
500 `[` ends in a RecursionError with a traceback thousands of lines long. These checks walk the
text without recursion first and refuse anything nested deeper than MAX_NESTING, naming the line
where the limit is passed; real files are nested a few levels deep.

`load_toml` is the TOML reader to call (tomllib behind the bound); `check_toml_nesting` and
`check_yaml_nesting` raise `NestingTooDeep` for callers that parse themselves.
"""

from __future__ import annotations

import tomllib

from gpuws.core.errors import RefusedInput

MAX_NESTING = 64  # tomllib fails near 330 levels, PyYAML near 450; real configs use under 10


class NestingTooDeep(RefusedInput):
    """A document nested deeper than the bound; `line` (1-based) is where it passes it."""

    def __init__(self, line: int, limit: int) -> None:
        super().__init__(f"line {line}: nested more than {limit} levels deep; not read")
        self.line = line
        self.limit = limit


def check_toml_nesting(text: str, limit: int = MAX_NESTING) -> None:
    """Raise NestingTooDeep when arrays and inline tables in `text` nest deeper than `limit`.

    A scan, not a parse: strings (basic, literal, multi-line) and comments are skipped so their
    brackets do not count; a `[` opening a line outside any value is a table header, not nesting.
    """
    depth = 0
    line = 1
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            line_start = True
            i += 1
            continue
        if c in " \t\r":
            i += 1
            continue
        at_line_start, line_start = line_start, False
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c in "\"'":
            triple = text.startswith(c * 3, i)
            quote = c * 3 if triple else c
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                if c == '"' and text[j] == "\\":
                    j += 1
                elif text[j] == "\n":
                    if not triple:
                        break  # an unclosed one-line string: tomllib reports it
                    line += 1
                j += 1
            if triple:  # up to two quotes may close a multi-line string ("""a"""" is a" + ")
                j += len(quote)
                while j < n and text[j] == c:
                    j += 1
            else:
                j += 1
            i = j
        elif c == "[" and depth == 0 and at_line_start:
            # A table header: `[name]` or `[[name]]`, never a value.
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c in "[{":
            depth += 1
            if depth > limit:
                raise NestingTooDeep(line, limit)
            i += 1
        elif c in "]}":
            depth = max(0, depth - 1)
            i += 1
        else:
            i += 1


def load_toml(text: str, limit: int = MAX_NESTING) -> dict[str, object]:
    """`tomllib.loads(text)` behind the depth bound (NestingTooDeep names the line)."""
    check_toml_nesting(text, limit)
    return tomllib.loads(text)


def check_yaml_nesting(text: str, limit: int = MAX_NESTING) -> None:
    """Raise NestingTooDeep when collections in the YAML `text` nest deeper than `limit`.

    PyYAML's scanner and parser are state machines (no recursion): their event stream gives the
    depth of flow (`[`, `{`) and block (indentation, `- - -`) collections alike before the
    recursive composer runs. A syntax error is left for the loader to report.
    """
    import yaml

    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                depth += 1
                if depth > limit:
                    mark = event.start_mark
                    raise NestingTooDeep(mark.line + 1 if mark is not None else 0, limit)
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return
