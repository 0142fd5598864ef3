"""Where the real captures of NVIDIA tool output live: inside the repository, with their origin
and licence in `tests/fixtures/real/README.md`. Tests never read anything beside the repository."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REAL_FIXTURES = REPO / "tests" / "fixtures" / "real"
