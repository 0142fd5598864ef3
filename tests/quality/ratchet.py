"""Per-package counts that may only go down (napari-style ratchet), and the tool that lowers them.

Two counts per package of `gpuws/`:
- `any_lines`: lines naming `Any`, as `grep -rnw Any gpuws/PKG --include=*.py` counts them;
- `undocumented`: public functions, methods and classes (names without a leading `_`, nested
  ones included) without a docstring.

`tests/quality/counts.toml` holds the numbers; `test_ratchet.py` fails when a count goes up, and
when one went down without the file following. `python -m tests.quality.ratchet --lower` writes
the lower numbers (never a higher one).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gpuws"
COUNTS = Path(__file__).with_name("counts.toml")
KINDS = ("any_lines", "undocumented")
# grep -w: "Any" between non-word characters (word characters are letters, digits and _).
_ANY = re.compile(r"(?<![A-Za-z0-9_])Any(?![A-Za-z0-9_])")


def packages() -> list[str]:
    """The subpackages of gpuws/ (agent, app, cli, core, remote, sim, ui)."""
    return sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def _sources(package: str) -> list[Path]:
    return sorted((PACKAGE / package).rglob("*.py"))


def public_definitions(package: str) -> tuple[int, int]:
    """(public definitions, those without a docstring) in `package`."""
    total = missing = 0
    for path in _sources(package):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if not node.name.startswith("_"):
                total += 1
                missing += ast.get_docstring(node) is None
    return total, missing


def any_lines(package: str) -> int:
    """Lines naming `Any` in `package`, as `grep -rnw Any` counts them."""
    return sum(1 for path in _sources(package)
               for line in path.read_text(encoding="utf-8").splitlines() if _ANY.search(line))


def measure() -> dict[str, dict[str, int]]:
    """The counts now: {"any_lines": {package: n}, "undocumented": {package: n}}."""
    return {"any_lines": {p: any_lines(p) for p in packages()},
            "undocumented": {p: public_definitions(p)[1] for p in packages()}}


def recorded() -> dict[str, dict[str, int]]:
    """The committed counts."""
    with COUNTS.open("rb") as f:
        data = tomllib.load(f)
    return {kind: {str(k): int(v) for k, v in data.get(kind, {}).items()} for kind in KINDS}


def write(counts: dict[str, dict[str, int]]) -> None:
    """Write `counts` to the committed file."""
    lines = ["# Per-package counts that may only go down; see tests/quality/ratchet.py.",
             "# Lower them with `python -m tests.quality.ratchet --lower` once you removed `Any`s or",
             "# added docstrings.", ""]
    for kind in KINDS:
        lines.append(f"[{kind}]")
        lines.extend(f"{package} = {count}" for package, count in sorted(counts[kind].items()))
        lines.append("")
    COUNTS.write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str]) -> int:
    """`--lower`: write every count that went down (one that went up is refused: fix the code)."""
    now, old = measure(), recorded()
    up = [f"{kind} {p}: {old[kind].get(p, 0)} -> {n}" for kind in KINDS for p, n in now[kind].items()
          if n > old[kind].get(p, 0)]
    for kind in KINDS:
        for package, count in now[kind].items():
            print(f"{kind:>13} {package:<7} {old[kind].get(package, 0):>4} -> {count}")
    if "--lower" in argv:
        if up:
            print("not lowered: these went up (fix the code, do not raise the file): " + "; ".join(up))
            return 1
        write(now)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
