"""The repository stands alone: a clone with nothing beside it passes its own tests.

Every file the tests, scripts and benchmarks read must be inside the repository. This test reads
their sources and fails on any path that leaves it: `../` out of the root, a `shared/` folder
beside the clone, `.parent` climbing above the root, or an absolute path to a developer's tree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("tests", "scripts", "benchmarks", ".ci", "installer", "packaging")
SUFFIXES = {".py", ".sh", ".ps1", ".toml", ".cfg", ".ini", ""}

# Each pattern is a way a source names a path outside the clone.
OUTSIDE = [
    (re.compile(r"\.\./shared\b"), "../shared beside the clone"),
    (re.compile(r"""\.parent\s*/\s*["']shared["']"""), "a shared/ folder beside the clone"),
    (re.compile(r"parents\[\d+\]\.parent\b"), "a path climbing above the repository root"),
    (re.compile(r"/work/(shared|main)\b"), "a developer machine's absolute path"),
]


def _sources() -> list[Path]:
    files = []
    for top in SCANNED:
        root = REPO / top
        if not root.exists():
            continue
        for path in root.rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                files.append(path)
    return files


def outside_references(text: str) -> list[tuple[int, str]]:
    """(line number, why) for every line of `text` that names a path outside the repository."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, why in OUTSIDE:
            if pattern.search(line):
                found.append((number, why))
    return found


@pytest.mark.parametrize(
    "line",
    [
        'FIX = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"',
        "cat ../shared/fixtures/README.md",
        'X = REPO.parent / "shared"',
        "open('/work/shared/fixtures/mig/a.txt')",
    ],
)
def test_the_check_catches_each_way_out(line: str) -> None:
    assert outside_references(line)


def test_no_test_script_or_benchmark_reads_outside_the_repository() -> None:
    me = Path(__file__).resolve()
    offenders = []
    for path in _sources():
        if path.resolve() == me:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{path.relative_to(REPO)}:{n}: {why}" for n, why in outside_references(text)]
    assert not offenders, "paths outside the repository:\n" + "\n".join(offenders)


def test_the_real_captures_are_in_the_repository_with_their_origin() -> None:
    real = REPO / "tests" / "fixtures" / "real"
    readme = (real / "README.md").read_text(encoding="utf-8")
    captures = [p for p in real.rglob("*") if p.is_file() and p.name != "README.md"]
    assert len(captures) >= 20
    for capture in captures:
        assert capture.name in readme or capture.parent.name in readme, f"{capture} has no origin in README.md"
