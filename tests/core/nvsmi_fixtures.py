"""Access to the real nvidia-smi captures in tests/fixtures/real (see its README.md).

A missing fixture fails the test loudly: these tests exist to check the parsers against reality.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.real_fixtures import REAL_FIXTURES

FIXTURES = REAL_FIXTURES
XML_DIR = FIXTURES / "nvidia-smi-xml"
CAPTURES = FIXTURES / "nvidia-smi-captures"
MIG_DIR = FIXTURES / "mig"
H100 = CAPTURES / "h100-80gb-hbm3__590.48.01.txt"
H100_MIG = CAPTURES / "h100-mig__590.48.01.txt"

_RULE = "#" * 80


def read_fixture(path: Path) -> str:
    if not path.is_file():
        raise AssertionError(f"missing real-capture fixture {path}; tests/fixtures/real is part of the repository")
    return path.read_text(encoding="utf-8")


def capture_section(path: Path, title: str) -> str:
    """The body of the section headed `# <title>` in a sectioned capture, e.g. "load :: query-gpu"."""
    lines = read_fixture(path).splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith(f"# {title}")]
    if len(heads) != 1:
        raise AssertionError(f"{path.name}: expected one section '# {title}', found {len(heads)}")
    start = next(i for i in range(heads[0], len(lines)) if lines[i] == _RULE) + 1
    end = next((i for i in range(start, len(lines)) if lines[i] == _RULE), len(lines))
    return "\n".join(lines[start:end]).strip("\n") + "\n"


def section_command(path: Path, title: str) -> str:
    """The `$ nvidia-smi ...` command line recorded for a section."""
    lines = read_fixture(path).splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith(f"# {title}"))
    return lines[head + 1].removeprefix("# $ ").strip()
