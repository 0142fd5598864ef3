"""Every health check the code can report has a name in words (issue 35: raw IDs such as
`remapped_rows` were shown; the `readings` check of issue 32 came after the table)."""

from __future__ import annotations

import re
from pathlib import Path

import gpuws.core.health as health_pkg
from gpuws.core.health.names import CHECK_NAMES, check_name


def test_every_check_id_the_health_code_reports_is_named_in_words() -> None:
    source = "\n".join(p.read_text() for p in Path(health_pkg.__file__).parent.glob("*.py"))
    ids = set(re.findall(r'Finding\(\s*"([a-z_.-]+)"', source))
    assert {"ecc", "pcie", "readings"} <= ids  # the scan finds the checks
    assert sorted(ids - set(CHECK_NAMES)) == []
    assert check_name("readings") == "Impossible readings"
