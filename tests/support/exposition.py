"""Parse Prometheus text exposition (what dcgm-exporter serves) into instant vectors, for tests.

Only what dcgm-exporter prints: `name{labels} value` lines, HELP/TYPE comments. It lets a test
compare what the exporters served with what gpuws read back through Prometheus.
"""

from __future__ import annotations

import re
from typing import Any

_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            raise ValueError(f"bad labels: {text[pos:pos + 40]!r}")
        labels[match.group(1)] = match.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = match.end()
    return labels


def parse(text: str) -> list[tuple[str, dict[str, str], str]]:
    """(metric, labels, value text) for every sample line."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = _LINE.match(line.strip())
        if match is None:
            raise ValueError(f"not a sample line: {line[:80]!r}")
        out.append((match.group(1), parse_labels(match.group(2) or ""), match.group(3)))
    return out


def label_names(line: str) -> list[str]:
    """Label names of one sample line, in order."""
    match = _LINE.match(line.strip())
    assert match is not None, line
    return list(parse_labels(match.group(2) or ""))


def as_vectors(text: str, extra_labels: dict[str, str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """What `/api/v1/query` would return per metric, had Prometheus scraped `text`."""
    vectors: dict[str, list[dict[str, Any]]] = {}
    for metric, labels, value in parse(text):
        vectors.setdefault(metric, []).append({"metric": {**labels, **(extra_labels or {})}, "value": [0, value]})
    return vectors
