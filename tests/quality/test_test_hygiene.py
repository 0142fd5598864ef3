"""The test suite, read as a reviewer would (issue 36): no test writes to a fixed path shared by
every worker and never cleaned, and no test asserts a wall-clock duration (timings belong in
`benchmarks/`; tests assert order and content)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}


def _sources(root: Path) -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"), str(path))) for path in sorted(root.rglob("*.py"))]


def fixed_tmp_paths(root: Path) -> list[str]:
    """`Path("/tmp/...")` (or open/mkdir of such a literal) in the tests: shared by every xdist
    worker and every run, never cleaned. pytest's tmp_path is the test's own."""
    found = []
    for path, tree in _sources(root):
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            first = node.args[0]
            if (name in ("Path", "open", "makedirs", "mkdir") and isinstance(first, ast.Constant)
                    and isinstance(first.value, str) and first.value.startswith("/tmp/")):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def _reads_clock(node: ast.AST) -> bool:
    return any(isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in CLOCKS
               and isinstance(sub.func.value, ast.Name) and sub.func.value.id == "time" for sub in ast.walk(node))


def _difference_of_stamps(node: ast.AST) -> bool:
    """`a.t - b.t`: the distance between two sample timestamps."""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)
            and all(isinstance(side, ast.Attribute) and side.attr == "t" for side in (node.left, node.right)))


def wall_clock_assertions(root: Path) -> list[str]:
    """Asserts that compare a duration read off the wall clock (`time.monotonic() - started < 10`,
    `b.t - a.t == approx(0.1, abs=0.06)`): they fail on a loaded machine, not on a wrong program."""
    found = []
    for path, tree in _sources(root):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assert):
                continue
            for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                sides = [compare.left, *compare.comparators]
                subtractions = [s for side in sides for s in ast.walk(side)
                                if isinstance(s, ast.BinOp) and isinstance(s.op, ast.Sub)]
                if any(_reads_clock(s) or _difference_of_stamps(s) for s in subtractions):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)[:100]}")
                    break
    return found


def test_no_test_writes_to_a_fixed_tmp_path() -> None:
    # Found: screenshots went to /tmp/gpuws-shots from 8 UI test files, shared and never cleaned.
    assert fixed_tmp_paths(TESTS) == []


def test_no_test_asserts_a_wall_clock_duration() -> None:
    # Found: sample spacing 0.1 +- 0.06 s, "under 10 s" / "under 15 s" for a run that was told to stop.
    assert wall_clock_assertions(TESTS) == []


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "import time\nfrom pathlib import Path\nSHOTS = Path('/tmp/shots')\n"
        "def test_a(b, a):\n    started = time.monotonic()\n    assert time.monotonic() - started < 10\n"
        "    assert b.t - a.t == approx(0.1, abs=0.06)\n    assert b.t > a.t\n"
        "    assert f(time.time()) == 0\n")
    assert [line.split(":")[1] for line in fixed_tmp_paths(tmp_path)] == ["3"]
    assert [line.split(":")[1] for line in wall_clock_assertions(tmp_path)] == ["6", "7"]
